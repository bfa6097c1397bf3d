"""Ingest: a batch of runner frames → rows, replies, prompts and a new chat version."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import OperationalError, connection
from pydantic import TypeAdapter

from activity.live import boundary, chats, presence
from activity.live.ingest import ingest
from activity.live.work import FrameError
from activity.models import Chat, Prompt, ToolActivity
from activity.wire.frames import runner_frame
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


@pytest.mark.parametrize("calls", [2, 12])
def test_a_batch_updating_many_rows_writes_them_in_one_statement_whatever_their_number(chat, calls):
    from django.test.utils import CaptureQueriesContext

    start(chat)
    opened = [frames.tool_call(2 + n, f"c{n}", f"Run {n}", kind="execute") for n in range(calls)]
    apply(chat, *opened)
    done = [
        frames.tool_update(2 + calls + n, f"c{n}", status="completed", title=f"Ran {n}")
        for n in range(calls)
    ]
    with CaptureQueriesContext(connection) as made:
        apply(chat, *done)
    updates = [q["sql"] for q in made if 'UPDATE "activity_toolactivity"' in q["sql"]]
    assert len(updates) == 1, updates
    rows = ToolActivity.objects.filter(chat=chat).order_by("position")
    assert [(r.agent_label, r.status) for r in rows] == [
        (f"Ran {n}", "completed") for n in range(calls)
    ]
    assert Chat.objects.get(pk=chat.pk).version == rows[0].version


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
    start(chat)
    result = apply(chat, frames.outcome(2, 99, "allow-once"))  # no such request
    assert result.acked == 2
    assert result.errors == [(2, "no request 99 in this chat")]
    assert not Prompt.objects.exists()


def test_a_call_reported_before_any_prompt_is_shown_in_a_turn_of_its_own(chat):
    apply(chat, frames.tool_update(1, "c0", title="Index the project", status="completed"))
    row = ToolActivity.objects.get(chat=chat)
    assert (row.agent_label, row.status, row.opened) == ("Index the project", "completed", False)
    early = row.attempt
    assert early.before_any_prompt and early.ended_at is None
    attempt = uuid.uuid4()
    apply(chat, frames.turn_started(2, attempt, uuid.uuid4()))
    early.refresh_from_db()
    assert early.ended_at is not None  # the first real turn ends it
    assert Chat.objects.get(pk=chat.pk).current_attempt_id == attempt


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


# --- a frame is applied or refused, alone (issue 13) -------------------------------------------

ON_POSTGRES = "postgresql" in connection.settings_dict["ENGINE"]


def notes_of(chat: Chat) -> list[str]:
    """What the page shows in the head of the chat's current turn."""
    attempt = Chat.objects.get(pk=chat.pk).current_attempt
    assert attempt is not None
    return list(attempt.notes)


def test_a_message_the_database_cannot_store_is_refused_alone_and_the_frames_around_it_apply(
    chat,
):
    start(chat)
    result = apply(
        chat,
        frames.tool_call(2, "before", "Read a.py"),
        frames.tool_call(3, "bad\ud800", "A lone surrogate in an id"),  # no database takes it
        frames.tool_call(4, "after", "Read b.py"),
    )
    assert result.acked == 4
    assert [seq for seq, _ in result.errors] == [3]
    assert "could not store" in result.errors[0][1]
    labels = set(ToolActivity.objects.filter(chat=chat).values_list("agent_label", flat=True))
    assert labels == {"Read a.py", "Read b.py"}
    notes = notes_of(chat)
    assert [n for n in notes if "could not be read" in n] == [
        f"A message from the agent could not be read: {result.errors[0][1]}"
    ]


@pytest.mark.skipif(not ON_POSTGRES, reason="SQLite stores NUL and ignores column lengths")
@pytest.mark.parametrize(
    "refused",
    [
        frames.tool_call(3, "nul\x00id", "A NUL in an id"),
        {**frames.turn_ended(3, uuid.UUID(int=0)), "usage": {"model": "nul\x00"}},
    ],
    ids=["NUL in a text column", "NUL in a JSON column"],
)
def test_what_only_postgresql_refuses_is_refused_alone(chat, refused):
    attempt, _ = start(chat)
    if refused["type"] == "turn_ended":
        refused["attempt_id"] = str(attempt)
    result = apply(chat, frames.say(2, "Before."), refused, frames.say(4, " After."))
    assert result.acked == 4 and [seq for seq, _ in result.errors] == [3]
    chat.refresh_from_db()
    assert chat.current_attempt.reply.markdown == "Before. After."


