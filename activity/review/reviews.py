"""A run's review (issue 30): an approver or an admin of its workspace asks for one ("needs
review"), and one of them marks it reviewed with an outcome (good, needs changes, bad) and a
note. The runs list filters by it; the run's transcript says it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone

from activity.core.refusals import Refusal
from activity.models import Chat, ReviewAssignment, ReviewOutcome, RunReview
from activity.people import access

NOTE_CHARS = 4000
STATES = [
    ("", "any review"),
    ("needed", "needs review"),
    ("reviewed", "reviewed"),
    *[(outcome.value, f"reviewed: {outcome.label.lower()}") for outcome in ReviewOutcome],
]


def allowed(user: User, chat: Chat) -> None:
    if not access.can_answer(user, chat):
        raise Refusal("Reviews are asked for and given by the run's approvers and admins.", 403)


def request(chat: Chat, user: User) -> RunReview:
    """Mark the run as needing a review (again, if it was reviewed: that review is replaced,
    and the people it is assigned to are asked again: back in their inboxes, told again)."""
    allowed(user, chat)
    given = RunReview.objects.filter(chat=chat, reviewed_at__isnull=False).exists()
    review, _ = RunReview.objects.update_or_create(
        chat=chat,
        defaults={
            "requested_by": user,
            "requested_at": timezone.now(),
            "outcome": "",
            "note": "",
            "reviewed_by": None,
            "reviewed_at": None,
        },
    )
    if given:  # asked again: its people too (not the one asking, who knows)
        again = ReviewAssignment.objects.filter(review=review).exclude(user=user)
        again.update(seen_at=None, notified_at=None)
    return review


def give(chat: Chat, user: User, outcome: str, note: str) -> RunReview:
    """Mark the run reviewed with ``outcome`` and ``note``; it need not have been asked for."""
    allowed(user, chat)
    if outcome not in ReviewOutcome.values:
        raise Refusal("Choose how the run went: good, needs changes or bad.", 400)
    note = note.strip().replace("\x00", "")
    if len(note) > NOTE_CHARS:
        raise Refusal(f"A review's note is at most {NOTE_CHARS:,} characters.", 400)
    review, _ = RunReview.objects.get_or_create(chat=chat, defaults={"requested_by": user})
    review.outcome, review.note = outcome, note
    review.reviewed_by, review.reviewed_at = user, timezone.now()
    review.save(update_fields=["outcome", "note", "reviewed_by", "reviewed_at"])
    return review


def filtered(state: str) -> dict[str, object]:
    """The runs list's lookups for a review state (``STATES``)."""
    if state == "needed":
        return {"review__isnull": False, "review__reviewed_at__isnull": True}
    if state == "reviewed":
        return {"review__reviewed_at__isnull": False}
    if state in ReviewOutcome.values:
        return {"review__outcome": state}
    return {}


def _name(user: User | None) -> str | None:
    return user.get_username() if user is not None else None


def markdown(chat: Chat) -> list[str]:
    """What the transcript says of the run's review (nothing if it has none): its state, who
    gave it, its note, and who it is assigned to (the review queue)."""
    review = RunReview.objects.filter(chat=chat).select_related("reviewed_by").first()
    if review is None:
        return []
    found = ReviewAssignment.objects.filter(review=review)
    people = list(found.values_list("user__username", flat=True))
    assigned = [f"Assigned to: {', '.join(people)}", ""] if people else []
    if not review.done:
        return ["Review: needed", "", *assigned]
    who = _name(review.reviewed_by) or "a former member"
    said = [f"Review: {ReviewOutcome(review.outcome).label.lower()}, by {who}"]
    return [*said, "", *([review.note, ""] if review.note else []), *assigned]


def record(chat: Chat) -> dict[str, object] | None:
    """The run's review as the JSON export gives it (``?with=review``); None if it has none."""
    found = RunReview.objects.filter(chat=chat).select_related("requested_by", "reviewed_by")
    review = found.first()
    if review is None:
        return None
    assigned = ReviewAssignment.objects.filter(review=review).select_related("user", "assigned_by")
    return {
        "state": "reviewed" if review.done else "needed",
        "outcome": review.outcome or None,
        "note": review.note,
        "requested_by": _name(review.requested_by),
        "requested_at": review.requested_at.isoformat(),
        "reviewed_by": _name(review.reviewed_by),
        "reviewed_at": review.reviewed_at.isoformat() if review.reviewed_at else None,
        "assignees": [
            {
                "username": a.user.get_username(),
                "assigned_by": _name(a.assigned_by),
                "assigned_at": a.assigned_at.isoformat(),
            }
            for a in assigned
        ],
    }
