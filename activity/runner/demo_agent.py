"""A demo ACP agent: it fixes a failing test in a throwaway project, slowly enough to watch.

Run as ``python -m activity.runner.demo_agent`` (or ``python activity/runner/demo_agent.py``)
behind the runner.
Every prompt gets a fresh scratch project in a temporary directory (removed after the turn); the
user's cwd and files are never touched. Per turn it streams commentary, sends a plan and ticks it
off, reads ``greet.py``, runs real commands there (``ls -la``, ``python3 test_greet.py``), proposes
an edit with a diff, asks permission for it (mode ``default``; not in mode ``auto`` nor after
"allow-always"), applies it or marks it failed, re-runs the test and sends a ``usage_update``.
``session/cancel`` marks unfinished calls failed and ends the turn with ``cancelled``.
``KORUWEB_DEMO_FAST=1`` (or the ``--fast`` argument, for clients that trim the environment, as
the SDK's ``spawn_agent_process`` does) removes the pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import tempfile
import uuid
from asyncio.subprocess import DEVNULL, PIPE, STDOUT
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import acp
from acp import schema

FAST = os.environ.get("KORUWEB_DEMO_FAST") == "1" or "--fast" in sys.argv[1:]
MODES = [
    schema.SessionMode(id="default", name="Default", description="Ask before editing files"),
    schema.SessionMode(id="auto", name="Auto", description="Edit files without asking"),
]
OLD_GREET = 'def greet(name):\n    return "Hello " + name\n'
NEW_GREET = 'def greet(name):\n    return f"Hello, {name}!"\n'
TEST = (
    'from greet import greet\n\nassert greet("Ada") == "Hello, Ada!", greet("Ada")\nprint("ok")\n'
)
PLAN = ["Look around the project", "Reproduce the failing test", "Fix greet()", "Re-run the test"]
PERMISSION_OPTIONS = [
    schema.PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    schema.PermissionOption(option_id="allow-always", name="Always allow", kind="allow_always"),
    schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class Cancelled(Exception):
    """The client sent ``session/cancel`` (or answered a prompt ``cancelled``)."""


@dataclass
class Session:
    mode: str = "default"
    always_allow: bool = False
    used: int = 0
    cancel: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Turn:
    sid: str
    root: Path
    session: Session
    plan: list[schema.PlanEntryStatus] = field(default_factory=lambda: ["pending"] * len(PLAN))
    open_calls: set[str] = field(default_factory=set)
    started: dict[str, schema.ToolCallStart] = field(default_factory=dict)


class DemoAgent:
    """Not an ``acp.Agent`` subclass: its stubs would answer unimplemented methods with null."""

    conn: acp.Client  # set by the SDK (on_connect) before any request arrives

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def on_connect(self, conn: acp.Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> acp.InitializeResponse:
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(),
            agent_info=schema.Implementation(
                name="koruweb-demo", title="koruweb demo agent", version="1"
            ),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> acp.NewSessionResponse:
        sid = f"demo-{uuid.uuid4().hex[:12]}"
        self._sessions[sid] = Session()
        return acp.NewSessionResponse(
            session_id=sid,
            modes=schema.SessionModeState(current_mode_id="default", available_modes=MODES),
        )

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse | None:
        if mode_id not in {m.id for m in MODES}:
            raise acp.RequestError.invalid_params({"modeId": mode_id})
        self._session(session_id).mode = mode_id
        return schema.SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session := self._sessions.get(session_id):
            session.cancel.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> acp.PromptResponse:
        session = self._session(session_id)
        session.cancel.clear()
        with tempfile.TemporaryDirectory(prefix="koruweb-demo-") as tmp:
            turn = Turn(session_id, Path(tmp), session)
            (turn.root / "greet.py").write_text(OLD_GREET)
            (turn.root / "test_greet.py").write_text(TEST)
            try:
                await self._work(turn)
            except Cancelled:
                for call_id in sorted(turn.open_calls):
                    await self._send(turn, acp.update_tool_call(call_id, status="failed"))
                return acp.PromptResponse(stop_reason="cancelled")
        return acp.PromptResponse(stop_reason="end_turn")

    async def _work(self, t: Turn) -> None:
        greet = t.root / "greet.py"
        await self._say(t, f"I'll work in a scratch project at `{t.root}`. Let me look around.")
        await self._plan(t, None, 0)
        await self._run(t, ["ls", "-la"])
        read_id = await self._start(t, "Read greet.py", "read", {"path": str(greet)})
        await self._finish(t, read_id, "completed", greet.read_text())
        await self._plan(t, 0, 1)
        await self._run(t, ["python3", "test_greet.py"])
        await self._plan(t, 1, 2)
        await self._say(
            t,
            "The test expects a comma and an exclamation mark. I'll change `greet()` to:\n\n"
            '```python\ndef greet(name):\n    return f"Hello, {name}!"\n```\n',
        )
        edit_input = {"path": str(greet), "old_string": OLD_GREET, "new_string": NEW_GREET}
        diff = [acp.tool_diff_content(str(greet), NEW_GREET, OLD_GREET)]
        edit_id = await self._start(t, "Edit greet.py", "edit", edit_input, diff)
        if not await self._allowed(t, edit_id):
            await self._finish(t, edit_id, "failed", "User refused permission")
            await self._say(t, "Understood, I left `greet.py` unchanged. The test still fails.")
            return await self._usage(t)
        await self._send(t, acp.update_tool_call(edit_id, status="in_progress"))
        await self._pause(t)
        greet.write_text(NEW_GREET)
        await self._finish(t, edit_id, "completed", None)
        await self._plan(t, 2, 3)
        await self._run(t, ["python3", "test_greet.py"])
        await self._plan(t, 3)
        await self._say(t, "**Done.** `greet()` now returns `Hello, Ada!` and the test passes.")
        await self._usage(t)

    async def _allowed(self, t: Turn, call_id: str) -> bool:
        if t.session.mode == "auto" or t.session.always_allow:
            return True
        tool_call = schema.ToolCallUpdate.model_validate(t.started[call_id].model_dump())
        answer = await self.conn.request_permission(
            session_id=t.sid, tool_call=tool_call, options=PERMISSION_OPTIONS
        )
        if answer.outcome.outcome == "cancelled" or t.session.cancel.is_set():
            raise Cancelled
        option = answer.outcome.option_id
        t.session.always_allow |= option == "allow-always"
        return option in {"allow-once", "allow-always"}

    async def _run(self, t: Turn, argv: list[str]) -> None:
        command = " ".join(argv)
        call_id = await self._start(t, f"Run `{command}`", "execute", {"command": command})
        await self._send(t, acp.update_tool_call(call_id, status="in_progress"))
        exe = shutil.which(argv[0]) or (sys.executable if argv[0] == "python3" else argv[0])
        proc = await asyncio.create_subprocess_exec(
            exe, *argv[1:], cwd=t.root, stdin=DEVNULL, stdout=PIPE, stderr=STDOUT
        )
        out, _ = await proc.communicate()
        await self._pause(t)
        output = out.decode(errors="replace").rstrip("\n")
        text = f"```console\n$ {command}\n{output}\n```\nexit code {proc.returncode}"
        await self._finish(t, call_id, "completed", text, {"exitCode": proc.returncode})

    async def _start(
        self, t: Turn, title: str, kind: schema.ToolKind, raw: dict[str, str], diff: Any = None
    ) -> str:
        call_id = f"call-{uuid.uuid4().hex[:12]}"
        where = [schema.ToolCallLocation(path=raw["path"], line=1)] if "path" in raw else None
        update = acp.start_tool_call(
            call_id,
            title,
            kind=kind,
            status="pending",
            content=diff,
            locations=where,
            raw_input=raw,
        )
        t.open_calls.add(call_id)
        t.started[call_id] = update
        await self._send(t, update)
        await self._pause(t)
        return call_id

    async def _finish(
        self,
        t: Turn,
        call_id: str,
        status: schema.ToolCallStatus,
        text: str | None,
        out: Any = None,
    ) -> None:
        content = [acp.tool_content(acp.text_block(text))] if text is not None else None
        update = acp.update_tool_call(call_id, status=status, content=content, raw_output=out)
        await self._send(t, update)
        t.open_calls.discard(call_id)
        await self._pause(t)

    async def _say(self, t: Turn, markdown: str) -> None:
        message_id = f"msg-{uuid.uuid4().hex[:12]}"
        words = re.findall(r"\S+\s*", markdown)
        for i in range(0, len(words), 5):
            chunk = acp.update_agent_message_text("".join(words[i : i + 5]))
            await self._send(t, chunk.model_copy(update={"message_id": message_id}))
            await self._pause(t, 0.1)
        await self._pause(t)

    async def _plan(self, t: Turn, done: int | None, doing: int | None = None) -> None:
        if done is not None:
            t.plan[done] = "completed"
        if doing is not None:
            t.plan[doing] = "in_progress"
        entries = [
            acp.plan_entry(text, priority="high" if i == 2 else "medium", status=status)
            for i, (text, status) in enumerate(zip(PLAN, t.plan, strict=True))
        ]
        await self._send(t, acp.update_plan(entries))
        await self._pause(t)

    async def _usage(self, t: Turn) -> None:
        t.session.used += 4_321
        cost = schema.Cost(amount=round(t.session.used * 3e-6, 4), currency="USD")
        used = t.session.used
        await self._send(
            t, schema.UsageUpdate(session_update="usage_update", used=used, size=200_000, cost=cost)
        )

    async def _send(self, t: Turn, update: Any) -> None:
        await self.conn.session_update(session_id=t.sid, update=update)

    async def _pause(self, t: Turn, seconds: float = 0.4) -> None:
        if not FAST:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(t.session.cancel.wait(), seconds)
        if t.session.cancel.is_set():
            raise Cancelled

    def _session(self, session_id: str) -> Session:
        if session_id not in self._sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        return self._sessions[session_id]


def main() -> None:
    asyncio.run(acp.run_agent(cast(acp.Agent, DemoAgent())))


if __name__ == "__main__":
    main()
