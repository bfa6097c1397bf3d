"""The runner never loops on a frame the server refuses (issue 13): a fake koruweb, a tiny
``websockets`` server that commits every frame it gets in order and acknowledges it, except
those a test makes it refuse by closing the socket with a code."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from activity.runner import link as link_module
from activity.runner.link import REFUSALS, Link, Refused
from activity.runner.main import Runner
from activity.runner.options import Options
from activity.runner.outbox import MARK, Outbox
from activity.wire.frames import (
    CLOSE_PROTOCOL,
    CLOSE_RATE,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_LARGE,
    CLOSE_UNAVAILABLE,
    Acp,
    TurnEnded,
    rate_reason,
    retry_after,
)

AGENTS = Path(__file__).resolve().parent.parent / "agents"
GIVE_UP = 30  # connections after which the fake server says the runner loops
DROP = 0  # refuse by dropping the connection with no close frame, as a restart or the network


class FakeServer:
    """``refuse(frame, text, server)`` returns the close code for a frame it refuses (or
    ``DROP``), or None."""

    def __init__(self, refuse: Callable[[dict[str, Any], str, FakeServer], int | None]) -> None:
        self.refuse = refuse
        self.committed = 0
        self.connections = 0
        self.received: dict[int, list[str]] = defaultdict(list)  # every copy of each frame
        self.looping = asyncio.Event()  # the runner kept reconnecting past GIVE_UP

    async def handle(self, socket: ServerConnection) -> None:
        self.connections += 1
        if self.connections > GIVE_UP:
            self.looping.set()
            return
        await socket.recv()  # the hello
        await socket.send(json.dumps({"type": "ack", "seq": self.committed}))
        async for text in socket:
            assert isinstance(text, str)
            frame = json.loads(text)
            self.received[frame["seq"]].append(text)
            code = self.refuse(frame, text, self)
            if code == DROP:
                socket.transport.abort()
                return
            if code is not None:
                await socket.close(code, "refused")
                return
            if frame["seq"] == self.committed + 1:
                self.committed = frame["seq"]
            await socket.send(json.dumps({"type": "ack", "seq": self.committed}))


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "BACKOFF_SECONDS", 0.001)
    monkeypatch.setattr(link_module, "BACKOFF_MAX", 0.01)


@contextlib.asynccontextmanager
async def running(fake: FakeServer) -> AsyncIterator[str]:
    async with serve(fake.handle, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}"


def outbox_of(frames: int) -> Outbox:
    outbox = Outbox()
    for n in range(frames):
        outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason=f"r{n}")
    return outbox


async def until_stopped_or_drained(fake: FakeServer, url: str, outbox: Outbox) -> Link:
    """Run a link until it stops, the outbox drains, or it is plainly looping (then fail)."""
    link = Link(url, "token", uuid.uuid4(), outbox, lambda request_id, outcome: None)
    running_link = asyncio.create_task(link.run())
    drained = asyncio.create_task(outbox.wait_drained())
    looping = asyncio.create_task(fake.looping.wait())
    done, pending = await asyncio.wait(
        {running_link, drained, looping}, return_when=asyncio.FIRST_COMPLETED
    )
    for task in pending:
        task.cancel()
    assert looping not in done, f"the runner reconnected {GIVE_UP} times"
    if running_link in done:
        error = running_link.exception()
        assert error is not None
        raise error
    return link


@pytest.mark.parametrize("code", [CLOSE_SERVER_ERROR, CLOSE_PROTOCOL, CLOSE_TOO_LARGE, 1009])
async def test_a_frame_the_server_refuses_on_every_connection_stops_the_runner_at_the_third(
    code: int,
):
    fake = FakeServer(lambda frame, text, server: code if frame["seq"] == 3 else None)
    async with running(fake) as url:
        with pytest.raises(Refused) as refused:
            await until_stopped_or_drained(fake, url, outbox_of(5))
    assert fake.connections == REFUSALS
    assert fake.committed == 2  # the frames before it are on the server
    said = str(refused.value)
    assert f"refused frame 3 (turn_ended) on {REFUSALS} connections in a row" in said
    assert str(code) in said and "2 after it" in said


async def test_a_server_that_fails_once_on_each_frame_gets_every_frame_and_never_stops_the_runner():
    def once(frame: dict[str, Any], text: str, server: FakeServer) -> int | None:
        return CLOSE_SERVER_ERROR if len(server.received[frame["seq"]]) == 1 else None

    fake = FakeServer(once)
    outbox = outbox_of(6)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 6 and outbox.drained


async def test_refusals_of_different_frames_are_not_added_up():
    def twice(frame: dict[str, Any], text: str, server: FakeServer) -> int | None:
        return CLOSE_SERVER_ERROR if len(server.received[frame["seq"]]) <= REFUSALS - 1 else None

    fake = FakeServer(twice)
    outbox = outbox_of(3)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 3
    assert fake.connections > REFUSALS


async def test_a_connection_dropped_without_a_close_code_never_counts_as_a_refusal():
    def drop(frame: dict[str, Any], text: str, server: FakeServer) -> int | None:
        return DROP if len(server.received[frame["seq"]]) <= REFUSALS + 2 else None

    fake = FakeServer(drop)
    outbox = outbox_of(2)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 2


@pytest.mark.parametrize("code", [DROP, CLOSE_UNAVAILABLE])
async def test_a_server_that_is_unavailable_on_many_connections_in_a_row_never_stops_the_runner(
    code: int,
):
    def away(frame: dict[str, Any], text: str, server: FakeServer) -> int | None:
        return code if len(server.received[frame["seq"]]) <= REFUSALS + 2 else None

    fake = FakeServer(away)
    outbox = outbox_of(2)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 2 and outbox.drained


async def test_a_server_that_fails_during_the_hello_never_counts_it_against_a_frame():
    """Frames were sent on the last connection; the server then fails before acknowledging the
    next hello, over and over: no frame was sent on those connections, so none is struck."""
    failing_hellos = 0

    class HelloFails(FakeServer):
        async def handle(self, socket: ServerConnection) -> None:
            nonlocal failing_hellos
            if self.received and failing_hellos < REFUSALS + 2:
                failing_hellos += 1
                self.connections += 1
                await socket.recv()
                await socket.close(CLOSE_SERVER_ERROR, "failed during the hello")
                return
            await super().handle(socket)

    fake = HelloFails(
        lambda frame, text, server: (
            DROP if frame["seq"] == 1 and len(server.received[1]) == 1 else None
        )
    )
    outbox = outbox_of(2)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 2 and failing_hellos == REFUSALS + 2


@pytest.mark.parametrize("code", [CLOSE_TOO_LARGE, 1009])
async def test_a_frame_too_large_for_the_server_is_cut_harder_on_each_refusal_until_it_passes(
    code: int,
):
    limit = 20_000  # a proxy's limit, far under the runner's budget

    fake = FakeServer(lambda frame, text, server: code if len(text.encode()) > limit else None)
    outbox = Outbox()
    output = "é" * 100_000  # 200 KB: the runner sends it whole at first
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "content": [{"type": "content", "content": {"type": "text", "text": output}}],
    }
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}}
    outbox.add(Acp, message=message)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    sizes = [len(copy.encode()) for copy in fake.received[1]]
    assert all(later < earlier for earlier, later in zip(sizes, sizes[1:], strict=False))
    assert sizes[-1] <= limit and fake.committed == 1
    got = json.loads(fake.received[1][-1])
    kept = got["message"]["params"]["update"]["content"][0]["content"]["text"]
    assert kept.endswith(MARK)
    assert got["cut_bytes"] + len(kept.removesuffix(MARK).encode()) == len(output.encode())


PERMISSION = {
    "jsonrpc": "2.0",
    "id": "p-1",
    "method": "session/request_permission",
    "params": {
        "sessionId": "odd-1",
        "toolCall": {"toolCallId": "c1", "title": "Delete build/"},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
    },
}


async def test_a_runner_whose_frame_is_always_refused_stops_mid_turn_with_code_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """The agent waits for a person's answer that cannot come: the runner does not wait for
    the turn to end (the agent would give up only after ``ODD_AGENT_WAIT``)."""

    def refuse_the_agents_messages(frame: dict[str, Any], text: str, server: Any) -> int | None:
        return CLOSE_SERVER_ERROR if frame["type"] == "acp" else None

    monkeypatch.setenv("ODD_AGENT_WAIT", "60")
    fake = FakeServer(refuse_the_agents_messages)
    lines, responses = tmp_path / "lines.json", tmp_path / "responses.jsonl"
    lines.write_text(json.dumps([PERMISSION]))
    responses.write_text("")
    agent = [sys.executable, str(AGENTS / "odd_agent.py"), str(lines), str(responses)]
    async with running(fake) as url:
        runner = Runner(Options(server=url, token="t", command=agent, prompts=["go"]))
        run = asyncio.create_task(runner.run())
        looping = asyncio.create_task(fake.looping.wait())
        done, _ = await asyncio.wait({run, looping}, return_when=asyncio.FIRST_COMPLETED)
        looping.cancel()
        assert run in done, f"the runner reconnected {GIVE_UP} times"
        code = run.result()
    err = capsys.readouterr().err
    assert code == 7, err
    assert f"koruweb: the server refused frame 3 (acp session/update) on {REFUSALS}" in err
    assert fake.connections == REFUSALS and "Traceback" not in err
    assert runner.process is not None and runner.process.returncode is not None  # stopped
    prompts = [json.loads(t) for _, t in runner.outbox.frames if '"prompt_outcome"' in t]
    assert prompts[-1]["outcome"] == {"outcome": "cancelled"}  # the turn was cancelled first


async def test_a_runner_limited_by_the_server_waits_what_it_is_told_and_then_gets_in(
    capsys: pytest.CaptureFixture[str],
):
    """A server that limits new chats closes the hello with ``CLOSE_RATE`` and says when to try
    again: the runner waits that long (not its own shorter backoff), says so once a refusal,
    and gets in once the server lets it, instead of exiting."""
    asked_wait = 0.2  # far over the test's backoff (at most 0.01 s)
    reason = "at most 30 new chats a minute per agent token; retry in 0.2 s"
    hellos: list[float] = []

    class Limiting(FakeServer):
        async def handle(self, socket: ServerConnection) -> None:
            hellos.append(asyncio.get_running_loop().time())
            if len(hellos) <= 2:
                self.connections += 1
                await socket.recv()
                await socket.close(CLOSE_RATE, reason)
                return
            await super().handle(socket)

    fake = Limiting(lambda frame, text, server: None)
    outbox = outbox_of(3)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert outbox.drained and fake.committed == 3 and len(hellos) == 3
    gaps = [later - earlier for earlier, later in zip(hellos, hellos[1:], strict=False)]
    assert all(gap >= asked_wait for gap in gaps), gaps
    err = capsys.readouterr().err
    line = (
        f"koruweb: the server limits this runner (4429: {reason}); waiting 0.2 s, then trying again"
    )
    assert err.count(line) == 2, err


async def test_a_rate_close_without_a_wait_backs_off_and_is_never_a_strike():
    """Too many sockets for the token: the reason names no wait; the runner backs off, however
    often, and no frame is struck for it (it does not stop at ``REFUSALS``)."""
    limited = 0

    class TooMany(FakeServer):
        async def handle(self, socket: ServerConnection) -> None:
            nonlocal limited
            if self.received and limited < REFUSALS + 2:  # frames were sent, none acked yet
                limited += 1
                self.connections += 1
                await socket.recv()
                await socket.close(CLOSE_RATE, rate_reason("at most 20 sockets at once"))
                return
            await super().handle(socket)

    fake = TooMany(
        lambda frame, text, server: (
            DROP if frame["seq"] == 1 and len(server.received[1]) == 1 else None
        )
    )
    outbox = outbox_of(2)
    async with running(fake) as url:
        await until_stopped_or_drained(fake, url, outbox)
    assert fake.committed == 2 and limited == REFUSALS + 2


def test_the_wait_a_rate_close_names_is_read_back_from_its_reason():
    assert retry_after(rate_reason("at most 3 new chats a minute", 41.2)) == 42
    assert retry_after(rate_reason("at most 3 new chats a minute", -1)) == 0
    assert retry_after(rate_reason("at most 20 sockets at once")) is None
    assert retry_after("retry in 0.25 s") == 0.25
    assert retry_after("") is None
