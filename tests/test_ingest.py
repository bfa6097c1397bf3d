"""Ingest: a batch of runner frames → rows, replies, prompts and a new chat version."""

from __future__ import annotations

import uuid

import pytest
from pydantic import TypeAdapter

from activity import presence
from activity.frames import runner_frame
from activity.models import Chat, Prompt, ToolActivity
from activity.work import FrameError
from tests import factories, frames

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(acme) -> Chat:
    return factories.run(acme, channel="runner-channel")


def apply(chat: Chat, *raw: dict):
    return factories.apply(chat.pk, *raw)


def start(chat: Chat) -> tuple[uuid.UUID, uuid.UUID]:
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    apply(chat, frames.turn_started(1, attempt, reply))
    return attempt, reply


def test_a_turn_start_makes_the_turn_and_its_reply_and_titles_the_chat(chat):
    attempt, reply = start(chat)
    chat.refresh_from_db()
    assert chat.current_attempt_id == attempt
    assert chat.current_attempt.reply.pk == reply
    assert chat.title == "Fix the flaky test" and chat.agent_name == "demo-agent"


def test_a_burst_of_updates_to_one_row_is_one_row_under_one_new_version(chat):
    start(chat)
    before = Chat.objects.get(pk=chat.pk).version
    burst = [frames.tool_call(2, "c1", "Run tests", kind="execute", status="pending")]
    burst += [frames.tool_update(n, "c1", title=f"step {n}") for n in range(3, 53)]
    burst.append(frames.tool_update(53, "c1", status="completed"))
    result = apply(chat, *burst)
    assert (result.change.since, result.change.version) == (before, before + 1)
    row = ToolActivity.objects.get(chat=chat)
    assert row.agent_label == "step 52" and row.status == "completed"
    assert row.version == row.created_version == before + 1


def test_agent_text_streams_into_the_reply_and_a_new_message_id_starts_a_paragraph(chat):
    _, reply = start(chat)
    apply(
        chat,
        frames.say(2, "Hello, "),
        frames.say(3, "world."),
        frames.say(4, "Second message.", message_id="msg_2"),
    )
    chat.refresh_from_db()
    assert chat.current_attempt.reply.markdown == "Hello, world.\n\nSecond message."


def test_a_tool_call_remembers_how_much_of_the_reply_came_before_it_in_bytes(chat):
    start(chat)
    apply(chat, frames.say(2, "Voilà: "), frames.tool_call(3, "c1", "Read a.py", kind="read"))
    assert ToolActivity.objects.get(chat=chat).text_offset == len("Voilà: ".encode())


def test_a_frame_already_applied_is_ignored(chat):
    start(chat)
    apply(chat, frames.tool_call(2, "c1", "Read a.py"))
    result = apply(chat, frames.tool_call(2, "c1", "Something else"))
    assert result.acked == 2 and not result.change.changed
    assert ToolActivity.objects.get(chat=chat).agent_label == "Read a.py"


def test_a_frame_that_cannot_be_applied_is_reported_skipped_and_changes_nothing(chat):
    result = apply(chat, frames.tool_call(1, "c1", "Read a.py"))  # no turn has started
    assert result.acked == 1
    assert result.errors == [(1, "no turn has started in this chat yet")]
    assert not ToolActivity.objects.exists()


def test_frames_that_skip_a_seq_are_refused_as_lost(chat):
    with pytest.raises(FrameError, match="lost"):
        apply(chat, frames.turn_started(2, uuid.uuid4(), uuid.uuid4()))
    assert Chat.objects.get(pk=chat.pk).last_seq == 0


def test_a_permission_request_opens_a_prompt_on_its_row_and_the_outcome_closes_it(chat):
    start(chat)
    apply(chat, frames.tool_call(2, "c1", "rm -rf build", kind="delete"))
    apply(chat, frames.permission(3, 7, "c1", "rm -rf build"))
    prompt = Prompt.objects.get(chat=chat)
    assert prompt.is_open and [c["id"] for c in prompt.choices] == ["allow-once", "reject"]
    assert ToolActivity.objects.get(chat=chat).approval == "pending"

    apply(chat, frames.outcome(4, 7, "reject"))
    prompt.refresh_from_db()
    row = ToolActivity.objects.get(chat=chat)
    assert prompt.outcome == "denied" and not prompt.is_open
    assert row.approval == "denied"


def test_an_outcome_naming_an_option_never_offered_is_refused(chat):
    start(chat)
    apply(chat, frames.permission(2, 7, "c1", "rm -rf build"))
    result = apply(chat, frames.outcome(3, 7, "approve-everything"))
    assert result.errors and "not offered" in result.errors[0][1]
    assert Prompt.objects.get(chat=chat).is_open


