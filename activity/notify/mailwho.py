"""Who is mailed: of the people something concerns, those who want it by mail (``MailPrefs``:
a prompt after their minutes, mentions, runs they follow, the digest; nobody who unsubscribed),
and each one's confirmed addresses: only those get mail. docs/email.md."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

from activity.models import EmailAddress, MailPrefs

What = Literal["mentions", "follows", "digest"]


def wanting(people: Iterable[int], what: What) -> set[int]:
    """Those of ``people`` who want ``what`` by mail (no preferences: nothing)."""
    prefs = MailPrefs.objects.filter(unsubscribed_at__isnull=True, user__in=set(people))
    return set(prefs.filter(**{what: True}).values_list("user_id", flat=True))


def prompt_minutes() -> dict[int, int]:
    """Everyone who wants a waiting prompt mailed, and after how many minutes (those with a
    confirmed address only: nobody else could be mailed)."""
    prefs = MailPrefs.objects.filter(
        unsubscribed_at__isnull=True,
        prompt_minutes__isnull=False,
        user__is_active=True,
        user__email_addresses__confirmed_at__isnull=False,
    )
    found = prefs.values_list("user_id", "prompt_minutes").distinct()
    return {user_id: minutes for user_id, minutes in found if minutes is not None}


def addresses(people: Iterable[int]) -> dict[int, list[EmailAddress]]:
    """The confirmed addresses of each of ``people`` who has one (and is still active)."""
    found: defaultdict[int, list[EmailAddress]] = defaultdict(list)
    confirmed = EmailAddress.objects.filter(
        user__in=set(people), confirmed_at__isnull=False, user__is_active=True
    )
    for address in confirmed:
        found[address.user_id].append(address)
    return dict(found)
