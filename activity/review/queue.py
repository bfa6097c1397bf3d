"""The review queue (issue 30; docs/architecture.md#the-review-queue): an approver or admin of a
run's workspace assigns its review to members who may give it (its approvers and admins), which
asks for the review if none is open. An assignment of an open review waits in its person's
inbox until they open the run from there or the review is given; the queue page (``/reviews/``)
lists what is assigned to the person, the open reviews nobody is assigned to where they may
review, and each member's progress. Every list is a bounded query or two, whatever its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from activity.core.refusals import Refusal
from activity.models import Chat, ReviewAssignment, RunReview
from activity.people import access
from activity.review import mentions, reviews

MAX_ASSIGNEES = 20  # a run's review is asked of at most this many people
LISTED = 100  # the most each part of the queue page lists
INBOX_ASSIGNMENTS = 50  # the most an inbox lists
PROGRESS_DAYS = 30  # "reviewed" counts the reviews given in this many days


def assignable(chat: Chat) -> QuerySet[User]:
    """Who may be assigned the run's review: its workspace's approvers and admins (those who
    may give it, ``reviews.allowed``), active, by name."""
    members = Q(
        memberships__workspace_id=chat.workspace_id,
        memberships__role__in=access.ANSWERING_ROLES,
    )
    return get_user_model().objects.filter(members, is_active=True).order_by("username")


def assignees(chat: Chat) -> list[ReviewAssignment]:
    """The run's review's assignments (done or not), first assigned first."""
    found = ReviewAssignment.objects.filter(review__chat=chat).select_related("user", "assigned_by")
    return list(found)


def assign(chat: Chat, by: User, user_id: int) -> ReviewAssignment:
    """Ask ``user_id`` to review the run, asking for a review if none is open. Assigning
    oneself is listed, never told (no inbox entry, no notification)."""
    reviews.allowed(by, chat)
    person = assignable(chat).filter(pk=user_id).first()
    if person is None:
        raise Refusal(
            "Only the workspace's approvers and admins give reviews: assign one of them.", 400
        )
    with transaction.atomic():
        review = RunReview.objects.select_for_update().filter(chat=chat).first()
        if review is None or review.done:
            review = reviews.request(chat, by)
        taken = ReviewAssignment.objects.filter(review=review)
        found = taken.filter(user=person).first()
        if found is not None:
            return found
        if taken.count() >= MAX_ASSIGNEES:
            raise Refusal(f"A run's review is assigned to at most {MAX_ASSIGNEES} people.", 400)
        now = timezone.now()
        told = now if person.pk == by.pk else None
        return ReviewAssignment.objects.create(
            review=review, user=person, assigned_by=by, seen_at=told, notified_at=told
        )


def unassign(chat: Chat, by: User, user_id: int) -> bool:
    """No longer ask ``user_id`` to review the run; whether they were asked."""
    reviews.allowed(by, chat)
    gone, _ = ReviewAssignment.objects.filter(review__chat=chat, user_id=user_id).delete()
    return gone > 0


def assignee_ids(chat: Chat) -> list[int]:
    found = ReviewAssignment.objects.filter(review__chat=chat)
    return list(found.values_list("user_id", flat=True))


# --- the inbox ----------------------------------------------------------------------------------


def _waiting(user: Any) -> QuerySet[ReviewAssignment]:
    """The person's assignments of open reviews not yet opened, in runs they still see."""
    return ReviewAssignment.objects.filter(
        user_id=user.pk,
        seen_at__isnull=True,
        review__reviewed_at__isnull=True,
        review__chat__in=access.visible_chats(user),
    )


def waiting_for(user: Any) -> list[ReviewAssignment]:
    """What the inbox lists: the newest ``INBOX_ASSIGNMENTS`` first."""
    if not user.is_authenticated:
        return []
    found = _waiting(user).select_related("assigned_by", "review__chat__workspace")
    return list(found.order_by("-assigned_at", "-id")[:INBOX_ASSIGNMENTS])


