"""What the web may ask of a runner (issue 16), and what the runner tells it.

A runner started with ``--allow-web`` takes a person's prompts (``orders.WebPromptFrame``),
cancels of the running turn (``WebCancel``), mode switches (``WebMode``) and the end of the run
(``WebStop``: its turn cancelled, no queued prompt run, the runner exits) from the server.
Prompts from every source — ``--prompt``, standard input, the web — wait in one queue and run
in arrival order, one turn at a time; a web prompt runs once however often it is sent (every
reconnect sends it again until its turn has started). A cancel does what Ctrl-C does. A mode
switch is carried out only for a mode in ``--web-modes`` that the agent has: the runner never
trusts the server on this. A runner without ``--allow-web`` refuses every such frame
(``WebRefused``) and does nothing else.

The runner tells the server what the run allows and what the agent offers (``SessionInfo``)
once the agent's session has started, and again whenever it changes: the agent's modes and
current mode (``session/new``, ``current_mode_update``, ``config_option_update``), its slash
commands (``available_commands_update``), and its session: its id and whether the agent can
resume and close it (``initialize``'s capabilities).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from pydantic import ValidationError

from activity.runner import setup
from activity.runner.link import say
from activity.runner.outbox import Outbox, cut_text
from activity.runner.turns import TurnTable
from activity.wire.frames import SESSION_ID_CHARS, SessionInfo, WebRefused, acp_parts
from activity.wire.orders import WebCancel, WebMode, WebPromptFrame, WebStop

WebFrame = WebPromptFrame | WebCancel | WebMode | WebStop
NOT_ALLOWED = "this runner was not started with --allow-web"
NOT_RUNNING = "that turn is not running"
EXITING = "this runner has run its prompts and is exiting (start it with --stay to keep it)"
STOPPED = "this run was stopped from the web"
# Modes that let an agent act without asking anyone (docs/agents.md): said aloud when listed.
BYPASSING = frozenset(
    {
        "bypassPermissions",
        "full-access",
        "yolo",
        "https://agentclientprotocol.com/protocol/session-modes#autopilot",  # Copilot CLI
    }
)
# frames.SessionInfo's bounds.
NAME_CHARS, SAID_CHARS, HINT_CHARS = 100, 500, 200
MAX_MODES, MAX_COMMANDS = 50, 200


def shown(text: str) -> str:
    """A person's text as the runner's terminal may show it: no control characters (an
    escape sequence from the web must not drive the terminal)."""
    return "".join(c if c.isprintable() else "\ufffd" for c in text)


class NoSuchMode(Exception):
    """``--web-modes`` names a mode the agent does not have (exit code 5)."""


@dataclass(frozen=True)
class Prompt:
    text: str
    web_prompt_id: uuid.UUID | None = None  # the web's message this is, if it is one


class Prompts:
    """The prompts to run, in arrival order. ``stays``: the runner keeps waiting for the web's
    prompts once its own sources have ended; otherwise it stops when they have ended and
    nothing is left to run (``closing``)."""

    def __init__(self, stays: bool) -> None:
        self.stays = stays
        self.queue: asyncio.Queue[Prompt | None] = asyncio.Queue()
        self.ended = False  # the runner's own prompts (--prompt, standard input) are all in
        self.closing = False  # nothing more will run

    def add(self, prompt: Prompt) -> None:
        self.queue.put_nowait(prompt)

    def end(self) -> None:
        self.ended = True
        self.queue.put_nowait(None)  # wakes ``next``

    def stop(self) -> None:
        """Run nothing more: the prompts waiting are dropped, and ``next`` says the runner is
        done once the running turn has ended."""
        self.stays = False
        while not self.queue.empty():
            self.queue.get_nowait()
        self.end()

    async def next(self) -> Prompt | None:
        """The next prompt to run, or None when the runner is done."""
        while True:
            if self.ended and not self.stays and self.queue.empty():
                self.closing = True
                return None
            prompt = await self.queue.get()
            if prompt is not None:
                return prompt

    async def read(self, allow_web: bool) -> None:
        """Standard input's lines, one prompt each, until it ends."""
        web = " (the web may prompt too)" if allow_web else ""
        say(f"type a prompt and press Enter{web}; Ctrl-D ends")
        while line := await read_line():
            if line.strip():
                self.add(Prompt(line.rstrip("\n")))
        self.end()
        if self.stays:
            say("standard input ended; still taking prompts from the web (Ctrl-C quits)")


