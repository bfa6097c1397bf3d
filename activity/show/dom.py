"""The one source of every DOM id a page, a push or a script looks elements up by.

Python uses these functions, templates the ``dom_id`` filter (``{{ row.pk|dom_id:"tool" }}``),
and scripts read a prefix from their tag's ``data-`` attributes.
"""

from __future__ import annotations

import uuid

PREFIXES = {
    "turn": "turn-",  # a turn's section
    "tool": "tool-",  # a call's row: permalinks (#tool-<uuid>) and pushes morph it
    "details": "details-",  # a row's expandable details, kept open across pushes
    "tools": "tools-",  # a turn's table body, where pushes append new rows
    "turn-head": "turn-head-",  # a turn's head: prompt, status, plan, notes
    "reply": "reply-",  # a turn's reply
    "turn-title": "turn-title-",  # a turn's heading, which names its section
    # What a row's accessible name is made of (aria-labelledby): its label, status, duration.
    "call-label": "call-label-",
    "call-status": "call-status-",
    "call-duration": "call-duration-",
}
TURNS = "turns"  # the chat page's list of turns, where pushes append new turns
CHAT_HEAD = "chat-head"  # the run's title, agent, mode, usage and runner
DRIVE = "drive"  # what the web may do to the run, and the messages on their way to it
RUN_FILTER = "run-filter"  # the filter bar: counts, chips, the jumps to a failure and a prompt
# The regions of a chat page drawn from the chat at its version: a push brings each to the new
# version, and an HTTP reload fetches each again (static/koruweb/live/live.js, REGIONS). Who is
# watching is not versioned: it follows its own pushes (activity/push/watching.py).
REGIONS = (CHAT_HEAD, RUN_FILTER, TURNS, DRIVE)


def dom_id(kind: str, pk: uuid.UUID | str) -> str:
    return f"{PREFIXES[kind]}{pk}"


def tool(pk: uuid.UUID | str) -> str:
    return dom_id("tool", pk)


def reply(pk: uuid.UUID | str) -> str:
    return dom_id("reply", pk)
