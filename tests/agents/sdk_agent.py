r"""Scripted ACP agent on the Python SDK, for integration tests. Deterministic, no pauses.

Run: ``python tests/agents/sdk_agent.py``. ``session/new`` answers sessionId ``sdk-<n>`` (n = 1, 2,
… per process; ``sdk-<uuid4 hex[:12]>`` with SDK_AGENT_SESSIONS, see the end) with modes
``default``/``auto``; ``session/set_mode`` to another id → error -32602 (the mode changes nothing
below). The script is the first word of the prompt text, lower-cased. ``P`` is ``t<turn>``, the
1-based turn number within the session (turn 1 → ``t1-read``, …; a resumed or loaded session counts
on); ``CWD`` is the cwd given to ``session/new`` (nothing is read or written there; resume and load
keep it). All chunks of a turn's agent message share messageId ``P-msg``. What each script sends,
in order:

basic → end_turn
  1. plan [Read notes.txt (high, in_progress), Edit notes.txt (medium, pending)]
  2. tool_call P-read "Read notes.txt" kind read, status completed, locations [CWD/notes.txt
     line 1], rawInput {path}, content [text "hello\n"]
  3. plan [Read notes.txt completed, Edit notes.txt in_progress]
  4. tool_call P-edit "Edit notes.txt" kind edit, status pending, locations as above,
     rawInput {path, old_string, new_string}, content [diff CWD/notes.txt "hello\n" → "hello,
     world\n"]
  5. tool_call_update P-edit status in_progress
  6. tool_call_update P-edit status completed, rawOutput {"ok": true} (content untouched)
  7. plan [both completed]
  8. agent_message_chunk "Done: ", agent_message_chunk "edited notes.txt."
permission → end_turn (or cancelled)
  1. tool_call P-perm "Run echo hello" kind execute, status pending, rawInput {command: "echo
     hello"}
  2. session/request_permission, toolCall = the same fields, options [allow-once "Allow once"
     allow_once, reject "Reject" reject_once]
  3. allow-once → tool_call_update P-perm completed, content [text "hello"], rawOutput "hello";
     reject → tool_call_update P-perm failed, content [text "User refused permission"];
     outcome cancelled (or session/cancel seen) → tool_call_update P-perm failed (no content),
     stopReason cancelled, nothing more
  4. agent_message_chunk "Permission outcome: <optionId>"
question → end_turn (or cancelled)
  1. tool_call P-ask "Asking for your input" kind other, status pending, rawInput {questions},
     _meta {"claudeCode": {"toolName": "AskUserQuestion"}}
  2. tool_call_update P-ask title "Which database should I use?"
  3. elicitation/create {mode "form", sessionId, toolCallId P-ask, message "Which database should
     I use?", requestedSchema {type "object", properties {question_0: {type string, title
     "Database", oneOf [{const/title "Postgres", description "Relational, robust"}, {const/title
     "SQLite", description "Single file"}]}, question_0_custom: {type string, title "Other",
     description}}}}, sent as a raw dict (see ``elicit``). Not sent when the client did not
     advertise elicitation.form: then P-ask failed, content [text "Client does not support form
     elicitation"], message "I could not ask: no form elicitation." → end_turn.
  4. accept → ANSWER = "<question_0> (<question_0_custom>)" if both, else whichever is given,
     else "(no answer)"; tool_call_update P-ask completed, content [text "Database: ANSWER"],
     rawOutput {"answers": <content>}; agent_message_chunk "You chose: ANSWER".
     decline → P-ask failed, content [text "User declined to answer"]; message "You declined.".
     cancel (or session/cancel seen) → P-ask failed, content [text "Cancelled"]; stopReason
     cancelled. An error response → P-ask failed, content [text "Elicitation failed: …"],
     message "I could not ask the question."
slow [SECONDS] → end_turn (or cancelled)
  1. tool_call P-slow "Wait 30 s" (SECONDS, default 30, formatted with :g) kind execute,
     status in_progress, rawInput {seconds: 30.0}
  2. session/cancel within SECONDS → tool_call_update P-slow failed, content [text "Cancelled"],
     stopReason cancelled; else P-slow completed and message "Waited 30 s"
exit → no answer
  1. tool_call P-exit "Crash mid-turn" kind execute, status in_progress; then the process exits
     with code 3 without answering session/prompt
anything else → agent_message_chunk "Unknown script '<word>'. Known: basic, permission,
  question, slow, exit" → end_turn

Sessions across processes, opt-in by environment (by default: none of this is advertised, and
``session/resume``, ``session/load``, ``session/close`` answer -32601 method not found):
SDK_AGENT_SESSIONS=DIR
  every session is kept in ``DIR/<sessionId>.json``: {"cwd", "turns", "updates": [each
  session/update's ``update`` as sent, dumped by alias as on the wire]}, the whole file rewritten
  at session/new, at each update as it is sent, and after each prompt; ids ``sdk-<hex12>``.
SDK_AGENT_CAN=resume,load,close (any subset, comma-separated; default none; another word → exit)
  what ``initialize`` advertises, in agentCapabilities: load → ``loadSession: true``; resume →
  ``sessionCapabilities.resume: {}``; close → ``sessionCapabilities.close: {}``. Not advertised →
  -32601. Without SDK_AGENT_SESSIONS the three act on this process's sessions only.
session/resume → the stored session (unknown id → -32602), taken up in memory: no update sent;
  answers the modes as session/new does; turns count on (2 turns stored → the next is ``t3``).
session/load → the same, but first replays every stored update, in order, as session/update
  (as gemini-cli does; not stored again); then answers the modes.
session/close → the session dropped from memory (a turn running in it is cancelled) and
  ``DIR/<sessionId>.closed`` written (empty); unknown id → -32602. A closed session can be
  resumed or loaded again.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import acp
from acp import schema
from acp.meta import CLIENT_METHODS

MODES = [
    schema.SessionMode(id="default", name="Default"),
    schema.SessionMode(id="auto", name="Auto"),
]
QUESTION = "Which database should I use?"
SCRIPTS = ("basic", "permission", "question", "slow", "exit")
CAN = ("resume", "load", "close")
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class Cancelled(Exception):
    pass


@dataclass
class Session:
    cwd: str
    turns: int = 0
    updates: list[dict[str, Any]] = field(default_factory=list)  # as sent, dumped by alias
    cancel: asyncio.Event = field(default_factory=asyncio.Event)


class SdkAgent:
    conn: acp.Client

    def __init__(self, store: str | None = None, can: str = "") -> None:
        self.sessions: dict[str, Session] = {}
        self.started = 0
        self.form_elicitation = False
        self.store = Path(store) if store else None
        self.can = {word.strip() for word in can.split(",") if word.strip()}
        if unknown := self.can - set(CAN):
            raise SystemExit(f"sdk_agent: SDK_AGENT_CAN: unknown {sorted(unknown)}; known {CAN}")
        if self.store:
            self.store.mkdir(parents=True, exist_ok=True)

    def on_connect(self, conn: acp.Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities=None, **kwargs: Any):
        elicitation = client_capabilities.elicitation if client_capabilities else None
        self.form_elicitation = bool(elicitation and elicitation.form is not None)
        answer = acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_info=schema.Implementation(name="koruweb-sdk-test-agent", version="1"),
        )
        if self.can:  # only then: the default answer stays as it was, field for field
            answer.agent_capabilities = self.capabilities()
        return answer

    def capabilities(self) -> schema.AgentCapabilities:
        lifecycle: dict[str, Any] = {}
        if "resume" in self.can:
            lifecycle["resume"] = schema.SessionResumeCapabilities()
        if "close" in self.can:
            lifecycle["close"] = schema.SessionCloseCapabilities()
        fields: dict[str, Any] = {}
        if "load" in self.can:
            fields["load_session"] = True
        if lifecycle:
            fields["session_capabilities"] = schema.SessionCapabilities(**lifecycle)
        return schema.AgentCapabilities(**fields)

    async def new_session(self, cwd: str, **kwargs: Any):
        self.started += 1  # not len(self.sessions): session/close drops one
        sid = f"sdk-{uuid.uuid4().hex[:12]}" if self.store else f"sdk-{self.started}"
        self.sessions[sid] = Session(cwd)
        self.save(sid)
        return acp.NewSessionResponse(session_id=sid, modes=self.modes())

    async def resume_session(self, session_id: str, cwd: str, **kwargs: Any):
        self.offers("resume", "session/resume")
        self.sessions[session_id] = self.stored(session_id)
        return schema.ResumeSessionResponse(modes=self.modes())

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any):
        self.offers("load", "session/load")
        session = self.stored(session_id)
        self.sessions[session_id] = session
        for update in session.updates:  # not stored again
            notification = schema.SessionNotification.model_validate(
                {"sessionId": session_id, "update": update}
            )
            await self.conn.session_update(session_id=session_id, update=notification.update)
        return schema.LoadSessionResponse(modes=self.modes())

    async def close_session(self, session_id: str, **kwargs: Any):
        self.offers("close", "session/close")
        path = self.path(session_id)
        if session_id not in self.sessions and not (path and path.exists()):
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        if session := self.sessions.pop(session_id, None):
            session.cancel.set()
        if path:
            path.with_name(f"{session_id}.closed").write_text("")
        return schema.CloseSessionResponse()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any):
        self._session(session_id)
        if mode_id not in {m.id for m in MODES}:
            raise acp.RequestError.invalid_params({"modeId": mode_id})
        return schema.SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session := self.sessions.get(session_id):
            session.cancel.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any):
        session = self._session(session_id)
        session.turns += 1
        session.cancel.clear()
        words = " ".join(b.text for b in prompt if getattr(b, "type", None) == "text").split()
        script = words[0].lower() if words else ""
        p = f"t{session.turns}"
        try:
            if script not in SCRIPTS:
                known = ", ".join(SCRIPTS)
                await self.say(session_id, p, f"Unknown script {script!r}. Known: {known}")
                return acp.PromptResponse(stop_reason="end_turn")
            try:
                await getattr(self, script)(session_id, session, p, words[1:])
            except Cancelled:
                return acp.PromptResponse(stop_reason="cancelled")
            return acp.PromptResponse(stop_reason="end_turn")
        finally:
            self.save(session_id)

    # --- scripts --------------------------------------------------------------------------------

    async def basic(self, sid: str, session: Session, p: str, args: list[str]) -> None:
        path = os.path.join(session.cwd, "notes.txt")
        where = [schema.ToolCallLocation(path=path, line=1)]
        await self.plan(sid, "in_progress", "pending")
        read = acp.start_tool_call(
            f"{p}-read",
            "Read notes.txt",
            kind="read",
            status="completed",
            locations=where,
            raw_input={"path": path},
            content=[acp.tool_content(acp.text_block("hello\n"))],
        )
        await self.send(sid, read)
        await self.plan(sid, "completed", "in_progress")
        edit_input = {"path": path, "old_string": "hello\n", "new_string": "hello, world\n"}
        diff = acp.tool_diff_content(path, "hello, world\n", "hello\n")
        edit = acp.start_tool_call(
            f"{p}-edit",
            "Edit notes.txt",
            kind="edit",
            status="pending",
            locations=where,
            raw_input=edit_input,
            content=[diff],
        )
        await self.send(sid, edit)
        await self.send(sid, acp.update_tool_call(f"{p}-edit", status="in_progress"))
        await self.send(
            sid, acp.update_tool_call(f"{p}-edit", status="completed", raw_output={"ok": True})
        )
        await self.plan(sid, "completed", "completed")
        await self.say(sid, p, "Done: ", "edited notes.txt.")

    async def permission(self, sid: str, session: Session, p: str, args: list[str]) -> None:
        call_id = f"{p}-perm"
        start = acp.start_tool_call(
            call_id,
            "Run echo hello",
            kind="execute",
            status="pending",
            raw_input={"command": "echo hello"},
        )
        await self.send(sid, start)
        options = [
            schema.PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
            schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        tool_call = schema.ToolCallUpdate.model_validate(start.model_dump())
        answer = await self.conn.request_permission(
            session_id=sid, tool_call=tool_call, options=options
        )
        outcome = answer.outcome
        if outcome.outcome == "cancelled" or session.cancel.is_set():
            await self.send(sid, acp.update_tool_call(call_id, status="failed"))
            raise Cancelled
        if outcome.option_id == "allow-once":
            await self.finish(sid, call_id, "completed", "hello", raw_output="hello")
        else:
            await self.finish(sid, call_id, "failed", "User refused permission")
        await self.say(sid, p, f"Permission outcome: {outcome.option_id}")

    async def question(self, sid: str, session: Session, p: str, args: list[str]) -> None:
        call_id = f"{p}-ask"
        questions = [
            {
                "question": QUESTION,
                "header": "Database",
                "multiSelect": False,
                "options": [
                    {"label": "Postgres", "description": "Relational, robust"},
                    {"label": "SQLite", "description": "Single file"},
                ],
            }
        ]
        start = acp.start_tool_call(
            call_id,
            "Asking for your input",
            kind="other",
            status="pending",
            raw_input={"questions": questions},
        )
        start.field_meta = {"claudeCode": {"toolName": "AskUserQuestion"}}
        await self.send(sid, start)
        await self.send(sid, acp.update_tool_call(call_id, title=QUESTION))
        if not self.form_elicitation:
            await self.finish(sid, call_id, "failed", "Client does not support form elicitation")
            return await self.say(sid, p, "I could not ask: no form elicitation.")
        try:
            answer = await self.elicit(sid, call_id, questions[0])
        except acp.RequestError as exc:
            await self.finish(sid, call_id, "failed", f"Elicitation failed: {exc}")
            return await self.say(sid, p, "I could not ask the question.")
        action = answer.get("action")
        if action == "cancel" or session.cancel.is_set():
            await self.finish(sid, call_id, "failed", "Cancelled")
            raise Cancelled
        if action != "accept":
            await self.finish(sid, call_id, "failed", "User declined to answer")
            return await self.say(sid, p, "You declined.")
        content = answer.get("content") or {}
        choice, custom = content.get("question_0"), content.get("question_0_custom")
        text = f"{choice} ({custom})" if choice and custom else choice or custom or "(no answer)"
        await self.finish(
            sid, call_id, "completed", f"Database: {text}", raw_output={"answers": content}
        )
        await self.say(sid, p, f"You chose: {text}")

    async def slow(self, sid: str, session: Session, p: str, args: list[str]) -> None:
        seconds = float(args[0]) if args else 30.0
        call_id = f"{p}-slow"
        start = acp.start_tool_call(
            call_id,
            f"Wait {seconds:g} s",
            kind="execute",
            status="in_progress",
            raw_input={"seconds": seconds},
        )
        await self.send(sid, start)
        try:
            await asyncio.wait_for(session.cancel.wait(), seconds)
        except TimeoutError:
            await self.finish(sid, call_id, "completed", None)
            return await self.say(sid, p, f"Waited {seconds:g} s")
        await self.finish(sid, call_id, "failed", "Cancelled")
        raise Cancelled

    async def exit(self, sid: str, session: Session, p: str, args: list[str]) -> None:
        start = acp.start_tool_call(
            f"{p}-exit", "Crash mid-turn", kind="execute", status="in_progress"
        )
        await self.send(sid, start)  # written and drained to the pipe when this returns
        print("sdk_agent: exiting with code 3 mid-turn", file=sys.stderr, flush=True)
        os._exit(3)

    # --- helpers --------------------------------------------------------------------------------

    async def elicit(self, sid: str, call_id: str, question: dict[str, Any]) -> dict[str, Any]:
        # Sent raw: the SDK's create_elicitation serialises with exclude_defaults=True, which
        # drops requestedSchema.type == "object" (the schema default) from the wire.
        one_of = [
            {"const": o["label"], "title": o["label"], "description": o["description"]}
            for o in question["options"]
        ]
        params = {
            "mode": "form",
            "sessionId": sid,
            "toolCallId": call_id,
            "message": question["question"],
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "question_0": {"type": "string", "title": question["header"], "oneOf": one_of},
                    "question_0_custom": {
                        "type": "string",
                        "title": "Other",
                        "description": "Type your own answer, or add a note to the option you "
                        "chose above (optional).",
                    },
                },
            },
        }
        raw = cast(Any, self.conn)._conn  # the AgentSideConnection's JSON-RPC Connection
        return cast(
            dict[str, Any], await raw.send_request(CLIENT_METHODS["elicitation_create"], params)
        )

    async def plan(self, sid: str, first: Any, second: Any) -> None:
        entries = [
            acp.plan_entry("Read notes.txt", priority="high", status=first),
            acp.plan_entry("Edit notes.txt", priority="medium", status=second),
        ]
        await self.send(sid, acp.update_plan(entries))

    async def finish(
        self, sid: str, call_id: str, status: Any, text: str | None, raw_output: Any = None
    ) -> None:
        content = [acp.tool_content(acp.text_block(text))] if text is not None else None
        update = acp.update_tool_call(
            call_id, status=status, content=content, raw_output=raw_output
        )
        await self.send(sid, update)

    async def say(self, sid: str, p: str, *chunks: str) -> None:
        for chunk in chunks:
            update = acp.update_agent_message_text(chunk)
            await self.send(sid, update.model_copy(update={"message_id": f"{p}-msg"}))

    async def send(self, sid: str, update: Any) -> None:
        await self.conn.session_update(session_id=sid, update=update)
        if session := self.sessions.get(sid):
            # as the SDK writes it (acp.utils.serialize_params), so a replay is the same
            wire = update.model_dump(
                mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
            )
            session.updates.append(wire)
            self.save(sid)

    def modes(self) -> schema.SessionModeState:
        return schema.SessionModeState(current_mode_id="default", available_modes=MODES)

    def offers(self, word: str, method: str) -> None:
        """What is not advertised is not there: -32601, as the SDK answers without a handler."""
        if word not in self.can:
            raise acp.RequestError.method_not_found(method)

    def path(self, session_id: str) -> Path | None:
        if self.store is None or not SAFE_ID.fullmatch(session_id):
            return None
        return self.store / f"{session_id}.json"

    def save(self, sid: str) -> None:
        path, session = self.path(sid), self.sessions.get(sid)
        if path is None or session is None:
            return
        data = {"cwd": session.cwd, "turns": session.turns, "updates": session.updates}
        part = path.with_name(f"{path.name}.part")
        part.write_text(json.dumps(data, indent=1))
        part.replace(path)

    def stored(self, session_id: str) -> Session:
        """The session as kept in SDK_AGENT_SESSIONS, else as in this process's memory."""
        path = self.path(session_id)
        if path is None:
            if self.store is None and session_id in self.sessions:
                old = self.sessions[session_id]
                return Session(old.cwd, old.turns, list(old.updates))
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise acp.RequestError.invalid_params({"sessionId": session_id}) from None
        return Session(data["cwd"], data["turns"], data["updates"])

    def _session(self, session_id: str) -> Session:
        if session_id not in self.sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        return self.sessions[session_id]


if __name__ == "__main__":
    agent = SdkAgent(os.environ.get("SDK_AGENT_SESSIONS"), os.environ.get("SDK_AGENT_CAN", ""))
    # session/resume and session/close are "unstable" in the SDK: routed only with the flag;
    # without SDK_AGENT_CAN the agent answers them -32601 itself (offers)
    asyncio.run(acp.run_agent(cast(acp.Agent, agent), use_unstable_protocol=True))
