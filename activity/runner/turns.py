"""The runner's ACP client side: raw frames out in wire order, and the live turn table.

Every message from the agent is queued in the outbox by the SDK's observer hook the moment it
is read, before any handler awaits, so nothing is reordered and nothing the SDK's typed models
drop is lost (docs/gotchas.md#the-sdks-typed-models-drop-data) — except a
``session/cancel``, which only a client sends: the server would take it for the runner's own.
Requests the agent blocks on —
``session/request_permission`` and ``elicitation/create`` — stay open in the live turn table
until the server sends an answer, or the turn is cancelled; several can be open at once, keyed
by the number the runner forwarded them under: the agent's own ids never reach the server
(``ids.py``), and an answer names the runner's opaque ids.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    CancelElicitationResponse,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateOtherElicitationRequest,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationMode,
    PermissionOption,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from pydantic import TypeAdapter, ValidationError

from activity.runner.ids import AgentIds
from activity.runner.link import say
from activity.runner.outbox import Outbox
from activity.wire.acp import META_CWD
from activity.wire.frames import Acp, PromptOutcome

# The requests whose handlers wait for a person, each with the model the SDK validates it by:
# a request that fails it never reaches its handler (the SDK answers "invalid params").
BLOCKING: dict[str, TypeAdapter[Any]] = {
    "session/request_permission": TypeAdapter(RequestPermissionRequest),
    "elicitation/create": TypeAdapter(CreateElicitationRequest),
}
SERVED = {*BLOCKING, "session/update"}
CANCELLED_PERMISSION = {"outcome": "cancelled"}
CANCELLED_QUESTION = {"action": "cancel"}


class TurnTable:
    """Open requests of the agent, each waiting for a person's answer."""

    def __init__(self, outbox: Outbox, cwd: str | None = None) -> None:
        self.outbox = outbox
        self.cwd = cwd  # the session's directory, where the agent's commands run
        self.ids = AgentIds()  # the agent's ids, kept here; the server sees opaque ones
        self.arrived: dict[str, deque[int]] = defaultdict(deque)  # requests, by method
        self.waiting: dict[str | int, asyncio.Future[dict[str, Any]]] = {}
        self.early: dict[str | int, dict[str, Any]] = {}  # answers that beat their handler
        # ``session/load`` replays the conversation the server has already: held back
        # (sessions.take_up)
        self.replaying = False

    def observe(self, event: StreamEvent) -> None:
        """The SDK's raw-frame hook: queue what the agent sent, in the order it was read."""
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if message.get("method") == "session/cancel":  # the turn's calls are cancelled now
                self.outbox.add(Acp, message=message)
            return  # our other messages, and responses: the turn frames say what they mean
        method = message.get("method")
        if method is None or (self.replaying and method == "session/update"):
            return
        if method == "session/cancel":  # only a client sends it; forwarded, it would read as ours
            say("the agent sent 'session/cancel', which only a client sends; ignored")
            return
        if method == "session/request_permission" and self.cwd:
            message = with_cwd(message, self.cwd)
        message, request_id = self.ids.forward(message)
        seq = self.outbox.add(Acp, message=message)
        if request_id is None:
            if method not in SERVED and not str(method).startswith("_"):
                say(f"the agent sent {str(method)[:80]!r}, which koruweb does not understand")
                self.outbox.reported.add(seq)
            return
        if method not in SERVED:
            say(f"the agent asked for {str(method)[:80]!r}, which koruweb does not serve")
            self.outbox.reported.add(seq)
        elif method in BLOCKING:
            if self.valid(method, event.message.get("params")):
                self.arrived[method].append(request_id)
                return
            self.outbox.reported.add(seq)
        self.ids.forget(request_id)  # no handler will wait for an answer to it

    def valid(self, method: str, params: Any) -> bool:
        """Whether the SDK will start this request's handler (it answers the others itself)."""
        try:
            request = BLOCKING[method].validate_python(params)
        except ValidationError as error:
            say(f"the agent sent a {method} koruweb cannot read: {error.errors()[0]['msg']}")
            return False
        if isinstance(request, CreateOtherElicitationRequest):  # refused before its handler
            say(f"the agent asked a question in a mode koruweb does not know: {request.mode!r:.80}")
            return False
        return True

    async def wait(self, method: str, cancelled: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Wait for the answer to the oldest request of ``method`` whose handler started.

        Handlers start in the order their requests were read, so the oldest id is this one.
        """
        request_id = self.arrived[method].popleft()
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        if request_id in self.early:
            future.set_result(self.early.pop(request_id))
        try:
            outcome = await future
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The handler itself is cancelled (the connection closes): no response can
                # go out any more, and one that tried would wait for the closed sender forever.
                raise
            outcome = cancelled  # ``cancel_all``: the turn is cancelled, the agent is told so
        finally:
            self.waiting.pop(request_id, None)
        return request_id, outcome

    def told(self, request_id: int, outcome: dict[str, Any]) -> None:
        """Record what the agent is told (in the opaque ids the server knows), before the
        response goes out. An answer's content is never recorded: it may be secret, and it
        only ever lives in memory."""
        recorded = {key: value for key, value in outcome.items() if key != "content"}
        self.ids.forget(request_id)
        self.outbox.add(PromptOutcome, request_id=request_id, outcome=recorded)

    def answer(self, request_id: str | int, outcome: dict[str, Any]) -> None:
        """The server's answer to request ``request_id`` (the runner's number for it)."""
        future = self.waiting.get(request_id)
        if future is None:
            self.early[request_id] = outcome
        elif not future.done():
            future.set_result(outcome)

    def cancel_all(self) -> None:
        """The turn is cancelled: every open request is answered ``cancelled``."""
        for future in list(self.waiting.values()):
            if not future.done():
                future.cancel()


def with_cwd(message: dict[str, Any], cwd: str) -> dict[str, Any]:
    """A permission request that says which directory its command runs in: the session's,
    unless the agent said (a person approves a command knowing where it runs). A copy: the SDK
    still reads the agent's own message."""
    params = message.get("params")
    if not isinstance(params, dict):
        return message
    found = params.get("_meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    if META_CWD in meta:
        return message
    return {**message, "params": {**params, "_meta": {**meta, META_CWD: cwd}}}


def _refused(method: str) -> Callable[..., Awaitable[None]]:
    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise RequestError.method_not_found(method)

    return refuse


class RunnerClient:
    """What the agent may ask of koruweb: permission, questions. No files, no terminals.

    The SDK looks its handlers up by name; what is missing here is "method not found" — except
    the terminal methods, which the SDK answers with an empty success when their handler is
    missing, as if a terminal had been made: those refuse here.
    """

    def __init__(self, table: TurnTable) -> None:
        self.table = table

    create_terminal = _refused("terminal/create")
    terminal_output = _refused("terminal/output")
    release_terminal = _refused("terminal/release")
    wait_for_terminal_exit = _refused("terminal/wait_for_exit")
    kill_terminal = _refused("terminal/kill")

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # already forwarded raw by the observer

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kw: Any
    ) -> RequestPermissionResponse:
        request_id, outcome = await self.table.wait(
            "session/request_permission", CANCELLED_PERMISSION
        )
        offered = {option.option_id for option in options}
        picked = outcome.get("optionId") if outcome.get("outcome") == "selected" else None
        own = self.table.ids.option(request_id, picked)  # the agent's id for the server's
        if isinstance(own, str) and own in offered:
            self.table.told(request_id, {"outcome": "selected", "optionId": picked})
            chosen = AllowedOutcome(outcome="selected", option_id=own)
            return RequestPermissionResponse(outcome=chosen)
        self.table.told(request_id, CANCELLED_PERMISSION)
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        request_id, outcome = await self.table.wait("elicitation/create", CANCELLED_QUESTION)
        action = outcome.get("action")
        self.table.told(
            request_id, {"action": action if action in ("accept", "decline") else "cancel"}
        )
        match action:
            case "accept":
                content = outcome.get("content")
                return AcceptElicitationResponse(
                    action="accept", content=content if isinstance(content, dict) else {}
                )
            case "decline":
                return DeclineElicitationResponse(action="decline")
        return CancelElicitationResponse(action="cancel")
