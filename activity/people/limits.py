"""Counts every process shares: how often someone did something within a window.

The counts live in the ``login_throttle`` cache (Redis when ``REDIS_URL`` is set, so every
process counts the same; a process's memory otherwise). A count starts at its first event and
ends ``window`` seconds later: ``add`` starts it, ``incr`` keeps its expiry, so a steady stream
cannot keep a window open for ever. The login page counts wrong passwords here
(``login.count_failure``), the invite links unknown links, and the comment form comments per
person per minute (``COMMENTS_PER_MINUTE``, ``comment_allowed``).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import caches

CACHE = "login_throttle"


def key(kind: str, value: str) -> str:
    """The cache key of ``value``'s count of ``kind`` (hashed: no name or address is stored)."""
    return f"{kind}:" + hashlib.sha256(value.encode()).hexdigest()


def count(key: str, window: int) -> int:
    """One more under ``key``; the count so far, this one included."""
    cache = caches[CACHE]
    if cache.add(key, 1, timeout=window):
        return 1
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=window)
        return 1


def comment_key(user_id: object) -> str:
    return key("comments", str(user_id))


def comment_allowed(user_id: object) -> bool:
    """Count a person's comment; False past ``COMMENTS_PER_MINUTE`` within the minute that
    began with their first."""
    return count(comment_key(user_id), 60) <= settings.COMMENTS_PER_MINUTE


def comment_wait_words() -> str:
    limit = settings.COMMENTS_PER_MINUTE
    return (
        f"You have written {limit} comment{'s' if limit != 1 else ''} within a minute, the most "
        "one person may: wait a minute and try again."
    )
