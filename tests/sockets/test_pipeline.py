"""A runner's session on the server, without a socket: hello, batches, acks, errors, leaving."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import OperationalError, connections
from django.utils import timezone

from activity.core import groups
from activity.live import presence
from activity.models import AgentToken, Chat, Prompt, ToolActivity
from activity.sockets import pipeline
from activity.wire import frames as wire_frames
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_REASON_BYTES,
    CLOSE_TOO_LARGE,
    CLOSE_UNAVAILABLE,
    CLOSE_UPGRADE,
    PROTOCOL_VERSION,
    upgrade_reason,
)
from koruweb.asgi import application
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
        await get_channel_layer().group_add(group, self.channel_name)

    async def leave(self, group: str) -> None:
        self.groups.discard(group)
        await get_channel_layer().group_discard(group, self.channel_name)


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await get_channel_layer().flush()
    await database_sync_to_async(connections.close_all)()


def answered_by(chat_id: uuid.UUID) -> set[str]:
    """The channels an answer to the chat's runner reaches (the in-memory channel layer's)."""
    return set(get_channel_layer().groups.get(groups.runner(chat_id), {}))


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


async def test_a_batch_that_fails_because_the_database_is_away_is_not_acknowledged_and_resent(
    token, monkeypatch
):
    chat_id = uuid.uuid4()
    runner = await session(token)
    await say(runner, frames.hello(chat_id))

    batches = []

    def away(chat_id: uuid.UUID, batch: list[Any]) -> None:
        batches.append(batch)
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(pipeline, "ingest", away)
    first = frames.turn_started(1, uuid.uuid4(), uuid.uuid4())
    await say(runner, first)
    assert socket_of(runner).closed == (CLOSE_UNAVAILABLE, pipeline.UNAVAILABLE)
    await say(runner, frames.say(2, "Arrived after the failure."))  # in flight when it closed
    assert socket_of(runner).sent == [{"type": "ack", "seq": 0}]  # nothing was acknowledged
    assert len(batches) == 1  # and nothing after the failure was even tried
    await runner.stop()

    monkeypatch.undo()  # the database is back: the runner reconnects and resends both
    back = await session(token, FakeSocket("socket-2"))
    await say(back, frames.hello(chat_id))
    assert socket_of(back).sent == [{"type": "ack", "seq": 0}]
    await say(back, first, frames.say(2, "Arrived after the failure."))
    assert socket_of(back).sent[-1] == {"type": "ack", "seq": 2}
    await back.stop()


async def test_a_hello_while_the_database_is_away_closes_so_the_runner_tries_again(
    token, monkeypatch
):
    def away(*args: Any) -> None:
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(presence, "claim", away)
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))
    assert socket_of(runner).closed == (CLOSE_UNAVAILABLE, pipeline.UNAVAILABLE)
    assert socket_of(runner).sent == []


def deep(levels: int, seq: int) -> str:
    """An acp frame whose message nests ``levels`` arrays (built as text: json.dumps recurses)."""
    nested = "[" * levels + "]" * levels
    return (
        f'{{"type": "acp", "seq": {seq}, "at": 1, "message": {{"jsonrpc": "2.0", "x": {nested}}}}}'
    )


HOSTILE: dict[str, Any] = {  # each one frame of issue 13's list, as raw text, with seq 3
    "params that are an array": frames.acp(
        3, {"jsonrpc": "2.0", "method": "session/update", "params": ["hello"]}
    ),
    "a sessionUpdate that is a list": frames.update(
        3, {"sessionUpdate": ["tool_call"], "toolCallId": "c9"}
    ),
    "NaN in a usage cost": frames.update(
        3,
        {
            "sessionUpdate": "usage_update",
            "used": 1,
            "size": 2,
            "cost": {"amount": float("nan"), "currency": "USD"},
        },
    ),
    "an integer beyond 2^63 in cut_bytes": {
        **frames.tool_update(3, "c1", status="completed"),
        "cut_bytes": 2**64,
    },
    "an integer beyond 2^63 in at": {**frames.say(3, "x"), "at": 2**63},
    "a prompt_outcome action of the wrong type": {
        "type": "prompt_outcome",
        "seq": 3,
        "at": 1,
        "request_id": 7,
        "outcome": {"action": {"accept": True}},
    },
    "a request id longer than its column": {
        **frames.permission(3, 8, "c8", "Deploy"),
        "message": {**frames.permission(3, 8, "c8", "Deploy")["message"], "id": "r" * 300},
    },
    "JSON nested 200 deep": deep(200, 3),
    "an unknown frame type": {"type": "bogus", "seq": 3, "at": 1},
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_a_hostile_frame_gets_an_error_that_acknowledges_it_and_the_next_frame_applies(
    token, name
):
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))
    await say(runner, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    await say(runner, frames.elicitation(2, 7, frames.CLAUDE_QUESTION))
    hostile = HOSTILE[name]
    await runner.receive(hostile if isinstance(hostile, str) else json.dumps(hostile))
    await say(runner, frames.tool_call(4, "after", "Read a.py"))
    replies = socket_of(runner).sent
    assert [r["seq"] for r in replies if r["type"] == "error"] == [3]
    assert replies[-1] == {"type": "ack", "seq": 4} and socket_of(runner).closed is None
    labels = await database_sync_to_async(
        lambda: list(ToolActivity.objects.values_list("agent_label", flat=True))
    )()
    assert labels == ["Read a.py"]
    await runner.stop()


@pytest.mark.parametrize(
    "text",
    [deep(10_000, 3), '{"type": "acp", "seq": 3, "at": NaN', "[1, 2]", '"a frame"'],
    ids=["JSON nested 10,000 deep", "cut short", "an array", "a string"],
)
async def test_a_frame_whose_seq_cannot_be_read_is_refused_and_the_socket_stays_open(token, text):
    runner = await session(token)
    await say(runner, frames.hello(uuid.uuid4()))
    await say(runner, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    await runner.receive(text)
    await say(runner, frames.say(2, "Still here."))
    replies = socket_of(runner).sent
    assert [r["seq"] for r in replies if r["type"] == "error"] == [None]
    assert replies[-1] == {"type": "ack", "seq": 2} and socket_of(runner).closed is None
    await runner.stop()


async def test_text_is_cleaned_before_it_is_stored(token):
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    await say(
        runner,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.tool_call(2, "id\ud800\u0000", "Read\u0000 a.py\udfff"),  # sent as escapes
    )
    row = await database_sync_to_async(ToolActivity.objects.get)(chat_id=chat_id)
    stored = (row.tool_call_id, row.agent_label)  # a lone surrogate is U+FFFD, a NUL is gone
    assert tuple(text.rstrip("\ufffd") for text in stored) == ("id", "Read a.py")
    assert all(text.endswith("\ufffd") for text in stored)
    await runner.stop()


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


async def test_a_runner_socket_that_dies_without_a_disconnect_leaves_no_heartbeat_behind(
    acme, monkeypatch
):
    plain = (await database_sync_to_async(AgentToken.issue)(acme, "laptop"))[1]
    sessions: list[pipeline.RunnerSession] = []
    real_hello = pipeline.RunnerSession.hello

    async def hello_then_fail(self: pipeline.RunnerSession, raw: Any) -> None:
        sessions.append(self)
        await real_hello(self, raw)
        raise RuntimeError("a bug after the hello")  # the consumer dies: no disconnect()

    monkeypatch.setattr(pipeline.RunnerSession, "hello", hello_then_fail)
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {plain}".encode())]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to(frames.hello(uuid.uuid4()))
    with pytest.raises(RuntimeError, match="a bug after the hello"):
        await socket.wait(timeout=5)
    heartbeat = sessions[0].heartbeat
    assert heartbeat is not None
    await asyncio.sleep(0)
    assert heartbeat.cancelled()


async def test_a_chat_deleted_while_its_runner_is_connected_closes_the_socket_for_good(token):
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    await database_sync_to_async(lambda: Chat.objects.filter(pk=chat_id).delete())()
    await say(runner, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    assert socket_of(runner).closed == (CLOSE_FORBIDDEN, "this chat was deleted on the server")
    assert socket_of(runner).sent == [{"type": "ack", "seq": 0}]
    await runner.stop()


async def owner_with_an_answer_waiting(token: AgentToken, chat_id: uuid.UUID) -> Chat:
    """A runner's chat with a prompt answered while the runner was away."""
    owner = await session(token, FakeSocket("owner"))
    await say(
        owner,
        frames.hello(chat_id),
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.permission(2, 7, "c1", "Delete build/"),
    )
    await owner.stop()

    def answer() -> Chat:
        Prompt.objects.filter(chat_id=chat_id).update(
            answered_at=timezone.now(), answer={"outcome": "selected", "optionId": "allow-once"}
        )
        return Chat.objects.get(pk=chat_id)

    chat: Chat = await database_sync_to_async(answer)()
    return chat