async def read_line() -> str:
    """A line of standard input, read in a daemon thread: a runner that stops while a person
    has not typed the next prompt does not wait for them to press Enter."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def give(text: str) -> None:
        if not line.done():
            line.set_result(text)

    def read() -> None:
        text = sys.stdin.readline()
        with contextlib.suppress(RuntimeError):  # the runner has stopped: its loop is closed
            loop.call_soon_threadsafe(give, text)

    threading.Thread(target=read, daemon=True).start()
    return await line


async def set_mode(
    conn: ClientSideConnection, session_id: str, modes: setup.Modes, mode: str
) -> None:
    """Switch the agent's session to ``mode``, the way the agent offers it; raises the
    agent's ``RequestError`` if it refuses."""
    if modes.config_id is not None:
        await conn.set_config_option(session_id=session_id, config_id=modes.config_id, value=mode)
    else:
        await conn.set_session_mode(session_id=session_id, mode_id=mode)


def bounded_modes(modes: setup.Modes) -> list[dict[str, str]]:
    """The agent's modes within ``frames.SessionInfo``'s bounds (a mode whose id is too long
    to be named in a frame is left out: the web could never choose it)."""
    found = [
        {"id": mode, "name": cut_text(name, NAME_CHARS), "description": cut_text(said, SAID_CHARS)}
        for mode, name, said in zip(modes.ids, modes.names, modes.said(), strict=True)
        if 0 < len(mode) <= NAME_CHARS
    ]
    return found[:MAX_MODES]


def commands(listed: Any) -> list[dict[str, str]]:
    """An ``available_commands_update``'s commands within ``frames.SessionInfo``'s bounds."""
    found: list[dict[str, str]] = []
    for command in listed if isinstance(listed, list) else []:
        name = command.get("name") if isinstance(command, dict) else None
        if not isinstance(name, str) or not 0 < len(name) <= NAME_CHARS:
            continue
        said = command.get("description")
        given = command.get("input")
        hint = given.get("hint") if isinstance(given, dict) else None
        found.append(
            {
                "name": name,
                "description": cut_text(said, SAID_CHARS) if isinstance(said, str) else "",
                "hint": cut_text(hint, HINT_CHARS) if isinstance(hint, str) else "",
            }
        )
    return found[:MAX_COMMANDS]


