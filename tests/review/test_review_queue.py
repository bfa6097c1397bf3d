"""The review queue (issue 30; docs/architecture.md#the-review-queue): a run's approvers and
admins assign its review to its approvers and admins (viewers 403, other workspaces 404, CSRF,
at most 20); ``/reviews/`` lists what is assigned to a person, what nobody is assigned to and
each member's progress, in a fixed number of queries; an assignment waits in the inbox and is
owed to its person's browsers like a mention; the exports say who is assigned."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from activity.live import presence
from activity.models import (
    Chat,
    Notice,
    NotifyPrefs,
    PushDevice,
    ReviewAssignment,
    Role,
    RunReview,
    Workspace,
)
from activity.notify import queue as notify_queue
from activity.push import inbox as needs
from activity.review import queue
from tests import frames
from tests.members import logged_in, member

pytestmark = pytest.mark.django_db


def chat_in(workspace: Workspace, title: str) -> Chat:
    chat_id = uuid.uuid4()
    presence.claim(workspace.pk, chat_id, "specific.test!r", 0, frames.secret_of(chat_id))
    Chat.objects.filter(pk=chat_id).update(title=title)
    return Chat.objects.get(pk=chat_id)


def assign(client: Client, chat: Chat, user: User | str) -> Any:
    who = user.pk if isinstance(user, User) else user
    return client.post(f"/chats/{chat.pk}/review/assign", {"user": who})


def unassign(client: Client, chat: Chat, user: User) -> Any:
    return client.post(f"/chats/{chat.pk}/review/unassign", {"user": user.pk})


def give(client: Client, chat: Chat, outcome: str = "good") -> int:
    return int(client.post(f"/chats/{chat.pk}/review", {"outcome": outcome}).status_code)


def page(client: Client, path: str) -> str:
    answer = client.get(path)
    assert answer.status_code == 200
    return str(answer.content.decode())


def section(html: str, heading_id: str) -> str:
    """The queue page's part under the heading ``heading_id``, up to the next part."""
    start = html.index(f'id="{heading_id}"')
    end = html.find("<section", start)
    return html[start : end if end != -1 else len(html)]


# --- assigning --------------------------------------------------------------------------------


def test_assigning_a_run_asks_for_its_review_and_shows_who_is_asked_on_its_page(
    acme, as_admin, acme_admin, acme_approver
):
    chat = chat_in(acme, "Tidy the parser")
    answer = assign(as_admin, chat, acme_approver)
    assert answer.status_code == 302 and answer["Location"].startswith(f"/chats/{chat.pk}/")
    review = RunReview.objects.get(chat=chat)
    assert review.requested_by == acme_admin and not review.done
    (assigned,) = ReviewAssignment.objects.all()
    assert (assigned.user, assigned.assigned_by) == (acme_approver, acme_admin)
    shown = page(as_admin, f"/chats/{chat.pk}/")
    assert "Needs review" in shown and "Assigned to" in shown and "Unassign alice" in shown
    assert assign(as_admin, chat, acme_approver).status_code == 302  # again: still one
    assert ReviewAssignment.objects.count() == 1
    assert unassign(as_admin, chat, acme_approver).status_code == 302
    assert not ReviewAssignment.objects.exists()
    assert "Unassign alice" not in page(as_admin, f"/chats/{chat.pk}/")
    assert RunReview.objects.filter(chat=chat, reviewed_at__isnull=True).exists()  # still asked


def test_who_may_assign_a_runs_review(
    acme, as_viewer, as_outsider, as_approver, acme_approver, acme_admin
):
    chat = chat_in(acme, "Tidy")
    assert assign(as_viewer, chat, acme_approver).status_code == 403
    assert assign(as_outsider, chat, acme_approver).status_code == 404
    anonymous = assign(Client(), chat, acme_approver)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(acme_admin)
    assert assign(csrf, chat, acme_approver).status_code == 403
    assert not RunReview.objects.exists() and not ReviewAssignment.objects.exists()
    assert assign(as_approver, chat, acme_admin).status_code == 302  # an approver may
    assert unassign(as_viewer, chat, acme_admin).status_code == 403
    assert unassign(as_outsider, chat, acme_admin).status_code == 404
    assert ReviewAssignment.objects.filter(user=acme_admin).exists()


def test_only_the_runs_approvers_and_admins_may_be_assigned_its_review(
    acme, as_admin, acme_viewer, outsider
):
    chat = chat_in(acme, "Tidy")
    for nobody in (acme_viewer, outsider, "999999", "bob"):
        refused = assign(as_admin, chat, nobody)
        assert refused.status_code == 400
        assert "approvers and admins" in refused.content.decode() or "Choose" in (
            refused.content.decode()
        )
    assert not RunReview.objects.exists() and not ReviewAssignment.objects.exists()