@pytest.mark.parametrize(
    "secret",
    [None, "another-runners-secret-of-forty-three-chars"],
    ids=["missing secret", "wrong secret"],
)
@pytest.mark.parametrize("acked", [0, 2])
async def test_a_hello_without_the_chats_secret_is_refused_and_changes_nothing(
    token, secret, acked
):
    chat_id = uuid.uuid4()
    before = await owner_with_an_answer_waiting(token, chat_id)
    hello = frames.hello(chat_id, acked=acked, secret=secret)
    if secret is None:
        del hello["secret"]
    intruder = await session(token, FakeSocket("intruder"))  # the same token, even
    await say(intruder, hello, frames.turn_started(3, uuid.uuid4(), uuid.uuid4()))
    closed = socket_of(intruder).closed
    assert closed is not None and closed[0] == CLOSE_FORBIDDEN
    sent = socket_of(intruder).sent  # why, and no ack, no answer replayed
    assert sent in ([], [{"type": "error", "seq": None, "error": closed[1]}])
    assert answered_by(chat_id) == set()
    after = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert (after.version, after.last_seq, after.runner_connected, after.runner_channel) == (
        before.version,
        2,
        False,
        "owner",
    )
    waiting = await database_sync_to_async(Prompt.objects.get)(chat_id=chat_id)
    assert waiting.answered_at is not None  # still waiting for its runner
    await intruder.stop()


