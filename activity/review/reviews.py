"""A run's review (issue 30): an approver or an admin of its workspace asks for one ("needs
review"), and one of them marks it reviewed with an outcome (good, needs changes, bad) and a
note. The runs list filters by it; the run's transcript says it."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone

from activity.core.refusals import Refusal
from activity.models import Chat, ReviewOutcome, RunReview
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
    """Mark the run as needing a review (again, if it was reviewed: that review is replaced)."""
    allowed(user, chat)
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


def markdown(chat: Chat) -> list[str]:
    """What the transcript says of the run's review (nothing if it has none)."""
    review = RunReview.objects.filter(chat=chat).select_related("reviewed_by").first()
    if review is None:
        return []
    if not review.done:
        return ["Review: needed", ""]
    who = review.reviewed_by.get_username() if review.reviewed_by else "a former member"
    said = [f"Review: {ReviewOutcome(review.outcome).label.lower()}, by {who}"]
    return [*said, "", *([review.note, ""] if review.note else [])]
