"""A runner's session on the server, without a socket: hello, batches, acks, errors, leaving."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from django.utils import timezone

from activity import groups, pipeline
from activity.frames import CLOSE_PROTOCOL, CLOSE_SERVER_ERROR, CLOSE_TOO_LARGE
from activity.models import AgentToken, Chat, Prompt, ToolActivity
from tests import frames

pytestmark = [pytest.mark.django_db(transaction=True)]


class FakeSocket:
    """What the session sends, closes and joins, kept for the test to read."""

    def __init__(self, name: str = "socket-1") -> None:
        self.channel_name = name
        self.sent: list[dict[str, Any]] = []
        self.closed: tuple[int | None, str | None] | None = None
        self.groups: set[str] = set()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = (code, reason)

    async def join(self, group: str) -> None:
        self.groups.add(group)

    async def leave(self, group: str) -> None:
        self.groups.discard(group)


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@pytest.fixture
async def token(acme) -> AgentToken:
    def make() -> AgentToken:
        return AgentToken.issue(acme, "laptop")[0]

    made: AgentToken = await database_sync_to_async(make)()
    return made


async def session(token: AgentToken, socket: FakeSocket | None = None) -> pipeline.RunnerSession:
    runner = pipeline.RunnerSession(token.workspace_id, token.pk, socket or FakeSocket())
    await runner.start()
    return runner


async def say(runner: pipeline.RunnerSession, *sent: dict[str, Any]) -> None:
    for frame in sent:
        await runner.receive(json.dumps(frame))
    while runner.drainer is not None:
        await asyncio.sleep(0.01)


def socket_of(runner: pipeline.RunnerSession) -> FakeSocket:
    assert isinstance(runner.socket, FakeSocket)
    return runner.socket


async def test_a_hello_makes_the_chat_shows_the_runner_online_and_says_what_the_server_has(token):
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    socket = socket_of(runner)
    assert socket.sent == [{"type": "ack", "seq": 0}]
    assert socket.groups == {groups.token(token.pk), groups.runner(chat_id)}
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert chat.runner_connected and chat.runner_channel == "socket-1"
    await runner.stop()


async def test_frames_that_arrive_while_a_batch_is_written_are_the_next_batch_with_one_ack(
    token,
):
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    attempt = uuid.uuid4()
    burst = [frames.turn_started(1, attempt, uuid.uuid4())]
    burst += [frames.tool_call(n, f"c{n}", f"Call {n}", status="pending") for n in range(2, 12)]
    await say(runner, *burst)
    acks = [reply["seq"] for reply in socket_of(runner).sent if reply["type"] == "ack"]
    assert acks[0] == 0 and acks[-1] == 11
    assert len(acks) <= 3  # the first frame's batch, then at most one more for the rest
    assert await database_sync_to_async(ToolActivity.objects.count)() == 10
    await runner.stop()


async def test_a_frame_that_cannot_be_applied_is_refused_and_acknowledged_and_the_rest_apply(
    token,
):
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))
    attempt = uuid.uuid4()
    await say(
        runner,
        frames.turn_started(1, attempt, uuid.uuid4()),
        {"type": "acp", "seq": 2, "at": 1, "message": "not an object"},
        frames.tool_call(3, "c1", "Read a file", kind="read", status="completed"),
    )
    replies = socket_of(runner).sent
    assert any(r["type"] == "error" and r["seq"] == 2 for r in replies)
    assert replies[-1] == {"type": "ack", "seq": 3}
    assert await database_sync_to_async(ToolActivity.objects.count)() == 1
    await runner.stop()


@pytest.mark.parametrize(
    ("first", "code"),
    [
        ("x" * (2 * 1024 * 1024), CLOSE_TOO_LARGE),
        (json.dumps({"type": "ack", "seq": 1}), CLOSE_PROTOCOL),
    ],
    ids=["too large", "not a hello"],
)
async def test_a_first_frame_that_is_no_hello_closes_the_socket_with_its_code(token, first, code):
    runner = await session(token)
    await runner.receive(first)
    closed = socket_of(runner).closed
    assert closed is not None and closed[0] == code


async def test_lost_frames_close_the_socket_so_the_runner_reconnects_and_resends(token):
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))
    await say(runner, frames.turn_started(2, uuid.uuid4(), uuid.uuid4()))  # frame 1 never came
    socket = socket_of(runner)
    assert socket.closed == (4400, "frames were lost; reconnect and resend")
    assert socket.sent[-1]["type"] == "error" and "frames were lost" in socket.sent[-1]["error"]


async def test_a_server_error_while_ingesting_closes_so_the_runner_resends_and_commits_nothing(
    token, monkeypatch
):
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))

    def broken(*args: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(pipeline, "ingest", broken)
    await say(runner, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    assert socket_of(runner).closed == (CLOSE_SERVER_ERROR, "server error; reconnect and resend")
    assert socket_of(runner).sent == [{"type": "ack", "seq": 0}]  # frame 1 was never acked


async def test_a_session_that_stops_shows_the_runner_gone_unless_a_newer_socket_has_the_chat(
    token,
):
    chat_id = uuid.uuid4()
    first = await session(token, FakeSocket("socket-1"))
    await say(first, frames.hello(chat_id))
    second = await session(token, FakeSocket("socket-2"))
    await say(second, frames.hello(chat_id, acked=0))
    await first.stop()
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert chat.runner_connected  # the newer socket still has it
    await second.stop()
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert not chat.runner_connected
    assert socket_of(second).groups == set()


async def test_answers_given_while_the_runner_was_away_are_sent_after_its_hello(token):
    chat_id = uuid.uuid4()
    runner = await session(token)
    await say(runner, frames.hello(chat_id))
    attempt = uuid.uuid4()
    await say(
        runner,
        frames.turn_started(1, attempt, uuid.uuid4()),
        frames.permission(2, 7, "c1", "Delete build/"),
    )
    await runner.stop()

    def answer() -> None:
        Prompt.objects.filter(chat_id=chat_id).update(
            answered_at=timezone.now(), answer={"outcome": "selected", "optionId": "allow-once"}
        )

    await database_sync_to_async(answer)()
    back = await session(token, FakeSocket("socket-2"))
    await say(back, frames.hello(chat_id, acked=2))
    assert socket_of(back).sent[0] == {"type": "ack", "seq": 2}
    answers = [reply for reply in socket_of(back).sent if reply["type"] == "answer"]
    assert answers == [
        {
            "type": "answer",
            "request_id": 7,
            "outcome": {"outcome": "selected", "optionId": "allow-once"},
        }
    ]
    await back.stop()
