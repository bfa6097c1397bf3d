"""The scripted SDK agent (``sdk_agent.py``) keeps its sessions across processes when asked to
(SDK_AGENT_SESSIONS, SDK_AGENT_CAN): resumed, loaded (replayed) and closed by another process, as
the runner's ``--resume`` needs; by default it advertises none of it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent

pytestmark = pytest.mark.once  # processes, no database

AGENT = Path(__file__).resolve().parent / "sdk_agent.py"


class Recorder:
    """A client that keeps every raw message the agent sends."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def observe(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.messages.append(event.message)

    @property
    def updates(self) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages if m.get("method") == "session/update"]

    def result(self, key: str) -> dict[str, Any]:
        return next(m["result"] for m in self.messages if key in (m.get("result") or {}))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass


@contextlib.asynccontextmanager
async def agent(**env: str) -> AsyncIterator[tuple[ClientSideConnection, Recorder]]:
    recorder = Recorder()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SDK_AGENT_")}
    async with acp.spawn_agent_process(
        cast(acp.Client, recorder),
        sys.executable,
        str(AGENT),
        env=environ | env,
        transport_kwargs={"stderr": None},
        observers=[recorder.observe],
        use_unstable_protocol=True,
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        yield conn, recorder


async def run(conn: ClientSideConnection, session_id: str, script: str) -> str:
    answer = await conn.prompt(session_id=session_id, prompt=[acp.text_block(script)])
    return answer.stop_reason


async def test_a_session_is_resumed_then_loaded_then_closed_by_other_processes(tmp_path):
    store, cwd = tmp_path / "sessions", str(tmp_path)
    env = {"SDK_AGENT_SESSIONS": str(store), "SDK_AGENT_CAN": "resume,load,close"}

    async with agent(**env) as (conn, first):
        capabilities = first.result("protocolVersion")["agentCapabilities"]
        lifecycle: dict[str, Any] = {"resume": {}, "close": {}}
        assert capabilities == {"loadSession": True, "sessionCapabilities": lifecycle}
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        assert re.fullmatch(r"sdk-[0-9a-f]{12}", sid)
        assert await run(conn, sid, "basic") == "end_turn"
    assert len(first.updates) == 9
    kept = json.loads((store / f"{sid}.json").read_text())
    assert kept == {"cwd": cwd, "turns": 1, "updates": first.updates}

    async with agent(**env) as (conn, second):
        resumed = await conn.resume_session(session_id=sid, cwd=cwd, mcp_servers=[])
        assert second.updates == []
        assert resumed.modes is not None and resumed.modes.current_mode_id == "default"
        assert await run(conn, sid, "basic") == "end_turn"
    calls = [u["toolCallId"] for u in second.updates if u["sessionUpdate"] == "tool_call"]
    assert calls == ["t2-read", "t2-edit"]
    assert json.loads((store / f"{sid}.json").read_text())["turns"] == 2

    async with agent(**env) as (conn, third):
        loaded = await conn.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
        assert third.updates == first.updates + second.updates
        assert loaded.modes is not None and loaded.modes.current_mode_id == "default"
        assert not (store / f"{sid}.closed").exists()
        await conn.close_session(session_id=sid)
        assert (store / f"{sid}.closed").exists()
        with pytest.raises(acp.RequestError) as gone:
            await run(conn, sid, "basic")
        assert gone.value.code == -32602
    # the replay was not stored again
    assert len(json.loads((store / f"{sid}.json").read_text())["updates"]) == 18


async def test_a_session_the_agent_never_kept_is_refused_as_invalid_params(tmp_path):
    env = {"SDK_AGENT_SESSIONS": str(tmp_path), "SDK_AGENT_CAN": "resume,load,close"}
    async with agent(**env) as (conn, _recorder):
        for ask in (
            conn.resume_session(session_id="sdk-000000000000", cwd=str(tmp_path), mcp_servers=[]),
            conn.load_session(cwd=str(tmp_path), session_id="sdk-000000000000", mcp_servers=[]),
            conn.close_session(session_id="../escape"),
        ):
            with pytest.raises(acp.RequestError) as refused:
                await ask
            assert refused.value.code == -32602


async def test_by_default_the_agent_advertises_no_sessions_and_knows_no_resume_load_or_close(
    tmp_path,
):
    async with agent() as (conn, recorder):
        assert "agentCapabilities" not in recorder.result("protocolVersion")
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        assert session.session_id == "sdk-1"
        assert await run(conn, "sdk-1", "basic") == "end_turn"
        for ask in (
            conn.resume_session(session_id="sdk-1", cwd=str(tmp_path), mcp_servers=[]),
            conn.load_session(cwd=str(tmp_path), session_id="sdk-1", mcp_servers=[]),
            conn.close_session(session_id="sdk-1"),
        ):
            with pytest.raises(acp.RequestError) as unknown:
                await ask
            assert unknown.value.code == -32601
        assert (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id == "sdk-2"
    assert list(tmp_path.iterdir()) == []
