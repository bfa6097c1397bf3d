"""Who is told: of the people something concerns, those who want to hear of it
(``NotifyPrefs``: prompts, mentions), are not in their quiet hours, and are not looking at it
already (a page of the run visible and focused: ``watching.looking``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from activity.models import NotifyPrefs
from activity.push import watching

What = Literal["prompts", "mentions"]


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
