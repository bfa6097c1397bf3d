"""What is owed to which device, and each notification claimed so that it is sent once.

Nothing here runs on the request or the ingest path: each server process's ``worker`` calls
``owe`` and ``take`` every ``NOTIFY_POLL_MS``.

1. ``owe``: a prompt still open ``NOTIFY_DELAY_SECONDS`` after the server heard of it is
   claimed (a conditional update of ``Prompt.notified_at``: one process wins) and a ``Notice`` is
   made for every device of every person who may answer it (``access.answerers``). A prompt
   that was told and has since been answered or closed is claimed again
   (``settled_told_at``) and each device that was told gets the same tag's "Answered by …".
   The unique (device, key) pair makes a device's notice once, whatever happens twice. A comment
   that mentions someone is claimed likewise (``Mention.notified_at``) and told to their devices,
   and so is a run's review asked of someone (``ReviewAssignment.notified_at``; as a mention's,
   by their mentions preference: docs/architecture.md#the-review-queue).
   A turn that ended is claimed likewise (``InferenceAttempt.told_at``) and told to the run's
   followers. Who is told is ``who.told``'s: wanted, not in quiet hours, not looking already.
2. ``take``: notices not sent are claimed one by one (a conditional update of ``claimed_at``;
   a claim older than ``RETRY_SECONDS`` is stale: its process died or its push failed) and
   handed to the caller to send; ``done`` records what came of it: sent, or the device gone
   (deleted, and its notices with it), or a failure tried again later, ``MAX_TRIES`` times.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Model, Q
from django.utils import timezone

from activity.models import (
    InferenceAttempt,
    Membership,
    Mention,
    Notice,
    Prompt,
    PushDevice,
    ReviewAssignment,
)
from activity.notify import says, who
from activity.notify.send import Sent
from activity.people import access

MENTIONED = ("comment__author", "comment__tool__chat")
ASSIGNED = ("assigned_by", "review__chat__workspace")
RETRY_SECONDS = 60  # a claimed notice not sent by then is taken again
MAX_TRIES = 5
KEEP_HOURS = 24 * 7  # a prompt open longer than this is replaced on no device
BATCH = 50  # notices taken at a time


def _prune() -> None:
    """Notices are kept ``KEEP_HOURS`` after they were made: long enough for a replacement to
    find the devices told, never for ever."""
    old = Notice.objects.filter(created_at__lt=timezone.now() - timedelta(hours=KEEP_HOURS))
    old.filter(Q(sent_at__isnull=False) | Q(tries__gte=MAX_TRIES)).delete()


def _claim(model: type[Model], pk: object, field: str) -> bool:
    """Take ``model`` row ``pk`` to tell of: one process wins (``field`` is null until then)."""
    unclaimed = model._default_manager.filter(pk=pk, **{f"{field}__isnull": True})
    return unclaimed.update(**{field: timezone.now()}) == 1


def owe() -> int:
    """Make the notices that are due; how many were made."""
    cutoff = timezone.now() - timedelta(seconds=settings.NOTIFY_DELAY_SECONDS)
    made = 0
    waiting = Prompt.objects.filter(
        notified_at__isnull=True, closed_at__isnull=True, answered_at__isnull=True
    ).filter(created_at__lte=cutoff)
    for prompt in waiting.select_related("chat", "tool")[:BATCH]:
        if _claim(Prompt, prompt.pk, "notified_at"):
            made += _waiting(prompt)
    settled = Prompt.objects.filter(notified_at__isnull=False, settled_told_at__isnull=True)
    settled = settled.filter(Q(closed_at__isnull=False) | Q(answered_at__isnull=False))
    for prompt in settled.select_related("chat", "answered_by")[:BATCH]:
        if _claim(Prompt, prompt.pk, "settled_told_at"):
            made += _settled(prompt)
    ended = InferenceAttempt.objects.filter(ended_at__isnull=False, told_at__isnull=True)
    for turn in ended.select_related("chat")[:BATCH]:
        if _claim(InferenceAttempt, turn.pk, "told_at"):
            made += _ended(turn)
    _prune()
    mentions = Mention.objects.filter(notified_at__isnull=True, seen_at__isnull=True)
    for mention in mentions.filter(created_at__lte=cutoff).select_related(*MENTIONED)[:BATCH]:
        if _claim(Mention, mention.pk, "notified_at"):
            made += _mentioned(mention)
    assigned = ReviewAssignment.objects.filter(
        notified_at__isnull=True, seen_at__isnull=True, review__reviewed_at__isnull=True
    )
    for assignment in assigned.filter(assigned_at__lte=cutoff).select_related(*ASSIGNED)[:BATCH]:
        if _claim(ReviewAssignment, assignment.pk, "notified_at"):
            made += _assigned(assignment)
    return made


def _waiting(prompt: Prompt) -> int:
    answering = access.answerers(prompt.chat.workspace_id)
    people = who.told(answering, "prompts", prompt.chat_id, timezone.now())
    devices = PushDevice.objects.filter(user__in=people)
    notices = [
        Notice(device=d, key=f"prompt:{prompt.pk}", payload=says.waiting(prompt, d.user_id))
        for d in devices
    ]
    return len(Notice.objects.bulk_create(notices, ignore_conflicts=True))


def _settled(prompt: Prompt) -> int:
    first = Notice.objects.filter(key=f"prompt:{prompt.pk}")
    # A prompt answered before its notice went out: that notice is not sent at all.
    first.filter(sent_at__isnull=True, claimed_at__isnull=True).delete()
    payload = says.settled(prompt)
    notices = [
        Notice(device_id=d, key=f"prompt:{prompt.pk}:settled", payload=payload)
        for d in first.values_list("device_id", flat=True)
    ]
    return len(Notice.objects.bulk_create(notices, ignore_conflicts=True))


def _mentioned(mention: Mention) -> int:
    """The person a comment mentions, if they may still see its run and want to be told."""
    chat = mention.comment.tool.chat
    if not Membership.objects.filter(user=mention.user_id, workspace=chat.workspace_id).exists():
        return 0  # no longer a member: the run is not theirs to see
    if not who.told([mention.user_id], "mentions", chat.pk, timezone.now()):
        return 0
    payload = says.mentioned(mention)
    notices = [
        Notice(device=d, key=f"mention:{mention.pk}", payload=payload)
        for d in PushDevice.objects.filter(user=mention.user_id)
    ]
    return len(Notice.objects.bulk_create(notices, ignore_conflicts=True))


def _assigned(assignment: ReviewAssignment) -> int:
    """The person asked to review a run, if they still may see it and want to be told (as of a
    mention). Each time the review is asked for is told once (its ``requested_at`` in the key)."""
    chat = assignment.review.chat
    if not Membership.objects.filter(user=assignment.user_id, workspace=chat.workspace_id).exists():
        return 0
    if not who.told([assignment.user_id], "mentions", chat.pk, timezone.now()):
        return 0
    asked = assignment.review.requested_at.isoformat()
    payload = says.assigned(assignment)
    notices = [
        Notice(device=d, key=f"review:{assignment.pk}:{asked}", payload=payload)
        for d in PushDevice.objects.filter(user=assignment.user_id)
    ]
    return len(Notice.objects.bulk_create(notices, ignore_conflicts=True))


def _ended(turn: InferenceAttempt) -> int:
    """A turn of a followed run ended: its followers are told how."""
    people = who.told(who.followers(turn.chat), "follows", turn.chat_id, timezone.now())
    payload = says.ended(turn)
    notices = [
        Notice(device=d, key=f"turn:{turn.pk}", payload=payload)
        for d in PushDevice.objects.filter(user__in=people)
    ]
    return len(Notice.objects.bulk_create(notices, ignore_conflicts=True))


def take() -> list[Notice]:
    """Claim notices to send now (each claimed by one process only)."""
    stale = timezone.now() - timedelta(seconds=RETRY_SECONDS)
    owed = Notice.objects.filter(sent_at__isnull=True, tries__lt=MAX_TRIES).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=stale)
    )
    taken = []
    for notice in owed.select_related("device")[:BATCH]:
        if notice.key.endswith(":settled") and _first_in_flight(notice):
            continue  # its replacement goes out after it, never before

        claim = Notice.objects.filter(pk=notice.pk, claimed_at=notice.claimed_at, sent_at=None)
        if claim.update(claimed_at=timezone.now(), tries=F("tries") + 1) == 1:
            taken.append(notice)
    return taken


def _first_in_flight(settled: Notice) -> bool:
    first = settled.key.removesuffix(":settled")
    unsent = Notice.objects.filter(device_id=settled.device_id, key=first, sent_at__isnull=True)
    return unsent.filter(tries__lt=MAX_TRIES).exists()


def done(notice: Notice, sent: Sent) -> None:
    """Record what came of sending ``notice``."""
    now = timezone.now()
    if sent.ok:
        Notice.objects.filter(pk=notice.pk).update(sent_at=now, error="")
        PushDevice.objects.filter(pk=notice.device_id).update(last_used_at=now)
    elif sent.gone:
        PushDevice.objects.filter(pk=notice.device_id).delete()
    else:
        Notice.objects.filter(pk=notice.pk).update(error=sent.error)