class Web:
    """The web's requests to this runner, and what the runner tells the web."""

    def __init__(
        self,
        outbox: Outbox,
        table: TurnTable,
        *,
        allow_web: bool,
        web_modes: list[str],
        stays: bool,
    ) -> None:
        self.outbox = outbox
        self.table = table
        self.allow_web = allow_web
        self.web_modes = list(dict.fromkeys(web_modes)) if allow_web else []
        self.prompts = Prompts(stays)
        self.seen: set[uuid.UUID] = set()  # web prompts taken: each runs once
        self.conn: ClientSideConnection | None = None
        self.session_id = ""
        self.modes = setup.Modes((), (), None)
        self.mode: str | None = None  # the session's mode as the runner last knew it
        self.commands: list[dict[str, str]] = []
        self.started = False  # the session has started: SessionInfo may go
        self.told: dict[str, Any] | None = None  # the last SessionInfo's fields
        self.attempt_id: uuid.UUID | None = None  # the running turn
        self.resumable = False  # the agent can resume or load its session (initialize)
        self.closable = False  # the agent can close it (session/close)
        self.stopped_by: str | None = None  # the web ended the run (WebStop), who did
        self.tasks: set[asyncio.Task[Any]] = set()

    @property
    def stays(self) -> bool:
        return self.prompts.stays

    def start(self, conn: ClientSideConnection, session_id: str, modes: setup.Modes) -> None:
        """The agent's session has started (its ``--mode`` set): check ``--web-modes`` against
        the agent's own modes, then tell the server."""
        self.conn, self.session_id, self.modes = conn, session_id, modes
        for mode in self.web_modes:
            if mode not in modes.ids:
                offered = modes.describe() or "none"
                said = f"the agent has no mode {mode!r} (--web-modes); its modes: {offered}"
                raise NoSuchMode(said)
        if bypassing := [mode for mode in self.web_modes if mode in BYPASSING]:
            listed = ", ".join(bypassing)
            say(f"the web may switch the agent to {listed}: it then acts without asking anyone")
        self.started = True
        self.tell()

    def tell(self, force: bool = False) -> None:
        """Send ``SessionInfo`` if anything in it changed (or ``force``)."""
        mode = self.mode if self.mode and len(self.mode) <= NAME_CHARS else None
        fields: dict[str, Any] = {
            "allow_web": self.allow_web,
            "web_modes": [m for m in self.web_modes if 0 < len(m) <= NAME_CHARS][:MAX_MODES],
            "modes": bounded_modes(self.modes),
            "mode": mode,
            "commands": self.commands,
            "stays": self.allow_web and self.stays,
            "session_id": self.session_id if len(self.session_id) <= SESSION_ID_CHARS else "",
            "resumable": self.resumable and len(self.session_id) <= SESSION_ID_CHARS,
            "closable": self.closable,
        }
        if not self.started or (fields == self.told and not force):
            return
        try:
            self.outbox.add(SessionInfo, **fields)
        except ValidationError as error:  # a bound missed: the run goes on without it
            say(f"could not tell the server what the agent offers: {error.errors()[0]['msg']}")
            return
        self.told = fields

    def observe(self, event: StreamEvent) -> None:
        """The SDK's raw-frame hook: the agent's updates to its modes and commands."""
        message = event.message
        if event.direction is not StreamDirection.INCOMING:
            return
        if message.get("method") != "session/update":
            return
        params, update = acp_parts(message)
        if update is None or (self.session_id and params.get("sessionId") != self.session_id):
            return
        kind = update.get("sessionUpdate")
        if kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
            self.mode = update["currentModeId"]
        elif kind == "config_option_update":
            found = setup.modes({"configOptions": update.get("configOptions")})
            if found.config_id is None:
                return  # no mode among the options that changed
            self.modes, self.mode = found, found.current or self.mode
        elif kind == "available_commands_update":
            self.commands = commands(update.get("availableCommands"))
        else:
            return
        self.tell()

    # The web's requests, from the link.

    def receive(self, frame: WebFrame) -> None:
        by = f" by {shown(frame.by)}" if frame.by else ""
        if not self.allow_web:
            say(f"refused the web's {frame.type}{by}: {NOT_ALLOWED}")
            self.refuse(frame.id, NOT_ALLOWED)
            return
        match frame:
            case WebPromptFrame():
                self.prompt(frame, by)
            case WebCancel():
                self.cancel(frame, by)
            case WebMode():
                self.spawn(self.switch(frame, by))
            case WebStop():
                self.stop(by)

    def refuse(self, request_id: uuid.UUID, reason: str) -> None:
        self.outbox.add(WebRefused, id=request_id, reason=cut_text(reason, SAID_CHARS))

    def prompt(self, frame: WebPromptFrame, by: str) -> None:
        if frame.id in self.seen:
            return  # sent again on a reconnect: it runs once
        if self.prompts.closing or self.stopped_by is not None:
            reason = EXITING if self.stopped_by is None else STOPPED
            say(f"refused a prompt from the web{by}: {reason}")
            self.refuse(frame.id, reason)
            return
        self.seen.add(frame.id)
        first = frame.text.strip().splitlines()[0] if frame.text.strip() else ""
        say(f"a prompt from the web{by}: {shown(cut_text(first, 80))}")
        self.prompts.add(Prompt(frame.text, frame.id))

    def cancel(self, frame: WebCancel, by: str) -> None:
        if self.attempt_id is None or frame.attempt_id != self.attempt_id:
            self.refuse(frame.id, NOT_RUNNING)
            return
        say(f"cancelling the turn (asked from the web{by})")
        self.cancel_turn()

    def stop(self, by: str) -> None:
        """End the run as the web asked: no prompt runs any more, the running turn is
        cancelled; the runner then closes the agent's session and exits (``main.py``)."""
        if self.stopped_by is not None:
            return
        say(f"stopping the run (asked from the web{by})")
        self.stopped_by = by
        self.prompts.stop()
        if self.attempt_id is not None:
            self.cancel_turn()

    def cancel_turn(self) -> None:
        """What Ctrl-C does: the turn's open prompts are answered cancelled, the agent is sent
        ``session/cancel``."""
        if self.conn is None:
            return
        self.table.cancel_all()
        self.spawn(self.conn.cancel(session_id=self.session_id))

    async def switch(self, frame: WebMode, by: str) -> None:
        mode = frame.mode
        if mode not in self.web_modes:
            allowed = ", ".join(self.web_modes) or "none"
            reason = f"mode {mode!r} is not one of this runner's --web-modes ({allowed})"
        elif not self.started or self.conn is None:
            reason = "the agent's session has not started yet"
        elif mode not in self.modes.ids:
            reason = f"the agent has no mode {mode!r} now"
        else:
            try:
                await set_mode(self.conn, self.session_id, self.modes, mode)
            except Exception as error:  # the agent refused it, or is gone
                reason = f"the agent refused mode {mode!r}: {error}"
            else:
                say(f"switched the agent to mode {mode!r} (asked from the web{by})")
                self.mode = mode
                self.tell(force=True)
                return
        say(f"refused the web's switch to mode {mode!r}{by}: {reason}")
        self.refuse(frame.id, reason)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.done)

    def done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the agent is gone: said
            say(f"a request to the agent failed: {task.exception()}")  # where the run ends
