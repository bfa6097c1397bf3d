"""Who is told: of the people something concerns, those who want to hear of it
(``NotifyPrefs``: prompts, mentions, runs they follow), are not in their quiet hours, and are
not looking at it already (a page of the run visible and focused: ``watching.looking``); and
who follows a run (``followers``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from django.contrib.auth import get_user_model
from django.db.models import Q

from activity.models import Chat, Follow, HostRun, NotifyPrefs
from activity.push import watching

What = Literal["prompts", "mentions", "follows"]


def wanting(people: Iterable[int], what: What, now: datetime) -> set[int]:
    """Those of ``people`` who want to hear of ``what`` now (no preferences: everything)."""
    wanted = set(people)
    for prefs in NotifyPrefs.objects.filter(user__in=wanted):
        if not getattr(prefs, what) or prefs.quiet(now):
            wanted.discard(prefs.user_id)
    return wanted


def told(people: Iterable[int], what: What, chat_id: uuid.UUID, now: datetime) -> set[int]:
    """Those of ``people`` to tell of ``what`` in chat ``chat_id`` now."""
    return wanting(people, what, now) - watching.looking(chat_id)


def followers(chat: Chat) -> set[int]:
    """Who follows the run and may still see it: those who said so, and whoever started it from
    the web unless they stopped."""
    said = dict(Follow.objects.filter(chat=chat).values_list("user_id", "following"))
    started = HostRun.objects.filter(chat_id=chat.pk, requested_by__isnull=False)
    people = {u for u, following in said.items() if following}
    people |= {u for u in started.values_list("requested_by_id", flat=True) if u not in said}
    seeing = Q(memberships__workspace_id=chat.workspace_id) | Q(is_superuser=True)
    still = get_user_model().objects.filter(seeing, pk__in=people, is_active=True)
    return set(still.values_list("pk", flat=True))


def follows(user_id: int, chat: Chat) -> bool:
    """Whether this person follows the run (as ``followers`` counts them)."""
    said = Follow.objects.filter(chat=chat, user_id=user_id).values_list("following", flat=True)
    for following in said:
        return following
    return HostRun.objects.filter(chat_id=chat.pk, requested_by_id=user_id).exists()
