"""The agent's own ids never leave the runner (issue 22, ``activity/runner/ids.py``): the real
runner, in this process, with an agent whose request and option ids are keys
(``tests/agents/secret_ids_agent.py``), against a fake koruweb that commits every frame in
order — and, when a test says so, drops the connection on a frame instead, as a restart does."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from acp.connection import StreamDirection, StreamEvent
from pydantic import BaseModel
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from activity.runner import link as link_module
from activity.runner.main import Runner
from activity.runner.options import Options
from activity.runner.outbox import Outbox
from activity.runner.turns import TurnTable
from activity.wire.frames import runner_frame
from activity.wire.orders import Answer
from tests.agents.secret_ids_agent import ALLOW_ID, IDS

AGENT = [
    sys.executable,
    str(Path(__file__).resolve().parent.parent / "agents" / "secret_ids_agent.py"),
]
WITHIN = 30.0  # a runner that has not got there by then never will: fail rather than hang
PERMISSION = "session/request_permission"
QUESTION = "elicitation/create"


class Koru:
    """A fake koruweb: ``frames`` are the runner's frames as committed, ``copies`` every copy
    of each it got; ``drop(frame)`` says whether to drop the connection on a frame instead."""

    def __init__(self, drop: Callable[[dict[str, Any]], bool] = lambda frame: False) -> None:
        self.drop = drop
        self.frames: list[dict[str, Any]] = []
        self.copies: dict[int, list[str]] = {}
        self.socket: ServerConnection | None = None
        self.changed = asyncio.Event()

    async def handle(self, socket: ServerConnection) -> None:
        await socket.recv()  # the hello
        await socket.send(json.dumps({"type": "ack", "seq": len(self.frames)}))
        self.socket = socket
        with contextlib.suppress(ConnectionClosed):
            async for text in socket:
                assert isinstance(text, str)
                frame = json.loads(text)
                runner_frame.validate_python(frame)  # the server would refuse it otherwise
                self.copies.setdefault(frame["seq"], []).append(text)
                if self.drop(frame):
                    await socket.close(1012, "restart")
                    return
                if frame["seq"] == len(self.frames) + 1:
                    self.frames.append(frame)
                await socket.send(json.dumps({"type": "ack", "seq": len(self.frames)}))
                self.changed.set()

    async def send(self, frame: BaseModel) -> None:
        assert self.socket is not None
        await self.socket.send(frame.model_dump_json())

    async def until[T](self, check: Callable[[], T | None]) -> T:
        async def wait() -> T:
            while not (found := check()):
                self.changed.clear()
                await self.changed.wait()
            return found

        return await asyncio.wait_for(wait(), WITHIN)

    async def request(self, method: str) -> dict[str, Any]:
        """The agent's request ``method`` as forwarded, once it is committed."""
        return (
            await self.until(lambda: [m for m in self.messages() if m.get("method") == method])
        )[0]

    def messages(self) -> list[dict[str, Any]]:
        return [frame["message"] for frame in self.frames if frame["type"] == "acp"]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if frame["type"] == kind]

    def reply(self) -> str:
        return "".join(
            m["params"]["update"]["content"]["text"]
            for m in self.messages()
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "BACKOFF_SECONDS", 0.001)
    monkeypatch.setattr(link_module, "BACKOFF_MAX", 0.01)


@pytest.fixture(autouse=True)
def _stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


