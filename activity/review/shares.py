"""Read-only links to one run (issue 30; docs/architecture.md#share-links).

A member with the role the workspace allows (``Workspace.share_role``: admins, or approvers and
admins) makes a link to a run that lasts a chosen time (``LASTS``, at most 30 days). Whoever
holds it sees the run as it is now, live while it runs, without an account: the stored, masked
text only, and none of the team's own (comments, who watches, the message box, members' names:
the pages are drawn with ``shared`` set, ``templates/activity/pushed/parts.html``). Only the
token's hash is kept; the link is shown once. Revoking it, or its expiry, ends the pages open on
it at once (``ended``: the sockets' group ``groups.share``).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from activity.core import groups
from activity.core.refusals import Refusal
from activity.models import Chat, Role, ShareLink, Workspace
from activity.people import access

# How long a link lasts: the choices a person is offered, in hours, and what they read.
LASTS = {1: "an hour", 24: "a day", 24 * 7: "a week", 24 * 30: "30 days"}
PER_RUN = 20  # live links a run may have at once
OPENED_EVERY = timedelta(minutes=1)  # ``last_opened_at`` is written at most this often
SHARE_ROLES = {Role.ADMIN.value: "admins", Role.APPROVER.value: "approvers and admins"}
REVOKED = "This link was revoked"
EXPIRED = "This link has expired"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def may_share(user: access.User, chat: Chat) -> bool:
    """Whether ``user`` may make and revoke links to ``chat``: their role in its workspace is
    at least the one the workspace allows."""
    role = access.role_in(user, chat.workspace_id)
    if role == Role.ADMIN:
        return True
    return role == Role.APPROVER and chat.workspace.share_role == Role.APPROVER


@dataclass(frozen=True)
class Made:
    link: ShareLink
    token: str  # shown this once: only its hash is kept


def make(chat: Chat, user: User, hours: int) -> Made:
    """A new link to ``chat`` that lasts ``hours`` (one of ``LASTS``)."""
    if not may_share(user, chat):
        who = SHARE_ROLES.get(chat.workspace.share_role, "admins")
        raise Refusal(f"In {chat.workspace.name}, links to a run are made by its {who}.", 403)
    if hours not in LASTS:
        raise Refusal("Choose how long the link lasts: an hour, a day, a week or 30 days.", 400)
    if live_links(chat).count() >= PER_RUN:
        raise Refusal(f"A run has at most {PER_RUN} live links: revoke one first.", 409)
    token = secrets.token_urlsafe(32)
    link = ShareLink.objects.create(
        chat=chat,
        token_hash=digest(token),
        hint=token[:6],
        created_by=user,
        expires_at=timezone.now() + timedelta(hours=hours),
    )
    return Made(link, token)


def live_links(chat: Chat) -> QuerySet[ShareLink]:
    now = timezone.now()
    return chat.share_links.filter(revoked_at__isnull=True, expires_at__gt=now)


def listed(workspace: Workspace) -> QuerySet[ShareLink]:
    """A workspace's live links, newest first, with their runs and who made them."""
    now = timezone.now()
    found = ShareLink.objects.filter(chat__workspace=workspace, revoked_at__isnull=True)
    return found.filter(expires_at__gt=now).select_related("chat", "created_by")


def find(token: str) -> ShareLink | None:
    """The live link ``token`` opens, with its run; None for any other token."""
    if not token or len(token) > 100:
        return None
    link = (
        ShareLink.objects.select_related("chat", "chat__workspace", "chat__current_attempt")
        .filter(token_hash=digest(token))
        .first()
    )
    return link if link is not None and link.live else None


def opened(link: ShareLink) -> None:
    """Record that the link was opened now (at most once per ``OPENED_EVERY``)."""
    now = timezone.now()
    if link.last_opened_at is None or now - link.last_opened_at >= OPENED_EVERY:
        ShareLink.objects.filter(pk=link.pk).update(last_opened_at=now)


def revoke(link: ShareLink, user: User) -> None:
    """Revoke ``link`` (its run's sharers, or the workspace's admins): it opens nothing from now
    on, and the pages open on it are ended at once."""
    if not may_share(user, link.chat):
        raise Refusal("Only who may share this run revokes its links.", 403)
    revoked = ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_by=user
    )
    if revoked:
        ended(link.pk, REVOKED)


def ended(link_id: int, why: str) -> None:
    """End every page open on link ``link_id``, in every process."""
    async_to_sync(get_channel_layer().group_send)(
        groups.share(link_id), {"type": "share.ended", "why": why}
    )


def set_role(workspace: Workspace, role: str) -> None:
    """Which members of ``workspace`` may make links (``SHARE_ROLES``)."""
    if role not in SHARE_ROLES:
        raise Refusal("Links are made by admins, or by approvers and admins.", 400)
    Workspace.objects.filter(pk=workspace.pk).update(share_role=role)
