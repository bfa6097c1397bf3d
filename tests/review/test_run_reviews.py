"""A run's review (issue 30): asked for and given by approvers and admins (viewers 403, other
workspaces 404, CSRF), an outcome and a note; the runs list filters by it; the transcript says
it."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from activity.live import presence
from activity.models import Chat, RunReview, Workspace
from tests import frames

pytestmark = pytest.mark.django_db


def chat_in(workspace: Workspace, title: str) -> Chat:
    chat_id = uuid.uuid4()
    presence.claim(workspace.pk, chat_id, "specific.test!r", 0, frames.secret_of(chat_id))
    Chat.objects.filter(pk=chat_id).update(title=title)
    return Chat.objects.get(pk=chat_id)


def review(client: Client, chat: Chat, **fields: str) -> int:
    return int(client.post(f"/chats/{chat.pk}/review", fields).status_code)


def listed(client: Client, state: str) -> str:
    return str(client.get(f"/?review={state}").content.decode())


def test_a_run_is_asked_for_a_review_then_reviewed_and_the_runs_list_filters_by_it(
    acme, as_approver, acme_approver
):
    first, second = chat_in(acme, "Tidy the parser"), chat_in(acme, "Fix the flaky test")
    assert review(as_approver, first, action="request") == 302
    assert "Tidy the parser" in listed(as_approver, "needed")
    assert "Fix the flaky test" not in listed(as_approver, "needed")
    assert "Needs review" in as_approver.get(f"/chats/{first.pk}/").content.decode()
    assert review(as_approver, first, outcome="needs_changes", note="Tests missing.") == 302
    done = RunReview.objects.get(chat=first)
    assert (done.outcome, done.note, done.reviewed_by) == (
        "needs_changes",
        "Tests missing.",
        acme_approver,
    )
    assert "Tidy the parser" not in listed(as_approver, "needed")
    assert "Tidy the parser" in listed(as_approver, "needs_changes")
    assert "Tidy the parser" not in listed(as_approver, "good")
    page = as_approver.get(f"/chats/{first.pk}/").content.decode()
    assert "Reviewed: needs changes" in page and "Tests missing." in page
    transcript = as_approver.get(f"/chats/{first.pk}/transcript.md").content.decode()
    assert "Review: needs changes, by alice" in transcript and "Tests missing." in transcript
    assert review(as_approver, second, outcome="good") == 302  # without being asked
    assert "Fix the flaky test" in listed(as_approver, "reviewed")


def test_who_may_review_a_run(acme, as_viewer, as_outsider, as_admin, acme_approver):
    chat = chat_in(acme, "Tidy")
    assert review(as_viewer, chat, action="request") == 403
    assert review(as_viewer, chat, outcome="good") == 403
    assert review(as_outsider, chat, outcome="good") == 404
    assert review(Client(), chat, outcome="good") == 302  # to the login page
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(acme_approver)
    assert review(csrf, chat, outcome="good") == 403
    assert not RunReview.objects.exists()
    assert review(as_admin, chat, outcome="great") == 400
    assert review(as_admin, chat, outcome="bad", note="x" * 4001) == 400
    assert not RunReview.objects.exists()
    assert review(as_admin, chat, outcome="bad", note="Wrong file.") == 302
