"""Answering from the web: the first answer wins, is recorded, and reaches the runner."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connections

from activity.core.refusals import Refusal
from activity.live import answers, presence
from activity.models import Chat, Prompt, ToolActivity
from tests import frames
from tests.factories import apply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asking(acme) -> Prompt:
    """A running turn whose agent asks permission to run a command."""
    change, _ = presence.connect(acme.pk, uuid.uuid4(), "runner")
    attempt = uuid.uuid4()
    apply(
        change.chat_id,
        frames.turn_started(1, attempt, uuid.uuid4()),
        frames.tool_call(
            2, "c1", "rm -rf build", kind="delete", rawInput={"command": "rm -rf build"}
        ),
        frames.permission(3, 7, "c1", "rm -rf build"),
    )
    return Prompt.objects.get(chat_id=change.chat_id)


def test_an_approvers_answer_is_recorded_and_shown_on_the_row(as_approver, asking):
    from activity.push.pushes import render_changes

    before = Chat.objects.get(pk=asking.chat_id).version
    response = as_approver.post(
        f"/prompts/{asking.pk}/answer", {"choice": "allow-once"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    asking.refresh_from_db()
    assert asking.answered_by.username == "alice" and asking.decision == "Allowed once"
    assert asking.answer == {"outcome": "selected", "optionId": "allow-once"}
    assert asking.answered_from.startswith("127.0.0.1")
    page = as_approver.get(f"/chats/{asking.chat_id}/").content.decode()
    assert "Allowed once by alice" in page and 'name="choice"' not in page
    pushed, _ = render_changes(asking.chat_id, before)  # what every other viewer is sent
    assert "Allowed once by alice" in pushed


def test_a_viewer_may_watch_but_not_answer(as_viewer, asking):
    response = as_viewer.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    assert response.status_code == 403 and "approver" in response.content.decode()
    asking.refresh_from_db()
    assert asking.answered_at is None


def test_someone_outside_the_workspace_cannot_even_find_the_prompt(as_outsider, asking):
    response = as_outsider.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    assert response.status_code == 404


def test_a_later_answer_is_told_who_answered_first_and_changes_nothing(
    as_approver, as_admin, asking
):
    as_approver.post(f"/prompts/{asking.pk}/answer", {"choice": "reject"})
    late = as_admin.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    assert late.status_code == 409 and "Already answered by alice at" in late.content.decode()
    asking.refresh_from_db()
    assert asking.decision == "Rejected" and asking.answered_by.username == "alice"


def test_an_option_that_was_not_offered_is_refused(as_approver, asking):
    response = as_approver.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-everything"})
    assert response.status_code == 400
    asking.refresh_from_db()
    assert asking.answered_at is None


def test_twenty_concurrent_answers_record_exactly_one(asking):
    users = [User.objects.create_user(f"u{n}") for n in range(20)]
    outcomes: list[str] = []
    start = threading.Barrier(20)

    def answer(user: User) -> None:
        start.wait()
        try:
            answers.record(asking.pk, user, "Allowed once", {"outcome": "selected"}, "test")
            outcomes.append("won")
        except Refusal as refusal:
            outcomes.append(str(refusal))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=answer, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("won") == 1
    assert all(o.startswith("Already answered by") for o in outcomes if o != "won")
    asking.refresh_from_db()
    assert asking.answered_by in users


def test_a_prompt_closed_by_the_end_of_its_turn_can_no_longer_be_answered(as_approver, asking):
    attempt = asking.attempt_id
    apply(asking.chat_id, frames.turn_ended(4, attempt, "cancelled"))
    response = as_approver.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    assert response.status_code == 409 and "closed" in response.content.decode()
    assert ToolActivity.objects.get(chat_id=asking.chat_id).approval == "cancelled"


def test_a_question_takes_an_option_or_free_text_in_its_other_box(as_approver, asking):
    apply(asking.chat_id, frames.elicitation(4, 8, frames.CLAUDE_QUESTION))
    prompt = Prompt.objects.get(chat_id=asking.chat_id, kind="question")
    assert prompt.questions[0]["allow_other"] and prompt.questions[0]["header"] == "Database"
    as_approver.post(
        f"/prompts/{prompt.pk}/answer",
        {"action": "accept", "question_0_other": "DuckDB, embedded"},
    )
    prompt.refresh_from_db()
    assert prompt.answer == {
        "action": "accept",
        "content": {"question_0_custom": "DuckDB, embedded"},
    }
    assert prompt.decision == "Answered: DuckDB, embedded"


def test_a_question_refuses_a_label_it_did_not_offer(as_approver, asking):
    apply(asking.chat_id, frames.elicitation(4, 8, frames.CLAUDE_QUESTION))
    prompt = Prompt.objects.get(chat_id=asking.chat_id, kind="question")
    response = as_approver.post(f"/prompts/{prompt.pk}/answer", {"question_0": "Oracle"})
    assert response.status_code == 400


def test_a_list_valued_question_takes_several_options(as_approver, asking):
    schema = {
        "langs": {
            "type": "array",
            "title": "Languages",
            "items": {"anyOf": [{"const": "Python"}, {"const": "Rust"}, {"const": "Go"}]},
        }
    }
    apply(asking.chat_id, frames.elicitation(4, 8, schema))
    prompt = Prompt.objects.get(chat_id=asking.chat_id, kind="question")
    assert prompt.questions[0]["multi_select"]
    as_approver.post(f"/prompts/{prompt.pk}/answer", {"langs": ["Python", "Go"]})
    prompt.refresh_from_db()
    assert prompt.answer == {"action": "accept", "content": {"langs": ["Python", "Go"]}}


def test_a_secret_answer_is_never_stored_and_is_refused_while_the_runner_is_offline(
    as_approver, acme, asking
):
    secret = {"token": {"type": "string", "title": "Deploy token", "secret": True}}
    apply(asking.chat_id, frames.elicitation(4, 9, secret))
    prompt = Prompt.objects.get(chat_id=asking.chat_id, kind="question")
    assert prompt.secret and prompt.questions[0]["secret"]
    page = as_approver.get(f"/chats/{asking.chat_id}/").content.decode()
    assert 'type="password" name="token_other"' in page

    presence.disconnect(asking.chat_id, "runner")
    offline = as_approver.post(f"/prompts/{prompt.pk}/answer", {"token_other": "hunter2"})
    assert offline.status_code == 409 and "offline" in offline.content.decode()

    presence.connect(acme.pk, asking.chat_id, "runner-again")
    online = as_approver.post(f"/prompts/{prompt.pk}/answer", {"token_other": "hunter2"})
    assert online.status_code == 302
    prompt.refresh_from_db()
    assert prompt.answered_at is not None and prompt.answer is None
    assert "hunter2" not in str(Prompt.objects.filter(pk=prompt.pk).values().get())


def test_the_inbox_lists_what_the_user_may_answer_oldest_first(as_approver, as_viewer, asking):
    apply(asking.chat_id, frames.permission(4, 10, "c2", "Deploy to staging"))
    page = as_approver.get("/inbox/").content.decode()
    assert "<title>(2) Inbox" in page
    assert page.index("rm -rf build") < page.index("Deploy to staging")
    assert f"#tool-{asking.tool_id}" in page
    assert "Nothing is waiting" in as_viewer.get("/inbox/").content.decode()


def test_an_answered_prompt_leaves_the_inbox(as_approver, asking):
    as_approver.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    assert "Nothing is waiting" in as_approver.get("/inbox/").content.decode()


def test_pending_answers_wait_for_a_runner_that_is_away(as_approver, asking):
    presence.disconnect(asking.chat_id, "runner")
    as_approver.post(f"/prompts/{asking.pk}/answer", {"choice": "allow-once"})
    waiting, _ = answers.pending(asking.chat_id)
    assert [(a.request_id, a.outcome) for a in waiting] == [
        (7, {"outcome": "selected", "optionId": "allow-once"})
    ]
    assert Chat.objects.get(pk=asking.chat_id).runner_connected is False
