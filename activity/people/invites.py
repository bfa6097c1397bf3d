"""Inviting people into a workspace by a one-time link.

An admin makes an invite for a role and a lifetime and gets its link, shown once: only the
hash of its secret is kept, as for agent tokens. The link works once, before it expires and
unless an admin revoked it: a new person sets a username and password there, someone with an
account logs in first; either way they join with the invite's role. An invite may carry an
email address: whoever joins by it gets that address, unconfirmed — koruweb does not mail
invites, so the link may have reached them another way — and is mailed its confirmation link
(``web/invites.py``, docs/email.md). Unknown links count as
failures against the address, like wrong passwords on the login page (``activity/people/login.py``):
after ``LOGIN_FAILURE_LIMIT`` of them within ``LOGIN_LOCKOUT_SECONDS`` the address is refused
every invite link until the window ends.

The views are ``invite_views.py``.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from activity.models.accounts import Membership, Role, hash_token
from activity.models.invites import Invite, InviteState
from activity.people import limits, login

if TYPE_CHECKING:
    from activity.models import Workspace

INVITE_PREFIX = "inv_"
LIFETIMES = {1: "1 day", 7: "7 days", 30: "30 days"}  # days: what the form offers
DEFAULT_DAYS = 7


class Unusable(Exception):
    """The invite cannot be used (any more): the message says why, for the person."""


def issue(
    workspace: Workspace,
    role: Role,
    days: int,
    by: Any,
    note: str = "",
    email: str = "",
) -> tuple[Invite, str]:
    """A new invite; its secret is returned once and never stored."""
    plain = INVITE_PREFIX + secrets.token_urlsafe(32)
    invite = Invite.objects.create(
        workspace=workspace,
        role=role,
        note=note,
        email=email,
        digest=hash_token(plain),
        created_by=by,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return invite, plain


def find(plain: str) -> Invite | None:
    """The invite a link's secret names, in any state; None for an unknown one."""
    if not plain.startswith(INVITE_PREFIX):
        return None
    found = Invite.objects.select_related("workspace", "used_by").filter(digest=hash_token(plain))
    return found.first()


def membership(invite: Invite, user: Any) -> Membership | None:
    if not getattr(user, "is_authenticated", False):
        return None
    return Membership.objects.filter(workspace_id=invite.workspace_id, user_id=user.pk).first()


def redeem(invite_id: int, user: Any) -> Invite:
    """Use the invite for ``user``: they join its workspace with its role, and the link is
    spent. Locked, so two people opening one link at once cannot both join."""
    with transaction.atomic():
        invite = Invite.objects.select_for_update().select_related("workspace").get(pk=invite_id)
        if invite.state != InviteState.OPEN:
            raise Unusable(invite.why_not)
        found = membership(invite, user)
        if found is not None:
            raise Unusable(
                f"You are already a member of {invite.workspace} (as {found.role}); this link "
                "is left for someone else. An admin changes roles on the workspace's page."
            )
        Membership.objects.create(workspace=invite.workspace, user_id=user.pk, role=invite.role)
        invite.used_at, invite.used_by = timezone.now(), user
        invite.save(update_fields=["used_at", "used_by"])
    return invite


def revoke(invite: Invite) -> bool:
    """Withdraw an open invite; False if it was no longer open."""
    if invite.state != InviteState.OPEN:
        return False
    return bool(
        Invite.objects.filter(pk=invite.pk, used_at__isnull=True, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


# --- unknown links, limited per address like wrong passwords ---------------------------------


def _address(request: HttpRequest) -> str:
    address = str(request.META.get("REMOTE_ADDR") or "unknown")
    return "invite-failures:address:" + hashlib.sha256(address.encode()).hexdigest()


def locked_out(request: HttpRequest) -> bool:
    count = limits.shared(login.CACHE).get(_address(request)) or 0  # the login page's cache
    return bool(count >= settings.LOGIN_FAILURE_LIMIT)


def record_failure(request: HttpRequest) -> None:
    login.count_failure(_address(request))
