"""Runner presence that cannot lie (issue 23): whether a runner is connected follows its socket
and its heartbeats, counted by the process that holds the socket; a turn the server gave up on
while its runner was still in it comes back, prompts, queue and all."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from activity.live import presence
from activity.live.work import ChatChange
from activity.models import Chat, InferenceAttempt, Prompt, ToolActivity, WebPrompt, Workspace
from tests import frames
from tests.factories import apply, run
from tests.live.test_drive import Run, connect, post
from tests.sockets.test_consumers import viewer
from tests.sockets.test_pipeline import (  # noqa: F401  (fixtures: the channel layer flushed, a token)
    FakeSocket,
    close_connections,
    say,
    session,
    token,
)

pytestmark = [pytest.mark.django_db(transaction=True)]
HEARTBEAT = 0.2  # s: the runner sockets' heartbeat in these tests


@pytest.fixture(autouse=True)
def quick_heartbeat(settings: Any) -> None:
    settings.RUNNER_HEARTBEAT_SECONDS = HEARTBEAT


async def until(what: str, check: Callable[[], Awaitable[bool]], within: float = 5) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


async def another_process_sweeps(after: float) -> list[ChatChange]:
    """A sweep ``after`` seconds from now on another server process: it holds none of this
    process's sockets, so it counts them by their silence (as if this one stalled that long).
    What it changed is not announced here: only this process's own pushes reach the page."""
    changes: list[ChatChange] = await database_sync_to_async(presence.sweep)(
        now=time.time() + after
    )
    return changes


@contextlib.asynccontextmanager
async def stalled(run: Run) -> AsyncIterator[None]:
    """This process stalls: its runner socket stays open but its heartbeat does not run (one
    under way finishes first); then it goes on."""
    heartbeat = run.runner.heartbeat
    assert heartbeat is not None
    heartbeat.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await heartbeat
    try:
        yield
    finally:
        run.runner.heartbeat = asyncio.get_running_loop().create_task(run.runner.beat(run.chat_id))


def past_the_grace() -> float:
    """Long enough to be counted silent, and then gone past the grace period."""
    return presence.grace_silence() + django_settings.RUNNER_GRACE_SECONDS + 1


async def connected(run: Run) -> bool:
    return (await run.chat()).runner_connected


async def receive_until(page: WebsocketCommunicator, shown: str) -> dict[str, Any]:
    """The first push to the page whose content has ``shown``."""
    while True:
        push: dict[str, Any] = await page.receive_json_from(timeout=5)
        if shown in push.get("content", ""):
            return push


async def test_a_heartbeat_after_a_sweep_counted_the_runner_gone_shows_it_connected_again(
    token,  # noqa: F811
    acme_viewer,
):
    run = await connect(token)
    page = await viewer(acme_viewer, run.chat_id)
    assert (await page.connect())[0]
    try:
        await page.send_json_to({"since": 0})
        assert 'data-runner="online"' in (await page.receive_json_from(timeout=5))["content"]
        async with stalled(run):
            [gone] = await another_process_sweeps(after=presence.grace_silence() + 1)
            assert not (await run.chat()).runner_connected
        back = await receive_until(page, 'data-runner="online"')  # its next heartbeat says so
        assert back["from"] >= gone.version
        chat = await run.chat()
        assert chat.runner_connected and chat.runner_left_at is None
    finally:
        await page.disconnect()
        await run.runner.stop()


async def test_a_sweep_never_counts_a_socket_this_process_holds_as_silent(token):  # noqa: F811
    run = await connect(token)
    async with stalled(run):
        sweep = database_sync_to_async(presence.sweep)
        assert await sweep(now=time.time() + past_the_grace(), held=presence.held()) == []
        assert await connected(run)
    await run.runner.stop()
    assert not await connected(run)  # its close says it is gone


def test_a_sweep_counts_a_socket_no_process_here_holds_as_gone_after_the_grace(acme, settings):
    settings.RUNNER_GRACE_SECONDS = 2
    attempt = uuid.uuid4()
    # A runner whose server process was SIGKILLed: its socket never closed, nobody holds it.
    chat = run(acme, frames.turn_started(1, attempt, uuid.uuid4()), channel="killed-process")
    seen = Chat.objects.get(pk=chat.pk).runner_seen_at
    assert seen is not None
    silence = presence.grace_silence()
    assert presence.sweep(now=seen.timestamp() + silence - 0.5, held=presence.held()) == []
    assert presence.sweep(now=seen.timestamp() + silence + 0.5, held=presence.held())
    chat.refresh_from_db()
    assert not chat.runner_connected and chat.runner_left_at == seen
    turn = InferenceAttempt.objects.get(pk=attempt)
    assert turn.stop_reason == "runner_lost"  # gone since it fell silent, past the grace