@contextlib.asynccontextmanager
async def runner(koru: Koru) -> AsyncIterator[asyncio.Task[int]]:
    """A runner of the secret-ids agent with one prompt, against ``koru``."""
    async with serve(koru.handle, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        options = Options(server=f"ws://127.0.0.1:{port}", token="t", command=AGENT, prompts=["go"])
        run = asyncio.create_task(Runner(options).run())
        try:
            yield run
        finally:
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run


def leaked(texts: list[str]) -> list[str]:
    """The agent's ids found in what the runner sent the server."""
    return [agent_id for agent_id in IDS if any(agent_id in text for text in texts)]


async def test_secret_shaped_ids_never_reach_the_server_and_answers_reach_the_agent_as_its_own():
    koru = Koru()
    async with runner(koru) as run:
        asked = await koru.request(PERMISSION)
        assert [o["optionId"] for o in asked["params"]["options"]] == ["o0", "o1"]
        assert [o["name"] for o in asked["params"]["options"]] == ["Allow once", "Reject"]
        await koru.send(
            Answer(request_id=asked["id"], outcome={"outcome": "selected", "optionId": "o0"})
        )
        question = await koru.request(QUESTION)
        accept = {"action": "accept", "content": {"region": "eu"}}
        await koru.send(Answer(request_id=question["id"], outcome=accept))
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert koru.reply() == "Permission outcome: allow. Question outcome: accept eu."
    told = [(f["request_id"], f["outcome"]) for f in koru.of("prompt_outcome")]
    assert told == [
        (asked["id"], {"outcome": "selected", "optionId": "o0"}),
        (question["id"], {"action": "accept"}),
    ]
    assert leaked([text for copies in koru.copies.values() for text in copies]) == []


async def test_an_answer_naming_the_agents_own_option_id_is_refused_and_the_agent_told_cancelled():
    """The runner never trusts the server: only an option it forwarded may be chosen."""
    koru = Koru()
    async with runner(koru) as run:
        asked = await koru.request(PERMISSION)
        own = {"outcome": "selected", "optionId": ALLOW_ID}
        await koru.send(Answer(request_id=asked["id"], outcome=own))
        question = await koru.request(QUESTION)
        await koru.send(Answer(request_id=question["id"], outcome={"action": "decline"}))
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert koru.reply() == "Permission outcome: cancelled. Question outcome: decline -."
    assert koru.of("prompt_outcome")[0]["outcome"] == {"outcome": "cancelled"}


async def test_a_request_resent_after_a_reconnect_carries_the_same_opaque_ids():
    dropped: list[int] = []

    def once_on_the_permission(frame: dict[str, Any]) -> bool:
        asks = frame["type"] == "acp" and frame["message"].get("method") == PERMISSION
        if asks and not dropped:
            dropped.append(frame["seq"])
            return True
        return False

    koru = Koru(drop=once_on_the_permission)
    async with runner(koru) as run:
        asked = await koru.request(PERMISSION)
        first, again = koru.copies[dropped[0]][:2]
        assert first == again  # the same text: the same request number and option ids
        await koru.send(
            Answer(request_id=asked["id"], outcome={"outcome": "selected", "optionId": "o0"})
        )
        question = await koru.request(QUESTION)
        await koru.send(Answer(request_id=question["id"], outcome={"action": "cancel"}))
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert koru.reply().startswith("Permission outcome: allow.")
    assert leaked([first]) == []


def test_an_elicitation_id_is_forwarded_as_the_same_opaque_id_wherever_the_agent_repeats_it():
    outbox = Outbox()
    table = TurnTable(outbox)
    secret = IDS[0]
    url = {"sessionId": "s", "mode": "url", "message": "Log in", "url": "https://example.com/"}
    sent = [
        {
            "jsonrpc": "2.0",
            "id": secret,
            "method": QUESTION,
            "params": {**url, "elicitationId": secret},
        },
        {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": secret}},
    ]
    for message in sent:
        table.observe(StreamEvent(StreamDirection.INCOMING, message))
    forwarded = [json.loads(text)["message"] for _, text in outbox.after(0)]
    assert [m["params"]["elicitationId"] for m in forwarded] == ["e1", "e1"]
    assert forwarded[0]["id"] == 1 and leaked([text for _, text in outbox.after(0)]) == []
    assert sent[0]["id"] == secret  # the agent's own message, which the SDK answers, is untouched
