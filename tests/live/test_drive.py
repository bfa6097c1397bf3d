"""Driving a run from the web: messages, the queue, cancel and modes, through a runner's session
(``pipeline.RunnerSession`` on a fake socket) and the pages' POSTs (Django's test client)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity.live import drive
from activity.models import Chat, InferenceAttempt, Role, WebPrompt, Workspace
from activity.push import pushes
from activity.sockets import pipeline
from activity.wire.frames import WEB_PROMPT_CHARS
from tests import frames
from tests.members import logged_in, member
from tests.sockets.test_pipeline import (  # noqa: F401  (fixtures: the channel layer flushed, a token)
    FakeSocket,
    close_connections,
    say,
    session,
    socket_of,
    token,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

MODES = [
    {"id": "default", "name": "Ask first", "description": "Asks before it acts"},
    {"id": "plan", "name": "Plan", "description": "Plans, changes nothing"},
    {"id": "bypassPermissions", "name": "Bypass", "description": "Runs anything"},
]
COMMANDS = [{"name": "review", "description": "Review the diff", "hint": ""}]


def session_info(seq: int, allow_web: bool = True, stays: bool = False, **more: Any) -> dict:
    return {
        "type": "session_info",
        "seq": seq,
        "at": frames.T0 + seq,
        "allow_web": allow_web,
        "web_modes": ["default", "plan"],
        "modes": MODES,
        "mode": "default",
        "commands": COMMANDS,
        "stays": stays,
        **more,
    }


def web_turn(seq: int, attempt: uuid.UUID, prompt: WebPrompt) -> dict[str, Any]:
    started = frames.turn_started(seq, attempt, uuid.uuid4(), prompt=prompt.text)
    return {**started, "web_prompt_id": str(prompt.pk)}


class Run:
    """A run whose runner is connected through a session on a fake socket."""

    def __init__(self, runner: pipeline.RunnerSession, chat_id: uuid.UUID) -> None:
        self.runner, self.chat_id, self.seq = runner, chat_id, 0

    async def say(self, *made: Any) -> None:
        """Frames from the runner, numbered in order: each ``made`` is a function of the seq."""
        sent = []
        for make in made:
            self.seq += 1
            sent.append(make(self.seq))
        await say(self.runner, *sent)

    async def reached(self, kind: str) -> list[dict[str, Any]]:
        """The frames of ``kind`` the runner has got: on its socket, or through its group (as
        ``consumers.AgentConsumer.runner_answer`` forwards them)."""
        socket = socket_of(self.runner)
        layer = get_channel_layer()
        while not layer.channels.get(socket.channel_name, asyncio.Queue()).empty():
            socket.sent.append(json.loads((await layer.receive(socket.channel_name))["text"]))
        return [frame for frame in socket.sent if frame["type"] == kind]

    async def chat(self) -> Chat:
        chat: Chat = await database_sync_to_async(Chat.objects.get)(pk=self.chat_id)
        return chat

    async def prompts(self) -> list[WebPrompt]:
        found = WebPrompt.objects.filter(chat_id=self.chat_id).order_by("created_at")
        listed: list[WebPrompt] = await database_sync_to_async(list)(found)
        return listed

    def url(self, tail: str = "") -> str:
        return f"/chats/{self.chat_id}/{tail}"


async def connect(token, **info: Any) -> Run:  # noqa: F811
    runner = await session(token)
    chat_id = uuid.uuid4()
    await say(runner, frames.hello(chat_id))
    run = Run(runner, chat_id)
    await run.say(lambda seq: session_info(seq, **info))
    return run


async def post(client: Client, url: str, **data: str) -> Any:
    return await sync_to_async(client.post)(url, data, HTTP_HX_REQUEST="true")


async def page(client: Client, run: Run) -> str:
    response = await sync_to_async(client.get)(run.url())
    return str(response.content.decode())


async def test_a_message_posted_from_the_page_reaches_the_runner_as_a_prompt_frame(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    response = await post(as_approver, run.url("messages"), text="Run the tests, then **fix** them")
    assert response.status_code == 200 and "Sent." in response.content.decode()
    [sent] = await run.reached("prompt")
    [message] = await run.prompts()
    assert sent == {
        "type": "prompt",
        "id": str(message.pk),
        "text": "Run the tests, then **fix** them",
        "by": "alice",
    }
    assert message.status == "sent" and message.sent_at is not None
    shown = await page(as_approver, run)
    assert "on its way to the agent" in shown and "Run the tests, then **fix** them" in shown
    await run.runner.stop()


async def test_the_turn_of_a_message_records_who_sent_it_and_the_message_leaves_the_queue(
    token,  # noqa: F811
    as_approver,
    as_viewer,
):
    run = await connect(token)
    await post(as_approver, run.url("messages"), text="Add a changelog entry")
    [message] = await run.prompts()
    attempt = uuid.uuid4()
    await run.say(lambda seq: web_turn(seq, attempt, message))
    turn = await database_sync_to_async(InferenceAttempt.objects.get)(pk=attempt)
    await database_sync_to_async(message.refresh_from_db)()
    assert message.status == "started" and message.attempt_id == attempt
    assert turn.sent_by_id == message.author_id
    assert await database_sync_to_async(lambda: turn.sent_by == message.author)()
    shown = await page(as_viewer, run)  # what every member sees
    assert "from <bdi>alice</bdi>, on the web" in shown and "on its way to the agent" not in shown
    await run.runner.stop()


async def test_a_message_sent_while_a_turn_runs_is_queued_and_goes_when_the_turn_ends(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    response = await post(as_approver, run.url("messages"), text="Then update the docs")
    assert "Queued" in response.content.decode()
    [message] = await run.prompts()
    assert message.status == "queued" and await run.reached("prompt") == []
    assert "goes when the agent is free" in await page(as_approver, run)
    await run.say(lambda seq: frames.turn_ended(seq, attempt))
    [sent] = await run.reached("prompt")
    assert sent["id"] == str(message.pk) and sent["text"] == "Then update the docs"
    await database_sync_to_async(message.refresh_from_db)()
    assert message.status == "sent"
    await run.runner.stop()


async def test_queued_messages_go_one_turn_at_a_time_oldest_first(token, as_approver):  # noqa: F811
    run = await connect(token)
    first_turn = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, first_turn, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="first")
    await post(as_approver, run.url("messages"), text="second")
    await run.say(lambda seq: frames.turn_ended(seq, first_turn))
    assert [f["text"] for f in await run.reached("prompt")] == ["first"]
    first, _ = await run.prompts()
    turn = uuid.uuid4()
    await run.say(lambda seq: web_turn(seq, turn, first), lambda seq: frames.turn_ended(seq, turn))
    assert [f["text"] for f in await run.reached("prompt")] == ["first", "second"]
    await run.runner.stop()


async def test_a_queued_message_can_be_edited_and_removed_but_a_sent_one_cannot(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await post(as_approver, run.url("messages"), text="Sent at once")
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="Waits its turn")
    sent, waiting = await run.prompts()
    edited = await post(as_approver, run.url(f"messages/{waiting.pk}/edit"), text="Waits, edited")
    assert edited.status_code == 200
    refused = await post(as_approver, run.url(f"messages/{sent.pk}/edit"), text="Changed")
    assert refused.status_code == 409 and "already sent" in refused.content.decode()
    gone = await post(as_approver, run.url(f"messages/{sent.pk}/remove"))
    assert gone.status_code == 409
    sent_now, waiting_now = await run.prompts()
    assert sent_now.text == "Sent at once" and sent_now.status == "sent"
    assert waiting_now.text == "Waits, edited"
    assert "Waits, edited" in await page(as_approver, run)
    assert (await post(as_approver, run.url(f"messages/{waiting.pk}/remove"))).status_code == 200
    assert [p.status for p in await run.prompts()] == ["sent", "removed"]
    assert "Waits, edited" not in await page(as_approver, run)
    await run.say(lambda seq: frames.turn_ended(seq, attempt))
    assert [f["text"] for f in await run.reached("prompt")] == ["Sent at once", "Sent at once"]
    await run.runner.stop()


async def test_a_message_sent_but_not_started_is_resent_on_the_next_hello_and_started_once(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    await post(as_approver, run.url("messages"), text="Survive a reconnect")
    [message] = await run.prompts()
    await run.runner.stop()  # the runner's connection drops before it started the turn
    again = Run(await session(token, FakeSocket("socket-2")), run.chat_id)
    again.seq = run.seq
    await say(again.runner, frames.hello(run.chat_id, acked=run.seq))
    [resent] = await again.reached("prompt")
    assert resent["id"] == str(message.pk)
    attempt, twice = uuid.uuid4(), uuid.uuid4()
    await again.say(lambda seq: web_turn(seq, attempt, message))
    await again.say(lambda seq: web_turn(seq, twice, message))  # a confused runner
    await database_sync_to_async(message.refresh_from_db)()
    assert message.status == "started" and message.attempt_id == attempt
    await again.runner.stop()
    third = Run(await session(token, FakeSocket("socket-3")), run.chat_id)
    await say(third.runner, frames.hello(run.chat_id, acked=again.seq))
    assert await third.reached("prompt") == []  # started: never sent again
    await third.runner.stop()


async def test_a_message_to_a_runner_that_stays_waits_while_it_is_offline_and_goes_on_its_hello(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token, stays=True)
    await run.runner.stop()
    response = await post(as_approver, run.url("messages"), text="When you are back")
    assert response.status_code == 200 and "Queued" in response.content.decode()
    back = Run(await session(token, FakeSocket("socket-2")), run.chat_id)
    await say(back.runner, frames.hello(run.chat_id, acked=run.seq))
    assert [f["text"] for f in await back.reached("prompt")] == ["When you are back"]
    await back.runner.stop()


async def test_a_runner_that_left_for_good_takes_no_more_messages(token, as_approver):  # noqa: F811
    run = await connect(token, stays=False)
    await run.runner.stop()
    response = await post(as_approver, run.url("messages"), text="Anyone there?")
    assert response.status_code == 409 and "has left" in response.content.decode()
    assert await run.prompts() == []


async def test_a_run_without_allow_web_refuses_messages_and_shows_no_controls(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token, allow_web=False)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    response = await post(as_approver, run.url("messages"), text="Hello?")
    assert response.status_code == 409 and "--allow-web" in response.content.decode()
    cancel = await post(as_approver, run.url(f"turns/{attempt}/cancel"))
    mode = await post(as_approver, run.url("mode"), mode="plan")
    assert cancel.status_code == 409 and mode.status_code == 409
    shown = await page(as_approver, run)
    assert "This run only reports: start it with --allow-web" in shown
    assert "Cancel turn" not in shown and 'name="mode"' not in shown
    assert 'data-open="false"' in shown  # the message box (kept for a run that may allow it) hides
    assert await run.prompts() == [] and await run.reached("cancel") == []
    await run.runner.stop()


async def test_the_page_says_what_a_run_that_takes_prompts_allows(token, as_approver):  # noqa: F811
    run = await connect(token)
    shown = await page(as_approver, run)
    assert "This run takes prompts from the web." in shown
    assert 'id="compose"' in shown and 'data-open="true"' in shown
    assert 'data-name="review"' in shown  # the "/" completion's commands
    await run.runner.stop()


async def test_cancel_sends_cancel_to_the_runner_and_the_turn_says_who_cancelled_it(
    token,  # noqa: F811
    as_approver,
    as_viewer,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    assert "Cancel turn" in await page(as_approver, run)
    response = await post(as_approver, run.url(f"turns/{attempt}/cancel"))
    assert response.status_code == 200
    [cancel] = await run.reached("cancel")
    assert cancel["attempt_id"] == str(attempt) and cancel["by"] == "alice"
    assert cancel["id"] == str(drive.cancel_id(attempt))
    turn = await database_sync_to_async(InferenceAttempt.objects.get)(pk=attempt)
    assert turn.cancelled_by_id is not None and turn.cancel_asked_at is not None
    assert "cancel asked by <bdi>alice</bdi>" in await page(as_viewer, run)
    await run.say(lambda seq: frames.turn_ended(seq, attempt, "cancelled"))
    assert "Cancelled by alice" in await page(as_viewer, run)
    late = await post(as_approver, run.url(f"turns/{attempt}/cancel"))
    assert late.status_code == 409 and "not running" in late.content.decode()
    assert len(await run.reached("cancel")) == 1
    await run.runner.stop()


async def test_a_cancel_the_runner_refuses_is_shown_and_the_turn_is_not_marked_cancelled(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url(f"turns/{attempt}/cancel"))
    refusal = {"type": "web_refused", "id": str(drive.cancel_id(attempt)), "reason": "too late"}
    await run.say(lambda seq: {**refusal, "seq": seq, "at": frames.T0 + seq})
    turn = await database_sync_to_async(InferenceAttempt.objects.get)(pk=attempt)
    assert turn.cancelled_by_id is None
    assert "The runner refused the web&#x27;s last request: too late" in await page(
        as_approver, run
    )
    await run.runner.stop()


async def test_a_message_the_runner_refuses_shows_why_and_the_next_one_goes(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    await post(as_approver, run.url("messages"), text="Refuse me")
    await run.runner.stop()
    back = Run(await session(token, FakeSocket("socket-2")), run.chat_id)
    back.seq = run.seq
    await say(back.runner, frames.hello(run.chat_id, acked=run.seq))
    await post(as_approver, run.url("messages"), text="Take me")  # queued behind the first
    [first, _] = await back.prompts()
    refusal = {"type": "web_refused", "id": str(first.pk), "reason": "the agent is busy"}
    await back.say(lambda seq: {**refusal, "seq": seq, "at": frames.T0 + seq})
    assert [f["text"] for f in await back.reached("prompt")] == ["Refuse me", "Take me"]
    assert [p.status for p in await back.prompts()] == ["refused", "sent"]
    assert "The runner refused it: the agent is busy" in await page(as_approver, back)
    await back.runner.stop()


async def test_a_mode_switch_goes_only_for_a_mode_the_web_may_choose(token, as_approver):  # noqa: F811
    run = await connect(token)
    response = await post(as_approver, run.url("mode"), mode="plan")
    assert response.status_code == 200
    [asked] = await run.reached("set_mode")
    assert asked["mode"] == "plan" and asked["by"] == "alice"
    for mode in ("bypassPermissions", "yolo"):  # the agent's, but not --web-modes; nobody's
        refused = await post(as_approver, run.url("mode"), mode=mode)
        assert refused.status_code == 400 and "does not let the web choose" in str(refused.content)
    assert len(await run.reached("set_mode")) == 1
    shown = await page(as_approver, run)
    assert 'value="plan"' in shown and 'value="bypassPermissions"' not in shown
    await run.runner.stop()


async def test_the_agents_mode_change_shows_as_the_current_mode(token, as_approver):  # noqa: F811
    run = await connect(token)
    switched = {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
    await run.say(lambda seq: frames.update(seq, switched))
    assert (await run.chat()).mode == "plan"
    shown = await page(as_approver, run)
    assert 'value="plan" aria-pressed="true"' in shown
    assert 'value="default" aria-pressed="false"' in shown
    await run.runner.stop()


@pytest.mark.parametrize("who", ["as_viewer", "as_outsider"])
async def test_viewers_and_outsiders_are_refused_every_action_and_nothing_changes(
    token,  # noqa: F811
    as_approver,
    as_viewer,
    as_outsider,
    who,
):
    client = as_viewer if who == "as_viewer" else as_outsider
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="Queued by alice")
    [queued] = await run.prompts()
    before = (await run.chat()).version
    expected = 403 if who == "as_viewer" else 404
    for url, data in [
        (run.url("messages"), {"text": "Let me in"}),
        (run.url(f"messages/{queued.pk}/edit"), {"text": "Changed"}),
        (run.url(f"messages/{queued.pk}/remove"), {}),
        (run.url(f"turns/{attempt}/cancel"), {}),
        (run.url("mode"), {"mode": "plan"}),
    ]:
        assert (await post(client, url, **data)).status_code == expected, url
    [still] = await run.prompts()
    assert still.text == "Queued by alice" and still.status == "queued"
    assert (await run.chat()).version == before
    for kind in ("prompt", "cancel", "set_mode"):
        assert await run.reached(kind) == []
    await run.runner.stop()


async def test_a_viewer_gets_no_message_box_and_the_push_carries_no_token(
    token,  # noqa: F811
    as_approver,
    as_viewer,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    before = (await run.chat()).version
    await post(as_approver, run.url("messages"), text="Queued for later")
    shown = await page(as_viewer, run)
    assert 'id="compose"' not in shown and 'data-can-answer="false"' in shown
    pushed, _ = await database_sync_to_async(pushes.render_changes)(run.chat_id, before)
    assert "Queued for later" in pushed and 'id="compose"' not in pushed
    assert "csrfmiddlewaretoken" not in pushed
    await run.runner.stop()


async def test_a_message_without_the_csrf_token_is_refused(token, acme_approver):  # noqa: F811
    run = await connect(token)
    client = Client(enforce_csrf_checks=True)
    await sync_to_async(client.force_login)(acme_approver)
    response = await sync_to_async(client.post)(run.url("messages"), {"text": "Forged"})
    assert response.status_code == 403
    assert await run.prompts() == [] and await run.reached("prompt") == []
    await run.runner.stop()


async def test_an_empty_or_oversized_message_is_refused(token, as_approver):  # noqa: F811
    run = await connect(token)
    assert (await post(as_approver, run.url("messages"), text="  \n")).status_code == 400
    huge = "x" * (WEB_PROMPT_CHARS + 1)
    assert (await post(as_approver, run.url("messages"), text=huge)).status_code == 400
    assert await run.prompts() == []
    await run.runner.stop()


async def test_a_message_goes_at_once_to_an_agent_that_reported_calls_before_any_prompt(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    await run.say(lambda seq: frames.tool_call(seq, "c0", "Index the project", status="completed"))
    response = await post(as_approver, run.url("messages"), text="Now the real work")
    assert "Sent." in response.content.decode()
    assert [f["text"] for f in await run.reached("prompt")] == ["Now the real work"]
    await run.runner.stop()


async def test_without_javascript_a_message_is_a_form_post_that_comes_back_to_the_run(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    response = await sync_to_async(as_approver.post)(run.url("messages"), {"text": "Plain form"})
    assert response.status_code == 302 and response["Location"] == run.url()
    assert [f["text"] for f in await run.reached("prompt")] == ["Plain form"]
    refused = await sync_to_async(as_approver.post)(run.url("mode"), {"mode": "bypassPermissions"})
    assert refused.status_code == 400 and refused["Content-Type"].startswith("text/plain")
    await run.runner.stop()


async def test_what_the_agent_names_its_modes_and_commands_is_shown_as_text(
    token,  # noqa: F811
    as_approver,
):
    payload = '"><img src=x onerror=alert(1)>'
    modes = [{"id": "plan", "name": payload, "description": payload}]
    commands = [{"name": "x" + payload[:20], "description": payload, "hint": payload}]
    run = await connect(token, modes=modes, commands=commands, web_modes=["plan"])
    shown = await page(as_approver, run)
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    await run.runner.stop()


# A key line and a token in the shapes activity/core/masking.py masks (issue 22).
KEY_LINE = "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123"
KEY = "abcdefghijklmnopqrstuvwxyz0123"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


async def test_a_message_goes_as_typed_and_only_its_mask_is_kept_once_its_turn_started(
    token,  # noqa: F811
    as_approver,
    as_viewer,
):
    run = await connect(token)
    first = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, first, uuid.uuid4()))
    typed = f"Deploy with\n{KEY_LINE}"
    await post(as_approver, run.url("messages"), text=typed)
    [message] = await run.prompts()
    assert message.status == "queued" and message.text == typed
    mine = await page(as_approver, run)
    assert KEY in mine  # queued: its author sees it, and may edit it, as typed
    assert "Sent to the agent as typed; secrets in it are masked once its turn starts." in mine
    assert 'aria-describedby="compose-help compose-masked"' in mine
    await run.say(lambda seq: frames.turn_ended(seq, first))
    assert [f["text"] for f in await run.reached("prompt")] == [typed]
    turn = uuid.uuid4()
    await run.say(lambda seq: web_turn(seq, turn, message))
    await database_sync_to_async(message.refresh_from_db)()
    assert message.status == "started"
    assert message.text == "Deploy with\nOPENAI_API_KEY=" + "*" * 38
    for person in (as_approver, as_viewer):
        shown = await page(person, run)
        assert "OPENAI_API_KEY=*****" in shown and KEY not in shown
    await run.runner.stop()


async def test_a_message_with_a_secret_is_resent_as_typed_on_each_hello_until_its_turn_starts(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    typed = f"Push with {GITHUB_TOKEN}"
    await post(as_approver, run.url("messages"), text=typed)
    await run.runner.stop()  # gone before it started the turn
    again = Run(await session(token, FakeSocket("socket-2")), run.chat_id)
    await say(again.runner, frames.hello(run.chat_id, acked=run.seq))
    assert [f["text"] for f in await again.reached("prompt")] == [typed]
    [message] = await again.prompts()
    assert message.status == "sent" and message.text == typed
    await again.runner.stop()


async def test_a_message_that_can_no_longer_go_keeps_only_its_mask(
    token,  # noqa: F811
    as_approver,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text=f"refused {GITHUB_TOKEN}")
    await post(as_approver, run.url("messages"), text=f"removed {GITHUB_TOKEN}")
    refused, removed = await run.prompts()
    assert (await post(as_approver, run.url(f"messages/{removed.pk}/remove"))).status_code == 200
    await run.say(lambda seq: frames.turn_ended(seq, attempt))
    assert [f["text"] for f in await run.reached("prompt")] == [f"refused {GITHUB_TOKEN}"]
    refusal = {"type": "web_refused", "id": str(refused.pk), "reason": "the agent is busy"}
    await run.say(lambda seq: {**refusal, "seq": seq, "at": frames.T0 + seq})
    masked = "ghp_" + "*" * 36
    assert [(p.status, p.text) for p in await run.prompts()] == [
        ("refused", f"refused {masked}"),
        ("removed", f"removed {masked}"),
    ]
    shown = await page(as_approver, run)
    assert "The runner refused it: the agent is busy" in shown and GITHUB_TOKEN not in shown
    await run.runner.stop()


# --- A message is its author's; limits that say what they are (issue 25) ----------------------


async def another_approver(acme: Workspace) -> Client:
    """dave, a second approver of Acme: he may drive the run, but alice's messages are hers."""
    dave = await database_sync_to_async(member)(acme, "dave", Role.APPROVER)
    return await sync_to_async(logged_in)(dave)


