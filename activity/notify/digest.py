"""The daily digest (``manage.py send_digests``, from cron: docs/email.md): for each person who
turned it on and has a confirmed address, one mail a day of the last 24 hours — the prompts
that waited for their answer, the comments that mentioned them, the turns of runs they follow
that ended. A day's digest is claimed (``MailPrefs.digest_sent_at``) and keyed
``digest:<date>``, so running the command again that day, or on two machines, mails nothing
more. A day with nothing in it is claimed and mails nothing."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from activity.core.contract import bound
from activity.models import Follow, HostRun, InferenceAttempt, MailPrefs, Mention, Prompt
from activity.notify import mailowed, mailsays, mailwho, says
from activity.people import access
from activity.show import statuses

DAY = timedelta(hours=24)
MOST = 50  # of each kind, in one digest
LINE_CHARS = 200


def queue_all(now: datetime | None = None) -> int:
    """Claim and queue today's digest of everyone who wants one; how many were queued."""
    mailowed.owe()  # every turn that ended is claimed, its time seen (``_ended``)
    now = now or timezone.now()
    day = timezone.localdate(now)
    today = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    wanting = MailPrefs.objects.filter(digest=True, unsubscribed_at__isnull=True)
    wanting = wanting.filter(Q(digest_sent_at__isnull=True) | Q(digest_sent_at__lt=today))
    queued = 0
    for user_id in wanting.values_list("user_id", flat=True):
        addresses = mailwho.addresses([user_id]).get(user_id)
        if not addresses:
            continue  # nothing confirmed yet: tomorrow, perhaps
        claim = MailPrefs.objects.filter(user_id=user_id).filter(
            Q(digest_sent_at__isnull=True) | Q(digest_sent_at__lt=today)
        )
        if claim.update(digest_sent_at=now) != 1:
            continue  # another run took it
        found = gather(user_id, now)
        if not any(found.values()):
            continue
        said = mailsays.digest(user_id, day.isoformat(), found)
        queued += bool(mailowed.queue(addresses, f"digest:{day.isoformat()}", said))
    return queued


def gather(user_id: int, now: datetime) -> dict[str, list[dict[str, Any]]]:
    """What a person's digest holds, of the 24 hours before ``now``."""
    user = get_user_model().objects.get(pk=user_id)
    since = now - DAY
    return {
        "prompts": _prompts(user, since),
        "mentions": _mentions(user, since),
        "ended": _ended(user, since),
    }


def _prompts(user: Any, since: datetime) -> list[dict[str, Any]]:
    found = Prompt.objects.filter(created_at__gte=since, chat__in=access.answerable_chats(user))
    lines = []
    for prompt in found.select_related("chat", "tool", "answered_by").order_by("created_at")[:MOST]:
        if prompt.answered_by_id is not None:
            by = prompt.answered_by.get_username() if prompt.answered_by else "someone"
            state = f"answered by {by}" + (f": {prompt.decision}" if prompt.decision else "")
        elif prompt.closed_at is not None:
            state = "the agent went on without an answer"
        else:
            state = "still waiting for an answer"
        lines.append(
            {
                "run": says.run_name(prompt.chat),
                "asked": says.asked(prompt),
                "state": state,
                "url": mailsays.link(reverse("answer", args=[prompt.pk])),
            }
        )
    return lines


def _mentions(user: Any, since: datetime) -> list[dict[str, Any]]:
    found = Mention.objects.filter(user=user, created_at__gte=since).exclude(comment__author=user)
    found = found.filter(comment__tool__chat__in=access.visible_chats(user))
    lines = []
    for mention in found.select_related(*mailowed.MENTIONED).order_by("created_at")[:MOST]:
        comment = mention.comment
        lines.append(
            {
                "author": comment.author.get_username() if comment.author else "someone",
                "run": says.run_name(comment.tool.chat),
                "text": bound(comment.text, LINE_CHARS),
                "url": mailsays.link(reverse("open-mention", args=[mention.pk])),
            }
        )
    return lines


def followed(user: Any) -> set[uuid.UUID]:
    """The runs a person follows (as ``who.followers`` counts them)."""
    said = dict(Follow.objects.filter(user=user).values_list("chat_id", "following"))
    started = HostRun.objects.filter(requested_by=user, chat_id__isnull=False)
    chats = {c for c, following in said.items() if following}
    chats |= {c for c in started.values_list("chat_id", flat=True) if c and c not in said}
    return chats


def _ended(user: Any, since: datetime) -> list[dict[str, Any]]:
    """Turns of followed runs whose end the server saw in the last 24 hours: ``mailed_at``,
    claimed within a poll of it (``ended_at`` is the runner's clock, not the server's)."""
    found = InferenceAttempt.objects.filter(
        chat_id__in=followed(user),
        chat__in=access.visible_chats(user),
        ended_at__isnull=False,
        mailed_at__gte=since,
    )
    lines = []
    for turn in found.select_related("chat").order_by("mailed_at")[:MOST]:
        shown = statuses.turn_status(turn, statuses.canceller(turn))
        lines.append(
            {
                "title": f"{says.run_name(turn.chat)}: {shown.words}",
                "url": mailsays.link(reverse("chat", args=[turn.chat_id])),
            }
        )
    return lines