def test_a_runs_review_is_assigned_to_at_most_twenty_people(acme, as_admin):
    chat = chat_in(acme, "Tidy")
    people = [member(acme, f"approver{n}", Role.APPROVER) for n in range(queue.MAX_ASSIGNEES + 1)]
    for person in people[:-1]:
        assert assign(as_admin, chat, person).status_code == 302
    refused = assign(as_admin, chat, people[-1])
    assert refused.status_code == 400 and "at most 20" in refused.content.decode()
    assert ReviewAssignment.objects.count() == queue.MAX_ASSIGNEES
    assert "as many people as a run may be" in page(as_admin, f"/chats/{chat.pk}/")


# --- the queue page ---------------------------------------------------------------------------


def test_the_queue_page_shows_each_person_their_runs_the_unassigned_and_progress(
    acme, globex, as_admin, as_approver, as_viewer, as_outsider, acme_approver, outsider
):
    mine, nobodys, done = (chat_in(acme, t) for t in ("Mine to review", "Nobodys", "Done one"))
    elsewhere = chat_in(globex, "Globex run")
    assign(as_admin, mine, acme_approver)
    assign(as_admin, done, acme_approver)
    as_admin.post(f"/chats/{nobodys.pk}/review", {"action": "request"})
    logged_in(outsider).post(f"/chats/{elsewhere.pk}/review", {"action": "request"})
    assert give(as_admin, done) == 302

    alices = page(as_approver, "/reviews/")
    assert "Mine to review" in section(alices, "queue-mine")
    assert "Done one" not in alices  # reviewed: it left the queue
    assert "Nobodys" in section(alices, "queue-unassigned")
    assert "Globex run" not in alices
    progress = section(alices, "queue-progress")
    assert "alice" in progress and '<td class="n">1</td><td class="n">1</td>' in progress
    bobs = page(as_viewer, "/reviews/")  # a viewer reviews nothing, but sees the progress
    assert "No open review is assigned to you." in bobs
    assert "Every open review is assigned to someone." in bobs
    assert "alice" in section(bobs, "queue-progress")
    charlies = page(as_outsider, "/reviews/")
    assert "Globex run" in section(charlies, "queue-unassigned")
    assert "Mine to review" not in charlies and "Nobodys" not in charlies
    assert "alice" not in section(charlies, "queue-progress")
    assert Client().get("/reviews/").status_code == 302  # log in first


def test_the_queue_page_reads_the_database_as_often_for_many_runs_as_for_one(
    acme, as_admin, acme_approver, acme_admin
):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            page(as_approver, "/reviews/")
        return len(captured.captured_queries)

    as_approver = logged_in(acme_approver)
    assign(as_admin, chat_in(acme, "First"), acme_approver)
    as_admin.post(f"/chats/{chat_in(acme, 'Open').pk}/review", {"action": "request"})
    one = queries()
    for n in range(5):
        assign(as_admin, chat_in(acme, f"Run {n}"), acme_approver)
        assign(as_admin, chat_in(acme, f"Other {n}"), acme_admin)
        as_admin.post(f"/chats/{chat_in(acme, f'Open {n}').pk}/review", {"action": "request"})
    assert queries() == one


def test_each_part_of_the_queue_says_when_it_shows_only_the_first(
    acme, as_admin, acme_approver, monkeypatch
):
    monkeypatch.setattr(queue, "LISTED", 2)
    for n in range(3):
        assign(as_admin, chat_in(acme, f"Run {n}"), acme_approver)
    shown = page(logged_in(acme_approver), "/reviews/")
    assert "The 2 asked of you first; more are waiting." in shown
    assert "Run 0" in shown and "Run 1" in shown and "Run 2" not in shown


# --- the inbox --------------------------------------------------------------------------------


def waiting_for(user: User) -> dict[str, Any]:
    return needs.counts(user)


def test_an_assignment_waits_in_the_inbox_until_the_run_is_opened_from_it(
    acme, as_admin, acme_approver
):
    chat = chat_in(acme, "Tidy the parser")
    assign(as_admin, chat, acme_approver)
    alice = logged_in(acme_approver)
    inbox = page(alice, "/inbox/")
    assert "asked you to review" in inbox and "Tidy the parser" in inbox
    assert waiting_for(acme_approver)["reviews"] == 1
    assert 'data-reviews="1"' in inbox  # the header's count
    assignment = ReviewAssignment.objects.get()
    elsewhere = alice.get(
        f"/reviews/assignments/{assignment.pk}/", HTTP_SEC_FETCH_SITE="cross-site"
    )
    assert elsewhere.status_code == 302 and waiting_for(acme_approver)["reviews"] == 1
    opened = alice.get(f"/reviews/assignments/{assignment.pk}/", HTTP_SEC_FETCH_SITE="same-origin")
    assert opened.status_code == 302 and opened["Location"].startswith(f"/chats/{chat.pk}/")
    assert "Tidy the parser" not in page(alice, "/inbox/")
    assert waiting_for(acme_approver)["reviews"] == 0
    assert "Tidy the parser" in page(alice, "/reviews/")  # still theirs to review
    assert as_admin.get(f"/reviews/assignments/{assignment.pk}/").status_code == 404