def test_messages_that_cannot_be_read_are_counted_in_one_note_with_the_last_reason(chat, as_viewer):
    start(chat)
    not_a_list = frames.update(2, {"sessionUpdate": "plan", "entries": "nope"})
    no_type = frames.update(3, {"sessionUpdate": ["tool_call"], "toolCallId": "c1"})
    no_id = frames.update(4, {"sessionUpdate": "tool_call", "title": "no id"})
    result = apply(chat, not_a_list, no_type, no_id, frames.say(5, "Still here."))
    assert [seq for seq, _ in result.errors] == [2, 3, 4]
    notes = notes_of(chat)
    assert notes == [
        "3 messages from the agent could not be read; the last: " + result.errors[-1][1]
    ]
    apply(chat, frames.update(6, {"sessionUpdate": "plan", "entries": 5}))
    notes = notes_of(chat)
    assert len(notes) == 1 and notes[0].startswith("4 messages from the agent could not be read")
    page = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    assert "4 messages from the agent could not be read; the last: invalid ACP message" in page


def test_a_session_update_whose_type_is_a_list_or_an_object_is_refused(chat):
    start(chat)
    result = apply(
        chat,
        frames.update(2, {"sessionUpdate": ["tool_call"], "toolCallId": "c1"}),
        frames.update(3, {"sessionUpdate": {"kind": "tool_call"}, "toolCallId": "c1"}),
        frames.tool_call(4, "c2", "Read a.py"),
    )
    assert [seq for seq, _ in result.errors] == [2, 3]
    assert list(ToolActivity.objects.values_list("tool_call_id", flat=True)) == ["c2"]


def test_an_outcome_whose_action_is_no_string_is_refused_and_leaves_the_prompt_open(chat):
    start(chat)
    apply(chat, frames.elicitation(2, 7, frames.CLAUDE_QUESTION))
    wrong = {"type": "prompt_outcome", "seq": 3, "at": 1, "request_id": 7}
    result = apply(chat, {**wrong, "outcome": {"action": ["accept"]}})
    assert [seq for seq, _ in result.errors] == [3]
    assert Prompt.objects.get(chat=chat).is_open


def test_a_request_id_longer_than_its_column_is_refused_and_opens_no_prompt(chat):
    start(chat)
    long_id, longest = frames.permission(2, 7, "c1", "Deploy"), frames.permission(4, 7, "c3", "Go")
    long_id["message"]["id"], longest["message"]["id"] = "r" * 199, "r" * 198
    huge_number = frames.permission(3, 10**250, "c2", "Deploy")
    result = apply(chat, long_id, huge_number, longest)
    assert [seq for seq, _ in result.errors] == [2, 3]
    assert [p.jsonrpc_id for p in Prompt.objects.filter(chat=chat)] == ["r" * 198]


def test_a_batch_that_fails_because_the_database_is_away_raises_and_commits_nothing(
    chat, monkeypatch
):
    def away(*args: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(chats, "write", away)
    with pytest.raises(OperationalError):
        apply(chat, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    assert Chat.objects.get(pk=chat.pk).last_seq == 0


def send(chat: Chat, *raw: dict):
    """Frames as the pipeline applies them: through the boundary (which masks), then ingest."""
    return ingest(
        chat.pk, [runner_frame.validate_python(boundary.load(json.dumps(r))) for r in raw]
    )


KEY = "sk-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8"


def test_a_secret_split_across_two_reply_chunks_is_masked_in_the_reply_and_thoughts(chat):
    start(chat)
    thought = {"sessionUpdate": "agent_thought_chunk"}
    send(
        chat,
        frames.say(2, f"Using {KEY[:12]}"),
        frames.update(3, thought | {"content": {"type": "text", "text": KEY[:20]}}),
    )
    send(
        chat,
        frames.say(4, f"{KEY[12:]} now."),
        frames.update(5, thought | {"content": {"type": "text", "text": KEY[20:]}}),
    )
    turn = Chat.objects.get(pk=chat.pk).current_attempt
    assert turn is not None
    reply = turn.reply
    assert reply.markdown == "Using sk-proj-" + "*" * 24 + " now."
    assert reply.thoughts == "sk-proj-" + "*" * 24


def test_a_call_after_a_masked_secret_is_placed_at_the_stored_replys_byte_length(chat):
    start(chat)
    send(chat, frames.say(2, f"Voilà {KEY[:10]}"), frames.say(3, f"{KEY[10:]} — then: "))
    send(chat, frames.tool_call(4, "c1", "Read a.py", kind="read"))
    turn = Chat.objects.get(pk=chat.pk).current_attempt
    assert turn is not None
    reply = turn.reply
    assert KEY[10:] not in reply.markdown
    row = ToolActivity.objects.get(chat=chat)
    assert row.text_offset == len(reply.markdown.encode())
