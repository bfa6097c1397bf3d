"""The one refusal a person reads: a request from the web that changes nothing, and why.

Answering a prompt (``answers``), driving a run (``drive``) and starting one on a host
(``host_views``) each turn it into a response with its ``status``: 409 by default (the run
moved on: answered already, offline, not running), 400 for a form that makes no sense, 403
for someone whose role does not allow it, 404 for something not there.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request that changes nothing, with the reason a person reads and the HTTP status."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status
