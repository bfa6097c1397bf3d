"""Sending the deliveries owed, each by one process, tried again with backoff
(docs/webhooks.md#retries).

``tick`` is the webhooks' part of each process's notifier (``worker.tick``): it makes what is
owed (``hooks.owe``), then claims deliveries that are due (``take``: a conditional update of
``claimed_at``; a claim older than ``stale`` is taken again, its process died) as many as the
process has room for, and posts each in a thread of a pool of ``AT_ONCE`` (``hooksend.send``),
which records what came of it (``done``):
delivered; or tried again ``WEBHOOK_RETRY_SECONDS * 2**(attempts-1)`` later, until
``WEBHOOK_MAX_TRIES`` attempts have failed; or failed at once where the address is refused.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.db.models import F, Q
from django.utils import timezone

from activity.models import Delivery, Webhook
from activity.notify import hookbody, hooks, hooksend

log = logging.getLogger(__name__)
LONGEST_WAIT = 24 * 3600.0  # seconds between two tries of a delivery, at most
AT_ONCE = 8  # posts in flight from one process
_pool = ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="webhooks")
_inflight: set[Future[None]] = set()
_lock = threading.Lock()


def stale() -> timedelta:
    """A claim this old was never recorded: its process stopped (an attempt ends by 2x the
    timeout)."""
    return timedelta(seconds=max(60.0, 3 * float(settings.WEBHOOK_TIMEOUT_SECONDS)))


def _prune() -> None:
    """Deliveries delivered or failed are kept ``WEBHOOK_KEEP_DAYS`` for the log."""
    old = Delivery.objects.filter(
        created_at__lt=timezone.now() - timedelta(days=settings.WEBHOOK_KEEP_DAYS)
    )
    old.filter(Q(delivered_at__isnull=False) | Q(failed_at__isnull=False)).delete()


def take(most: int = AT_ONCE) -> list[hooksend.Outgoing]:
    """Claim at most ``most`` deliveries due now (each claimed by one process only)."""
    now = timezone.now()
    open_ = Delivery.objects.filter(delivered_at__isnull=True, failed_at__isnull=True)
    lost = open_.filter(claimed_at__lt=now - stale())
    # A claim whose process stopped after the last attempt allowed: failed, not taken again.
    lost.filter(attempts__gte=settings.WEBHOOK_MAX_TRIES).update(
        failed_at=now, claimed_at=None, error="The process sending it stopped; not tried again."
    )
    due = open_.filter(next_try_at__lte=now, webhook__active=True).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - stale())
    )
    taken = []
    for row in due.select_related("webhook").order_by("next_try_at", "pk")[:most]:
        claim = Delivery.objects.filter(pk=row.pk, claimed_at=row.claimed_at, delivered_at=None)
        if claim.update(claimed_at=now, attempts=F("attempts") + 1) == 1:
            hook = row.webhook
            taken.append(
                hooksend.Outgoing(
                    row.pk, hook.url, hook.secret, hook.format, row.event, row.payload
                )
            )
    return taken


def done(delivery_id: int, attempt: hooksend.Attempt) -> None:
    """Record what came of one attempt."""
    now = timezone.now()
    row = Delivery.objects.filter(pk=delivery_id, delivered_at__isnull=True)
    said = {"claimed_at": None, "status_code": attempt.status, "error": attempt.error[:300]}
    if attempt.ok:  # turned off meanwhile: it went all the same
        row.update(delivered_at=now, failed_at=None, **said)
        return
    attempts = row.values_list("attempts", flat=True).first() or 0
    if attempt.final or attempts >= settings.WEBHOOK_MAX_TRIES:
        row.update(failed_at=now, **said)
        return
    doublings = min(max(attempts - 1, 0), 20)  # a day between tries at most, whatever the settings
    wait = min(float(settings.WEBHOOK_RETRY_SECONDS) * 2**doublings, LONGEST_WAIT)
    row.update(next_try_at=now + timedelta(seconds=wait), **said)


def ping(webhook: Webhook, by: str) -> Delivery:
    """A test event owed to ``webhook`` alone, sent by the notifier like any other."""
    key = f"{hookbody.PING}:{uuid.uuid4()}"
    payload = hookbody.ping(webhook, key, by)
    return Delivery.objects.create(webhook=webhook, key=key, event=hookbody.PING, payload=payload)


def paused(webhook: Webhook) -> int:
    """A webhook turned off: what it was still owed fails now (it is not sent when it is on
    again, late). How many."""
    owed = webhook.deliveries.filter(delivered_at__isnull=True, failed_at__isnull=True)
    return owed.update(failed_at=timezone.now(), error="The webhook was turned off.")


async def tick() -> None:
    """The webhooks' part of each notifier's poll: what is owed is made, and as many posts
    started as this process has room for. It waits for them at most one poll
    (``NOTIFY_POLL_MS``): a slow receiver holds up neither Web Push nor the next poll; its
    post records itself when it ends."""
    await database_sync_to_async(hooks.owe)()
    await database_sync_to_async(_prune)()
    with _lock:
        room = AT_ONCE - len(_inflight)
    if room <= 0:
        return
    owed = await database_sync_to_async(take)(room)
    if owed:
        started = [asyncio.wrap_future(_start(out)) for out in owed]
        await asyncio.wait(started, timeout=settings.NOTIFY_POLL_MS / 1000)


def _start(out: hooksend.Outgoing) -> Future[None]:
    posting = _pool.submit(post, out)
    with _lock:
        _inflight.add(posting)
    posting.add_done_callback(_ended)
    return posting


def _ended(posting: Future[None]) -> None:
    with _lock:
        _inflight.discard(posting)


def post(out: hooksend.Outgoing) -> None:
    """One attempt, in a thread of the pool, and what came of it recorded."""
    try:
        attempt = hooksend.send(out)
    except Exception:  # a fault of koruweb's own: recorded, tried again like any failure
        log.exception("posting webhook delivery %s failed", out.delivery_id)
        attempt = hooksend.Attempt(False, error="koruweb could not post it: see the server's log")
    if not attempt.ok:
        log.warning("webhook delivery %s failed: %s", out.delivery_id, attempt.error)
    try:
        done(out.delivery_id, attempt)
    except Exception:  # the database is away: its claim goes stale, and it is taken again
        log.exception("recording webhook delivery %s failed", out.delivery_id)
    finally:
        connections.close_all()  # this thread's own: the pool's threads outlive the post