async def test_a_new_chat_is_not_made_without_a_secret(token):
    chat_id = uuid.uuid4()
    hello = frames.hello(chat_id)
    del hello["secret"]
    runner = await session(token)
    await say(runner, hello)
    assert socket_of(runner).closed == (CLOSE_FORBIDDEN, "a hello must carry the runner's secret")
    assert not await database_sync_to_async(Chat.objects.filter(pk=chat_id).exists)()


async def test_a_chat_made_before_runners_had_secrets_is_refused_to_any_secret(token, acme):
    change, _ = await database_sync_to_async(presence.connect)(acme.pk, uuid.uuid4(), "old")
    runner = await session(token)
    await say(runner, frames.hello(change.chat_id, acked=0))
    closed = socket_of(runner).closed
    assert closed is not None and closed[0] == CLOSE_FORBIDDEN


async def test_the_right_secret_from_a_new_socket_takes_the_chat_from_the_old_one(token):
    chat_id = uuid.uuid4()
    first = await session(token, FakeSocket("socket-1"))
    await say(first, frames.hello(chat_id), frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    assert answered_by(chat_id) == {"socket-1"}
    # The old socket still looks connected (a server process that lost its network, say).
    second = await session(token, FakeSocket("socket-2"))
    await say(second, frames.hello(chat_id, acked=1))
    assert socket_of(second).closed is None
    assert socket_of(second).sent[0] == {"type": "ack", "seq": 1}
    assert answered_by(chat_id) == {"socket-2"}  # answers reach the new socket only
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert chat.runner_connected and chat.runner_channel == "socket-2"
    await first.stop()
    await second.stop()


async def test_a_socket_overtaken_before_it_joined_gives_the_chat_way(token, monkeypatch):
    chat_id = uuid.uuid4()
    await say(await session(token, FakeSocket("socket-0")), frames.hello(chat_id))
    real_claim = presence.claim

    def overtaken(*args: Any) -> presence.Claimed:
        claimed = real_claim(*args)
        # A newer socket of the runner claims the chat on another process before this one
        # joins the runner group, so its takeover could not remove this one.
        real_claim(args[0], chat_id, "socket-2", 0, frames.secret_of(chat_id))
        return claimed

    monkeypatch.setattr(presence, "claim", overtaken)
    late = await session(token, FakeSocket("socket-1"))
    await say(late, frames.hello(chat_id))
    assert socket_of(late).closed == (
        CLOSE_PROTOCOL,
        "another connection of this runner has the chat",
    )
    assert "socket-1" not in answered_by(chat_id)


async def test_a_heartbeat_write_that_fails_is_retried_and_the_heartbeat_goes_on(
    token, settings, monkeypatch
):
    settings.RUNNER_HEARTBEAT_SECONDS = 1
    real_alive = presence.alive
    calls: list[str] = []

    def alive(chat_id: uuid.UUID, channel: str) -> presence.Beat:
        calls.append("failed" if not calls else "written")
        if len(calls) == 1:  # not even a database error: a pool that timed out, say
            raise RuntimeError("couldn't get a connection after 30.00 sec")
        return real_alive(chat_id, channel)

    monkeypatch.setattr(presence, "alive", alive)
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    before = (await database_sync_to_async(Chat.objects.get)(pk=chat_id)).runner_seen_at
    for _ in range(100):
        if len(calls) >= 3:
            break
        await asyncio.sleep(0.05)
    assert calls[:3] == ["failed", "written", "written"]
    assert runner.heartbeat is not None and not runner.heartbeat.done()
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert before is not None and chat.runner_seen_at is not None
    assert chat.runner_seen_at > before and chat.runner_connected
    await runner.stop()


async def test_the_heartbeat_renews_the_groups_a_restarted_redis_forgot_but_never_a_lost_chats(
    token, settings
):
    settings.RUNNER_HEARTBEAT_SECONDS = 1
    chat_id = uuid.uuid4()
    first = await session(token)
    await say(first, frames.hello(chat_id))
    layer = get_channel_layer()
    await layer.flush()  # Redis restarted: every group is forgotten
    for _ in range(60):
        if answered_by(chat_id):
            break
        await asyncio.sleep(0.05)
    assert answered_by(chat_id) == {"socket-1"}
    assert "socket-1" in layer.groups.get(groups.token(token.pk), {})

    second = await session(token, FakeSocket("socket-2"))  # the runner moved to a new socket
    await say(second, frames.hello(chat_id))
    await asyncio.sleep(1.5)  # a beat of each socket
    assert answered_by(chat_id) == {"socket-2"}  # the old one's heartbeat did not put it back
    await first.stop()
    await second.stop()


# --- the protocol version ----------------------------------------------------------------------

INSTALL = f"pip install 'koruweb=={importlib.metadata.version('koruweb')}'"


@pytest.mark.parametrize(
    "protocol",
    [None, 0, PROTOCOL_VERSION + 1, str(PROTOCOL_VERSION), True],
    ids=["none", "older", "newer", "a string", "a bool"],
)
async def test_a_hello_of_another_protocol_is_refused_with_the_runner_to_install_over_the_socket(
    acme, protocol
):
    plain = (await database_sync_to_async(AgentToken.issue)(acme, "laptop"))[1]
    chat_id = uuid.uuid4()
    hello = frames.hello(chat_id)
    if protocol is None:
        del hello["protocol"]
    else:
        hello["protocol"] = protocol
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {plain}".encode())]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to(hello)
    closed = await socket.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == CLOSE_UPGRADE == 4426
    assert closed["reason"] == (
        f"this koruweb server speaks runner protocol {PROTOCOL_VERSION}; install its runner: "
        + INSTALL
    )
    assert not await database_sync_to_async(Chat.objects.filter(pk=chat_id).exists)()


async def test_a_hello_of_another_protocol_is_refused_before_the_rest_of_it_is_read(token):
    runner = await session(token)
    await say(runner, {"type": "hello", "protocol": 2, "chat": "a shape this server never knew"})
    closed = socket_of(runner).closed
    assert closed is not None and closed[0] == CLOSE_UPGRADE and INSTALL in str(closed[1])
    assert socket_of(runner).sent == []


def test_the_reason_fits_a_close_frame_and_names_a_plain_install_when_the_version_is_unknown(
    monkeypatch,
):
    assert len(upgrade_reason().encode()) <= CLOSE_REASON_BYTES
    monkeypatch.setattr(wire_frames, "package_version", lambda: None)
    assert upgrade_reason().endswith("install its runner: pip install koruweb")
    monkeypatch.setattr(wire_frames, "package_version", lambda: "1." + "9" * 200)
    assert len(upgrade_reason().encode()) == CLOSE_REASON_BYTES
