"""A turn's reply and its calls in time order on the live page, kept so by pushes that carry
only what changed (activity/review/reads.py ``Flow``, activity/push/pushes.py)."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client

from activity.live.ingest import ingest
from activity.models import Chat, ToolActivity
from activity.push import pushes
from activity.wire.frames import runner_frame
from tests import frames
from tests.push.test_broadcast import built_by, new_chat, parse, regions_of

pytestmark = [pytest.mark.django_db(transaction=True)]

LOOKING = "Looking at the failing test."
REASON = "The test expects a comma, so I'll change greet()."
DONE = "Done: the test passes."


def run(chat_id: uuid.UUID, *raw: dict) -> None:
    ingest(chat_id, [runner_frame.validate_python(r) for r in raw])


def in_order(html: str, *needles: str) -> list[int]:
    """Where each needle first stands in ``html`` (each must be there)."""
    places = [html.find(needle) for needle in needles]
    assert -1 not in places, dict(zip(needles, places, strict=True))
    return places


def fresh(chat_id: uuid.UUID) -> str:
    client = Client()
    client.force_login(User.objects.get_or_create(username="root", is_superuser=True)[0])
    return client.get(f"/chats/{chat_id}/").content.decode()


def test_text_calls_and_more_text_arrive_one_push_at_a_time_in_the_order_a_fresh_page_has():
    chat_id = async_to_sync(new_chat)()
    page, shown = parse(fresh(chat_id)), Chat.objects.get(pk=chat_id).version
    steps = [
        [frames.say(2, LOOKING)],
        [frames.tool_call(3, "c1", "Run python3 test_greet.py", kind="execute")],
        [frames.say(4, " " + REASON)],
        [
            frames.tool_call(5, "c2", "Edit greet.py", kind="edit"),
            frames.permission(6, 1, "c2", "Edit greet.py"),
        ],
        [frames.tool_update(7, "c1", status="completed")],
        [frames.outcome(8, 1, "allow-once"), frames.say(9, "\n\n" + DONE)],
        [
            frames.update(
                10,
                {
                    "sessionUpdate": "agent_thought_chunk",
                    "content": {"type": "text", "text": "Maybe the comma."},
                },
            )
        ],
    ]
    for step in steps:
        run(chat_id, *step)
        _, shown = built_by(page, pushes.render_push(chat_id, shown), shown)
        assert regions_of(str(page)) == regions_of(fresh(chat_id))

    c1, c2 = ToolActivity.objects.filter(chat=chat_id).order_by("position")
    turns = regions_of(str(page))["turns"]
    in_order(turns, "Maybe the comma", LOOKING, f'id="tool-{c1.pk}"', "comma, so I")
    first, call, reason, edit, done = in_order(
        turns, LOOKING, f'id="tool-{c1.pk}"', "comma, so I", f'id="tool-{c2.pk}"', DONE
    )
    assert first < call < reason < edit < done
    attempt = c1.attempt_id
    # Each segment's ids say where it starts in the reply: its calls' table and its text.
    assert f'id="tools-{attempt}-{c1.text_offset}"' in turns
    assert f'id="reply-{attempt}-{c2.text_offset}"' in turns
    assert c1.text_offset == len(LOOKING.encode()) < (c2.text_offset or 0)


def test_a_call_that_changes_or_comes_is_pushed_without_the_reply_and_more_text_without_calls():
    chat_id = async_to_sync(new_chat)()
    run(chat_id, frames.say(2, LOOKING), frames.tool_call(3, "c1", "Run the tests"))
    since = Chat.objects.get(pk=chat_id).version

    run(chat_id, frames.tool_update(4, "c1", status="completed"))
    (changed,) = [json.loads(text)["content"] for text in pushes.render_push(chat_id, since)]
    assert "Succeeded" in changed and LOOKING not in changed and "reply-part" not in changed
    since = Chat.objects.get(pk=chat_id).version

    run(chat_id, frames.say(5, " " + REASON))
    (grown,) = [json.loads(text)["content"] for text in pushes.render_push(chat_id, since)]
    assert REASON in grown and '<tr id="tool-' not in grown
    since = Chat.objects.get(pk=chat_id).version

    run(chat_id, frames.tool_call(6, "c2", "Edit greet.py"))
    (new,) = [json.loads(text)["content"] for text in pushes.render_push(chat_id, since)]
    assert new.count('<tr id="tool-') == 1 and REASON not in new and LOOKING not in new


def test_a_burst_of_text_and_big_calls_in_parts_builds_the_page_a_fresh_load_draws(settings):
    settings.PUSH_MAX_BYTES = 6_000
    chat_id = async_to_sync(new_chat)()
    run(chat_id, frames.say(2, LOOKING))
    page, since = parse(fresh(chat_id)), Chat.objects.get(pk=chat_id).version
    burst: list[dict] = []
    for n in range(8):
        out = [{"type": "content", "content": {"type": "text", "text": f"line {n} ä\n" * 150}}]
        burst.append(frames.tool_call(3 + 2 * n, f"c{n}", f"Call {n}", content=out))
        burst.append(frames.say(4 + 2 * n, f" Then step {n}." * (1 + n % 3)))
    run(chat_id, *burst)
    texts = pushes.render_push(chat_id, since)

    assert len(texts) > 2 and all(len(text) <= settings.PUSH_MAX_BYTES for text in texts)
    built, shown = built_by(parse(str(page)), texts, since)
    assert shown == Chat.objects.get(pk=chat_id).version
    assert regions_of(built) == regions_of(fresh(chat_id))
    turns = regions_of(built)["turns"]
    steps = [turns.find(f"Then step {n}.") for n in range(8)]
    calls = [turns.find(f">Call {n}<") for n in range(8)]
    assert calls[0] < steps[0] < calls[1] < steps[1] < calls[7] < steps[7]
    assert len(re.findall(r'class="markdown reply-part"', turns)) == 9