async def test_another_members_edit_of_my_queued_message_is_refused_and_the_agent_gets_my_text(
    token,  # noqa: F811
    acme,
    as_approver,
    as_admin,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="Only touch docs/")
    [mine] = await run.prompts()
    dave = await another_approver(acme)
    for someone in (dave, as_admin):  # an admin may remove it, but not put words in alice's name
        refused = await post(someone, run.url(f"messages/{mine.pk}/edit"), text="rm -rf /")
        assert refused.status_code == 403
        assert "This message is alice&#x27;s: only its author may edit it." in str(
            refused.content.decode()
        )
    [still] = await run.prompts()
    assert still.text == "Only touch docs/" and still.author_id == mine.author_id
    await run.say(lambda seq: frames.turn_ended(seq, attempt))
    assert [f["text"] for f in await run.reached("prompt")] == ["Only touch docs/"]
    assert [f["by"] for f in await run.reached("prompt")] == ["alice"]
    turn = uuid.uuid4()
    await run.say(lambda seq: web_turn(seq, turn, still))
    started = await database_sync_to_async(InferenceAttempt.objects.get)(pk=turn)
    assert started.sent_by_id == mine.author_id  # the turn names who wrote what it ran
    await run.runner.stop()


async def test_another_member_cannot_remove_my_message_but_an_admin_can_and_the_queue_says_who(
    token,  # noqa: F811
    acme,
    acme_admin,
    as_approver,
    as_admin,
    as_viewer,
):
    run = await connect(token)
    attempt = uuid.uuid4()
    await run.say(lambda seq: frames.turn_started(seq, attempt, uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="Deploy to production")
    [message] = await run.prompts()
    dave = await another_approver(acme)
    refused = await post(dave, run.url(f"messages/{message.pk}/remove"))
    assert refused.status_code == 403
    assert "only its author or an admin of this workspace may remove it" in str(
        refused.content.decode()
    )
    assert [p.status for p in await run.prompts()] == ["queued"]
    removed = await post(as_admin, run.url(f"messages/{message.pk}/remove"))
    assert removed.status_code == 200
    [gone] = await run.prompts()
    assert gone.status == "removed" and gone.removed_by_id == acme_admin.pk
    assert gone.removed_at is not None
    shown = await page(as_viewer, run)  # what every member sees in the queue
    assert "removed by <bdi>carol</bdi>" in shown and "Deploy to production" not in shown
    await run.say(lambda seq: frames.turn_ended(seq, attempt))
    assert await run.reached("prompt") == []  # removed: it never goes
    await run.runner.stop()


async def test_the_queue_marks_each_message_with_its_author_for_the_page_to_show_edit_to_them(
    token,  # noqa: F811
    acme_approver,
    as_approver,
    as_admin,
):
    run = await connect(token)
    await run.say(lambda seq: frames.turn_started(seq, uuid.uuid4(), uuid.uuid4()))
    await post(as_approver, run.url("messages"), text="Mine")
    shown = await page(as_admin, run)
    assert f'data-author="{acme_approver.pk}"' in shown  # one markup for every viewer
    assert 'data-manages="true"' in shown and 'data-me="' in shown
    assert 'data-manages="false"' in await page(as_approver, run)
    await run.runner.stop()


async def test_the_queue_shows_the_last_messages_that_did_not_go_and_counts_the_older_ones(
    token,  # noqa: F811
    acme_approver,
    acme_admin,
    as_approver,
):
    run = await connect(token)
    await run.say(lambda seq: frames.turn_started(seq, uuid.uuid4(), uuid.uuid4()))

    def history() -> None:
        WebPrompt.objects.bulk_create(
            WebPrompt(
                chat_id=run.chat_id,
                author=acme_approver,
                text=f"old {n}",
                status="removed",
                removed_by=acme_admin,
                created_at=timezone.now() - timedelta(minutes=100 - n),
            )
            for n in range(WebPrompt.HISTORY_SHOWN + 7)
        )

    await database_sync_to_async(history)()
    await post(as_approver, run.url("messages"), text="Waiting")
    shown = await page(as_approver, run)
    assert shown.count("removed by <bdi>carol</bdi>") == WebPrompt.HISTORY_SHOWN
    assert "7 earlier messages that did not go (refused or removed) not shown" in shown
    assert "Waiting" in shown
    await run.runner.stop()


def queued_by(chat_id: uuid.UUID, author: User | None, count: int) -> None:
    WebPrompt.objects.bulk_create(
        WebPrompt(chat_id=chat_id, author=author, text=f"queued {n}") for n in range(count)
    )


def post_counting_queries(client: Client, url: str, text: str) -> int:
    with CaptureQueriesContext(connection) as made:
        response = client.post(url, {"text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    assert "Queued" in response.content.decode()
    return len(made.captured_queries)


async def test_with_the_queue_limit_at_1000_post_1000_makes_as_many_queries_as_post_1(
    token,  # noqa: F811
    acme_approver,
    acme_admin,
    as_approver,
    settings,
):
    settings.DRIVE_QUEUE_PER_RUN = settings.DRIVE_QUEUE_PER_PERSON = 1_000
    run = await connect(token)
    await run.say(lambda seq: frames.turn_started(seq, uuid.uuid4(), uuid.uuid4()))

    def removed(count: int) -> None:
        WebPrompt.objects.bulk_create(
            WebPrompt(chat_id=run.chat_id, author=acme_approver, text="gone", status="removed")
            for _ in range(count)
        )

    await database_sync_to_async(removed)(WebPrompt.HISTORY_SHOWN + 1)  # some history already
    first = await sync_to_async(post_counting_queries)(as_approver, run.url("messages"), "post 1")
    await database_sync_to_async(queued_by)(run.chat_id, acme_approver, 998)
    await database_sync_to_async(removed)(5_000)  # and much more that never went
    last = await sync_to_async(post_counting_queries)(as_approver, run.url("messages"), "post 1000")
    assert last == first
    assert len(await run.prompts()) == 1_000 + 5_000 + WebPrompt.HISTORY_SHOWN + 1
    refused = await post(as_approver, run.url("messages"), text="post 1001")
    assert refused.status_code == 409 and "already has 1,000 messages waiting" in str(
        refused.content.decode()
    )
    await run.runner.stop()


async def test_at_the_default_limits_the_message_past_them_is_refused_and_says_the_limit(
    token,  # noqa: F811
    acme_approver,
    as_approver,
    as_admin,
):
    assert (settings.DRIVE_QUEUE_PER_RUN, settings.DRIVE_QUEUE_PER_PERSON) == (20, 5)
    run = await connect(token)
    await run.say(lambda seq: frames.turn_started(seq, uuid.uuid4(), uuid.uuid4()))
    for n in range(5):
        assert (await post(as_approver, run.url("messages"), text=f"mine {n}")).status_code == 200
    sixth = await post(as_approver, run.url("messages"), text="one more of mine")
    assert sixth.status_code == 409
    assert (
        "You already have 5 messages waiting in this run, the most one person may: wait until "
        "the agent has taken one, or remove one."
    ) in sixth.content.decode()
    await database_sync_to_async(queued_by)(run.chat_id, None, 15)  # others' (former members')
    full = await post(as_admin, run.url("messages"), text="the 21st")
    assert full.status_code == 409
    assert (
        "This run already has 20 messages waiting, the most it holds: wait until the agent has "
        "taken some."
    ) in full.content.decode()
    assert len(await run.prompts()) == 20 and await run.reached("prompt") == []
    await run.runner.stop()