def test_a_cancelled_turn_cancels_its_unfinished_rows_and_closes_its_prompts(chat):
    attempt, _ = start(chat)
    apply(
        chat,
        frames.tool_call(2, "done", "Read a.py", status="completed"),
        frames.tool_call(3, "open", "Run tests", status="in_progress"),
        frames.permission(4, 9, "open", "Run tests"),
        frames.turn_ended(5, attempt, "cancelled"),
    )
    rows = {r.tool_call_id: r for r in ToolActivity.objects.filter(chat=chat)}
    assert rows["done"].status == "completed"
    assert rows["open"].status == "cancelled" and rows["open"].error_code == "cancelled"
    assert rows["open"].approval == "cancelled"
    assert not Prompt.objects.filter(closed_at__isnull=True).exists()


def test_an_update_after_the_turn_ended_lands_on_the_same_row(chat):
    attempt, _ = start(chat)
    apply(chat, frames.tool_call(2, "c1", "Build", status="in_progress"))
    apply(chat, frames.turn_ended(3, attempt), frames.tool_update(4, "c1", status="completed"))
    assert ToolActivity.objects.get(chat=chat).status == "completed"


def test_a_runner_gone_past_its_grace_period_ends_its_turn_and_closes_its_prompts(chat, settings):
    settings.RUNNER_GRACE_SECONDS = 60
    start(chat)
    apply(chat, frames.permission(2, 3, "c1", "Deploy"))
    presence.disconnect(chat.pk, "runner-channel")
    left_at = Chat.objects.get(pk=chat.pk).runner_left_at
    assert left_at is not None
    left = left_at.timestamp()
    assert presence.sweep(now=left + 30) == []  # still within its grace
    assert len(presence.sweep(now=left + 61)) == 1
    chat.refresh_from_db()
    assert chat.current_attempt.stop_reason == "runner_lost"
    assert ToolActivity.objects.get(chat=chat).approval == "cancelled"
    assert not Prompt.objects.filter(closed_at__isnull=True).exists()


def test_only_the_latest_runner_socket_decides_presence(chat):
    presence.connect(chat.workspace_id, chat.pk, "second-socket")
    old_one_goes = presence.disconnect(chat.pk, "runner-channel")
    assert old_one_goes is not None and not old_one_goes.changed  # it changes nothing
    assert Chat.objects.get(pk=chat.pk).runner_connected


def test_runner_frames_are_strict_about_ids_and_numbers():
    adapter: TypeAdapter = runner_frame
    with pytest.raises(ValueError):
        adapter.validate_python({"type": "acp", "seq": "1", "at": 0, "message": {}})
    with pytest.raises(ValueError):
        adapter.validate_python(
            frames.turn_started(1, uuid.UUID(int=1), uuid.uuid4())  # not a UUID v4
        )


def test_the_runners_cancel_cancels_unfinished_calls_before_the_agent_reports_them(chat):
    attempt, _ = start(chat)
    cancel = frames.acp(
        3, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    )
    apply(
        chat,
        frames.tool_call(2, "slow", "Wait 30 s", status="in_progress"),
        cancel,
        frames.tool_update(4, "slow", status="failed"),  # the agent's own report comes after
        frames.turn_ended(5, attempt, "cancelled"),
    )
    row = ToolActivity.objects.get(chat=chat)
    assert (row.status, row.error_code) == ("cancelled", "cancelled")  # whatever the agent says


def test_a_runner_whose_server_died_is_marked_gone_once_silent_and_its_turn_then_ends(
    chat, settings
):
    settings.RUNNER_GRACE_SECONDS = 60
    start(chat)
    seen = Chat.objects.get(pk=chat.pk).runner_seen_at
    assert seen is not None  # no disconnect ever comes: the server died with the socket
    silence = presence.grace_silence()
    assert presence.sweep(now=seen.timestamp() + silence - 1) == []
    presence.sweep(now=seen.timestamp() + silence + 1)
    chat.refresh_from_db()
    assert not chat.runner_connected and chat.runner_left_at == seen  # gone since it fell silent
    assert chat.current_attempt.stop_reason == "runner_lost"  # and that was a grace period ago


def test_a_heartbeat_keeps_a_quiet_runner_connected(chat, settings):
    settings.RUNNER_GRACE_SECONDS = 60
    before = Chat.objects.get(pk=chat.pk).runner_seen_at
    assert before is not None
    presence.alive(chat.pk, "runner-channel")
    after = Chat.objects.get(pk=chat.pk).runner_seen_at
    assert after is not None and after >= before
    assert presence.sweep(now=after.timestamp() + presence.grace_silence() - 1) == []
    assert Chat.objects.get(pk=chat.pk).runner_connected
