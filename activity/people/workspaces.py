"""Looking after a workspace's members and runs: roles, the last admin kept, deleting a run.
The pages are ``activity/web/workspaces.py``; a refusal is an ``Invalid`` with its reason."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import Http404

from activity.models import Chat, Membership, Role, Workspace
from activity.people import access


class Invalid(Exception):
    """Bad input: the page says why, and nothing was changed."""


def roles(user: access.User) -> list[tuple[Workspace, Role]]:
    """The user's workspaces and their role in each; a superuser is admin of all of them."""
    if getattr(user, "is_superuser", False):
        return [(w, Role.ADMIN) for w in Workspace.objects.all()]
    if not user.is_authenticated:
        return []
    memberships = Membership.objects.filter(user_id=user.pk).select_related("workspace")
    return [(m.workspace, Role(m.role)) for m in memberships.order_by("workspace__name")]


def parse_role(value: str) -> Role:
    if value not in Role.values:
        raise Invalid(f"“{value}” is not a role: pick viewer, approver or admin.")
    return Role(value)


def find_user(username: str) -> AbstractBaseUser:
    if not username:
        raise Invalid("Give the username of the person to add.")
    model = get_user_model()
    try:
        return model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise Invalid(f"There is no user named “{username}”: they need an account first.") from None


@contextlib.contextmanager
def locked(workspace: Workspace) -> Iterator[None]:
    """Changes to one workspace's members go one at a time, so two admins demoting each
    other at once cannot leave it without an admin."""
    with transaction.atomic():
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
        yield


def keep_an_admin(workspace: Workspace, member: Membership, action: str) -> None:
    if member.role != Role.ADMIN:
        return
    if not workspace.memberships.filter(role=Role.ADMIN).exclude(pk=member.pk).exists():
        raise Invalid(
            f"{member.user} is the last admin of {workspace}, so you cannot {action} them: "
            "make someone else an admin first."
        )


def delete(chat_id: uuid.UUID) -> None:
    """Delete a chat and everything under it (turns, replies, tool rows, prompts).

    A chat whose runner is connected is kept: the runner's next frame would find it gone,
    and its reconnect would start an empty chat under the same id.
    """
    with transaction.atomic():
        chat = Chat.objects.select_for_update().filter(pk=chat_id).first()
        if chat is None:
            raise Http404("This run was already deleted.")
        if chat.runner_connected:
            raise Invalid(
                "Its runner is still connected: stop the runner (Ctrl-C where it runs), "
                "then delete the run."
            )
        chat.delete()