@pytest.mark.parametrize("comes_back", ["with its heartbeat", "with a new hello"])
async def test_a_turn_ended_lost_comes_back_with_its_runner_prompts_answerable_queue_waiting(
    token,  # noqa: F811
    as_approver,
    comes_back,
):
    run = await connect(token, stays=True)
    attempt = uuid.uuid4()
    await run.say(
        lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()),
        lambda seq: frames.permission(seq, 7, "c1", "Deploy"),
    )
    queued = await post(as_approver, run.url("messages"), text="Then update the docs")
    assert "Queued" in queued.content.decode()
    if comes_back == "with a new hello":
        await run.runner.stop()  # its socket dropped: a network blip
        await another_process_sweeps(after=past_the_grace())
        turn = await InferenceAttempt.objects.aget(pk=attempt)
        assert turn.stop_reason == "runner_lost"  # the server gave up on it
        run.runner = await session(token, FakeSocket("socket-2"))
        await say(run.runner, frames.hello(run.chat_id, acked=run.seq))
    else:
        async with stalled(run):
            await another_process_sweeps(after=past_the_grace())
            turn = await InferenceAttempt.objects.aget(pk=attempt)
            assert turn.stop_reason == "runner_lost"  # what the server guessed, wrongly
        await until("the runner shows connected", lambda: connected(run))

    turn = await InferenceAttempt.objects.aget(pk=attempt)
    assert (turn.ended_at, turn.stop_reason) == (None, "")
    prompt = await Prompt.objects.aget(chat_id=run.chat_id)
    assert prompt.awaits_answer
    assert (await ToolActivity.objects.aget(chat_id=run.chat_id)).approval == "pending"
    answered = await post(as_approver, f"/prompts/{prompt.pk}/answer", choice="allow-once")
    assert answered.status_code == 200, answered.content
    [told] = await run.reached("answer")
    assert told["request_id"] == 7
    assert await run.reached("prompt") == []  # the turn runs: the message waits for its end

    await run.say(
        lambda seq: frames.outcome(seq, 7, "allow-once"),
        lambda seq: frames.tool_update(seq, "c1", status="completed"),
        lambda seq: frames.turn_ended(seq, attempt),
    )
    [sent] = await run.reached("prompt")
    message = await WebPrompt.objects.aget(chat_id=run.chat_id)
    assert sent["id"] == str(message.pk) and message.status == "sent"
    turn = await InferenceAttempt.objects.aget(pk=attempt)
    assert turn.stop_reason == "end_turn"
    row = await ToolActivity.objects.aget(chat_id=run.chat_id)
    assert (row.status, row.approval) == ("completed", "approved")
    await run.runner.stop()


async def test_a_runner_shown_gone_between_turns_gets_the_queued_message_on_its_next_heartbeat(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token, stays=True)
    async with stalled(run):
        await another_process_sweeps(after=past_the_grace())
        queued = await post(as_approver, run.url("messages"), text="Run the tests")
        assert "Queued" in queued.content.decode()  # the page said the runner was offline

    async def reached() -> bool:
        return bool(await run.reached("prompt"))

    await until("the message reaches the runner", reached)
    [sent] = await run.reached("prompt")
    assert sent["text"] == "Run the tests" and await connected(run)
    assert not await InferenceAttempt.objects.filter(chat_id=run.chat_id).aexists()
    await run.runner.stop()


def test_the_runners_own_end_of_a_turn_the_server_gave_up_on_is_what_the_turn_says(
    acme: Workspace, settings
):
    settings.RUNNER_GRACE_SECONDS = 60
    attempt = uuid.uuid4()
    chat = run(acme, frames.turn_started(1, attempt, uuid.uuid4()), channel="runner")
    presence.disconnect(chat.pk, "runner")
    presence.sweep(now=time.time() + 61)
    assert InferenceAttempt.objects.get(pk=attempt).stop_reason == "runner_lost"
    apply(chat.pk, frames.turn_ended(2, attempt, "cancelled"))  # resent once it reconnects
    turn = InferenceAttempt.objects.get(pk=attempt)
    assert turn.stop_reason == "cancelled" and turn.ended_at == frames.T0 + 2
