"""Counts every process shares: how often someone did something within a window.

The counts live in the ``login_throttle`` cache (Redis when ``REDIS_URL`` is set, so every
process counts the same; a process's memory otherwise). A count starts at its first event and
ends ``window`` seconds later: ``add`` starts it, ``incr`` keeps its expiry, so a steady stream
cannot keep a window open for ever. The login page counts wrong passwords here
(``login.count_failure``), the invite links unknown links, and the comment form comments per
person per minute (``COMMENTS_PER_MINUTE``, ``comment_allowed``).

Every use takes the process's one instance of a cache (``shared``): Django's ``caches[alias]``
is one instance per async context, so per open socket, and each ``RedisCache`` instance keeps a
connection pool of its own (docs/gotchas.md#caches-are-per-async-context).
"""

from __future__ import annotations

import hashlib
import threading

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache

CACHE = "login_throttle"
_shared: dict[tuple[str, str], BaseCache] = {}
_making = threading.Lock()


def shared(alias: str = CACHE) -> BaseCache:
    """This process's one instance of cache ``alias`` (a new one if its settings changed, as
    in a test that overrides them)."""
    made = (alias, repr(settings.CACHES[alias]))
    found = _shared.get(made)
    if found is None:
        with _making:
            found = _shared.get(made) or caches.create_connection(alias)
            _shared[made] = found
    return found


def key(kind: str, value: str) -> str:
    """The cache key of ``value``'s count of ``kind`` (hashed: no name or address is stored)."""
    return f"{kind}:" + hashlib.sha256(value.encode()).hexdigest()


def count(key: str, window: int) -> int:
    """One more under ``key``; the count so far, this one included."""
    cache = shared()
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
