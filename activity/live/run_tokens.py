"""The tokens a host is given for its runs, revoked when their runs end.

Each run a host starts gets an agent token for its chat alone (activity/live/host_asks.py). It
is revoked when its run ends: the host reports it failed or exited (activity/live/hosts.py), the
host reconnects without it (``hosts.reconcile``), presence counts its runner gone past
``RUNNER_GRACE_SECONDS``, or it is still *starting* after ``HOST_START_SECONDS`` (``sweep``, from
every process's watchdog). A host that is only away (a restart of the server, a network blip)
ends none of its runs.

A host token never writes a chat (``/ws/agent/`` takes only agent tokens); revoking it closes
the host's socket (``groups.token``) and revokes the tokens it was given for its runs
(``revoke_issued``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity.core import groups
from activity.models import Chat
from activity.models.accounts import AgentToken, HostRun, HostRunStatus

Status = HostRunStatus


def revoke_run_token(run: HostRun) -> None:
    if run.token_id is not None:
        revoke_tokens([run.token_id])


def revoke_tokens(token_ids: list[int]) -> list[int]:
    """Revoke those of ``token_ids`` not yet revoked: their ids."""
    live = AgentToken.objects.filter(pk__in=token_ids, revoked_at__isnull=True)
    revoked = list(live.values_list("pk", flat=True))
    AgentToken.objects.filter(pk__in=revoked).update(revoked_at=timezone.now())
    return revoked


async def close_sockets(token_ids: list[int]) -> None:
    """The sockets still open with these (revoked) tokens close (``consumers.token_revoked``)."""
    layer = get_channel_layer()
    for token_id in token_ids:
        await layer.group_send(groups.token(token_id), {"type": "token.revoked"})


def revoke_issued(token: AgentToken) -> list[int]:
    """The run tokens a host token's host was given, revoked with it: their ids."""
    issued = list(token.issued.filter(revoked_at__isnull=True).values_list("pk", flat=True))
    AgentToken.objects.filter(pk__in=issued).update(revoked_at=timezone.now())
    return issued


def sweep(now: datetime | None = None) -> list[int]:
    """The run tokens of runs that ended without a word, revoked: their ids. A run still
    *starting* after ``HOST_START_SECONDS`` fails; a run whose runner presence counts gone past
    ``RUNNER_GRACE_SECONDS`` (its socket closed, or silent on a process that died) exits. A
    runner that is only reconnecting is back within the grace, and keeps its token."""
    now = now or timezone.now()
    waited = f"the host did not start it within {settings.HOST_START_SECONDS} s"
    with transaction.atomic():  # a run the host reports started meanwhile keeps its token
        stuck = list(
            HostRun.objects.select_for_update().filter(
                status=Status.STARTING,
                created_at__lt=now - timedelta(seconds=settings.HOST_START_SECONDS),
            )
        )
        HostRun.objects.filter(pk__in=[run.pk for run in stuck]).update(
            status=Status.FAILED, error=waited
        )
    tokens = [run.token_id for run in stuck if run.token_id is not None]
    gone_chats = Chat.objects.filter(
        runner_connected=False,
        runner_left_at__lt=now - timedelta(seconds=settings.RUNNER_GRACE_SECONDS),
    ).values("pk")
    starting = HostRun.objects.filter(status=Status.STARTING).values("token_id")
    gone = AgentToken.objects.filter(chat_id__in=gone_chats, revoked_at__isnull=True)
    gone = gone.exclude(pk__in=starting)  # a resume's new runner: HOST_START_SECONDS, above
    gone_ids = list(gone.values_list("pk", flat=True))
    HostRun.objects.filter(token_id__in=gone_ids, status=Status.STARTED).update(
        status=Status.EXITED
    )
    return revoke_tokens(tokens + gone_ids)