def waiting_count(user: Any) -> int:
    """How many assignments wait in the person's inbox (``waiting_for``'s, uncapped)."""
    return _waiting(user).count() if user.is_authenticated else 0


def _counted(waiting: QuerySet[Any]) -> Coalesce:
    per = waiting.order_by().values("user_id").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(per), 0)


def waiting_counts(user: Any) -> tuple[int, int]:
    """How many mentions and how many assignments wait for the person: one query (the needs
    socket's counts are sent on every heartbeat in team mode)."""
    if not user.is_authenticated:
        return 0, 0
    both = (
        get_user_model()
        .objects.filter(pk=user.pk)
        .annotate(m=_counted(mentions.waiting(user)), r=_counted(_waiting(user)))
    )
    found = both.values_list("m", "r").first()
    return found if found is not None else (0, 0)


def own(assignment_id: int, user: Any) -> ReviewAssignment | None:
    """The person's own assignment, in a run they still see; None otherwise."""
    mine = ReviewAssignment.objects.filter(
        pk=assignment_id, user_id=user.pk, review__chat__in=access.visible_chats(user)
    )
    return mine.select_related("review").first()


def mark_seen(assignment_id: int, user: Any) -> ReviewAssignment | None:
    """The person's own assignment, marked as opened (it leaves their inbox)."""
    found = own(assignment_id, user)
    if found is not None and found.seen_at is None:
        found.seen_at = timezone.now()
        found.save(update_fields=["seen_at"])
    return found


# --- the queue page -----------------------------------------------------------------------------


@dataclass
class Progress:
    username: str
    open: int  # assigned, not reviewed yet
    reviewed: int  # assigned, and the review given in the last PROGRESS_DAYS days


@dataclass
class Queue:
    mine: list[ReviewAssignment]
    more_mine: bool  # more than LISTED
    unassigned: list[RunReview]
    more_unassigned: bool
    progress: list[Progress]
    more_progress: bool


def _bounded(rows: list[Any]) -> tuple[list[Any], bool]:
    return rows[:LISTED], len(rows) > LISTED


def queue(user: Any) -> Queue:
    """The queue page's three parts for this person; three queries, however long each is."""
    visible = access.visible_chats(user)
    mine = ReviewAssignment.objects.filter(
        user_id=user.pk, review__reviewed_at__isnull=True, review__chat__in=visible
    )
    mine = mine.select_related("assigned_by", "review__requested_by", "review__chat__workspace")
    unassigned = RunReview.objects.filter(
        reviewed_at__isnull=True,
        assignments__isnull=True,
        chat__in=access.answerable_chats(user),
    )
    unassigned = unassigned.select_related("requested_by", "chat__workspace")
    shown_mine, more_mine = _bounded(list(mine.order_by("assigned_at", "id")[: LISTED + 1]))
    shown_open, more_open = _bounded(list(unassigned.order_by("requested_at")[: LISTED + 1]))
    shown_progress, more_progress = _bounded(progress(user))
    return Queue(shown_mine, more_mine, shown_open, more_open, shown_progress, more_progress)


def progress(user: Any) -> list[Progress]:
    """Each member of the person's workspaces with assignments in runs the person sees: how
    many wait for them, and how many were reviewed in the last ``PROGRESS_DAYS`` days (by
    anyone). One query; at most ``LISTED`` + 1 members."""
    since = timezone.now() - timedelta(days=PROGRESS_DAYS)
    assigned = ReviewAssignment.objects.filter(  # still members of the run's workspace
        review__chat__in=access.visible_chats(user),
        user__memberships__workspace_id=F("review__chat__workspace_id"),
    )
    counted = (
        assigned.values("user_id", "user__username")
        .annotate(
            open=Count("id", filter=Q(review__reviewed_at__isnull=True)),
            reviewed=Count("id", filter=Q(review__reviewed_at__gte=since)),
        )
        .filter(Q(open__gt=0) | Q(reviewed__gt=0))
        .order_by("user__username")
    )[: LISTED + 1]
    return [Progress(row["user__username"], row["open"], row["reviewed"]) for row in counted]