def test_an_assignment_leaves_the_inbox_when_the_run_is_reviewed_and_returns_when_asked_again(
    acme, as_admin, acme_approver
):
    chat = chat_in(acme, "Tidy the parser")
    assign(as_admin, chat, acme_approver)
    alice = logged_in(acme_approver)
    assert give(alice, chat, "needs_changes") == 302
    assert "Tidy the parser" not in page(alice, "/inbox/")
    assert "Tidy the parser" not in section(page(alice, "/reviews/"), "queue-mine")
    assert ReviewAssignment.objects.filter(user=acme_approver).exists()  # kept: progress
    as_admin.post(f"/chats/{chat.pk}/review", {"action": "request"})
    assert "Tidy the parser" in page(alice, "/inbox/")
    assert ReviewAssignment.objects.get().notified_at is None  # told again


def test_assigning_oneself_is_listed_but_not_in_the_inbox(acme, as_approver, acme_approver):
    chat = chat_in(acme, "Mine")
    assert assign(as_approver, chat, acme_approver).status_code == 302
    assert "Mine" in section(page(as_approver, "/reviews/"), "queue-mine")
    assert "Mine" not in page(as_approver, "/inbox/")
    assert waiting_for(acme_approver)["reviews"] == 0


# --- notifications ----------------------------------------------------------------------------


def device_of(user: User) -> PushDevice:
    return PushDevice.objects.create(
        user=user, name="Firefox", endpoint=f"https://push.test/{user.pk}", p256dh="k", auth="a"
    )


def test_the_assignee_is_owed_a_notice_on_each_browser_and_the_self_assigned_is_not(
    acme, as_admin, acme_admin, acme_approver, settings
):
    settings.NOTIFY_DELAY_SECONDS = 0
    alices, carols = device_of(acme_approver), device_of(acme_admin)
    chat = chat_in(acme, "Tidy the parser")
    assign(as_admin, chat, acme_approver)
    assign(as_admin, chat, acme_admin)  # carol assigns herself: not told
    assert notify_queue.owe() == 1 and notify_queue.owe() == 0
    (notice,) = Notice.objects.all()
    assert notice.device == alices
    assert notice.payload["title"] == "carol asked you to review Tidy the parser"
    assert notice.payload["url"] == f"/chats/{chat.pk}/"
    assert not Notice.objects.filter(device=carols).exists()


def test_an_assignee_who_wants_no_mentions_or_is_in_quiet_hours_is_not_told(
    acme, as_admin, acme_approver, settings
):
    settings.NOTIFY_DELAY_SECONDS = 0
    device_of(acme_approver)
    NotifyPrefs.objects.create(user=acme_approver, mentions=False)
    assign(as_admin, chat_in(acme, "Tidy"), acme_approver)
    assert notify_queue.owe() == 0 and not Notice.objects.exists()
    assert ReviewAssignment.objects.get().notified_at is not None  # claimed: never told later


def test_asking_for_the_review_again_tells_the_assignee_again(
    acme, as_admin, acme_approver, settings
):
    settings.NOTIFY_DELAY_SECONDS = 0
    device_of(acme_approver)
    chat = chat_in(acme, "Tidy")
    assign(as_admin, chat, acme_approver)
    assert notify_queue.owe() == 1
    assert give(as_admin, chat) == 302
    as_admin.post(f"/chats/{chat.pk}/review", {"action": "request"})
    assert notify_queue.owe() == 1 and Notice.objects.count() == 2


# --- exports ----------------------------------------------------------------------------------


def test_the_exports_say_the_review_and_who_is_assigned_to_it(
    acme, as_admin, acme_approver, acme_admin
):
    chat = chat_in(acme, "Tidy")
    assign(as_admin, chat, acme_approver)
    transcript = page(as_admin, f"/chats/{chat.pk}/transcript.md")
    assert "Review: needed" in transcript and "Assigned to: alice" in transcript
    as_admin.post(f"/chats/{chat.pk}/review", {"outcome": "bad", "note": "Wrong file."})
    transcript = page(as_admin, f"/chats/{chat.pk}/transcript.md")
    assert "Review: bad, by carol" in transcript and "Wrong file." in transcript
    assert "Assigned to: alice" in transcript

    bare = as_admin.get(f"/api/chats/{chat.pk}/tool-activity")
    assert json.loads(b"".join(bare.streaming_content)) == []  # the contract: a list of rows
    both = as_admin.get(f"/api/chats/{chat.pk}/tool-activity?with=review")
    said = json.loads(b"".join(both.streaming_content))
    assert said["rows"] == []
    review = said["review"]
    assert (review["state"], review["outcome"], review["note"]) == (
        "reviewed",
        "bad",
        "Wrong file.",
    )
    assert review["requested_by"] == "carol" and review["reviewed_by"] == "carol"
    assert review["reviewed_at"] and review["requested_at"]
    (assigned,) = review["assignees"]
    assert assigned["username"] == "alice" and assigned["assigned_by"] == "carol"
    other = chat_in(acme, "Not reviewed")
    none = as_admin.get(f"/api/chats/{other.pk}/tool-activity?with=review")
    assert json.loads(b"".join(none.streaming_content)) == {"review": None, "rows": []}
