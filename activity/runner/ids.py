"""The agent's own ids stay with the runner (issue 22): the server sees opaque ones.

An agent chooses its JSON-RPC request ids, its permission options' ``optionId`` and its
elicitations' ``elicitationId``, and may put anything in them — a key it found, say. The
server masks every string of an agent's frame before it keeps or shows it
(``activity/live/boundary.py``), so it could not repeat such an id to the agent exactly, and it
must not keep one as sent. So the runner never forwards one:

- every request of the agent is forwarded under the runner's own number (1, 2, … per run), so
  a resent frame carries the same number and two requests never share one;
- a permission request's options are forwarded as ``o0``, ``o1``, … in the agent's order; the
  server's answer names one of those, and the runner tells the agent the option it stands for;
- an ``elicitationId`` is forwarded as ``e1``, ``e2``, …, the same one wherever the agent
  repeats it (``elicitation/complete``).

The SDK answers each request under the agent's own id, so only the options are mapped back.
"""

from __future__ import annotations

import json
from typing import Any

PERMISSION = "session/request_permission"


class AgentIds:
    """The opaque ids of one run, and what the agent's options were called."""

    def __init__(self) -> None:
        self.last = 0  # the last request number given out
        self.first = 0  # numbers given out start after it (a resumed chat's: ``start_after``)
        self.options: dict[int, dict[str, Any]] = {}  # request → {opaque option: the agent's}
        # The agent's elicitation ids (as JSON) → opaque ones; never dropped, so never reused.
        self.elicitations: dict[str, str] = {}

    def start_after(self, seq: int) -> None:
        """A resumed chat has the numbers of the runners before this one: this one's start
        after the chat's last seq, which each of their requests took one of."""
        self.first = self.last = max(self.last, seq)

    def forward(self, message: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        """A message of the agent as the server may see it (a copy: the SDK still reads the
        agent's own), and the number its request goes by (None for a notification)."""
        params = message.get("params")
        if isinstance(params, dict) and "elicitationId" in params:
            params = {**params, "elicitationId": self.elicitation(params["elicitationId"])}
            message = {**message, "params": params}
        if "id" not in message:
            return message, None
        self.last += 1
        request_id = self.last
        if message.get("method") == PERMISSION and isinstance(params, dict):
            message = {**message, "params": self.offered(request_id, params)}
        return {**message, "id": request_id}, request_id

    def offered(self, request_id: int, params: dict[str, Any]) -> dict[str, Any]:
        listed = params.get("options")
        if not isinstance(listed, list):
            return params
        names: dict[str, Any] = {}
        options = []
        for n, option in enumerate(listed):
            if isinstance(option, dict) and "optionId" in option:
                names[f"o{n}"] = option["optionId"]
                option = {**option, "optionId": f"o{n}"}
            options.append(option)
        self.options[request_id] = names
        return {**params, "options": options}

    def elicitation(self, agents: Any) -> str:
        key = json.dumps(agents, sort_keys=True)
        return self.elicitations.setdefault(key, f"e{self.first + len(self.elicitations) + 1}")

    def option(self, request_id: int | str, opaque: Any) -> Any:
        """The agent's own id of the option the server named ``opaque`` in its answer to
        request ``request_id``; None if that request offered no such option."""
        names = self.options.get(request_id) if isinstance(request_id, int) else None
        return names.get(opaque) if names is not None and isinstance(opaque, str) else None

    def forget(self, request_id: int | str) -> None:
        """The request is answered: its options are needed no more."""
        if isinstance(request_id, int):
            self.options.pop(request_id, None)
