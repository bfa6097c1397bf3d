"""Who may see and answer what: membership roles per workspace; superusers see everything."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from activity.models import Chat, Membership, Role

User = AbstractBaseUser | AnonymousUser
ANSWERING_ROLES = (Role.APPROVER, Role.ADMIN)


def visible_chats(user: User) -> QuerySet[Chat]:
    chats = Chat.objects.select_related("workspace", "current_attempt")
    if not user.is_authenticated:
        return chats.none()
    if getattr(user, "is_superuser", False):
        return chats
    return chats.filter(workspace__memberships__user_id=user.pk)


def role_in(user: User, workspace_id: uuid.UUID) -> Role | None:
    if not user.is_authenticated:
        return None
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    role = (
        Membership.objects.filter(user_id=user.pk, workspace_id=workspace_id)
        .values_list("role", flat=True)
        .first()
    )
    return Role(role) if role else None


def can_view(user: User, chat_id: uuid.UUID) -> bool:
    return visible_chats(user).filter(pk=chat_id).exists()


def can_answer(user: User, chat: Chat) -> bool:
    return role_in(user, chat.workspace_id) in ANSWERING_ROLES


def answerers(workspace_id: uuid.UUID) -> QuerySet[Any]:
    """The ids of the active people who may answer this workspace's prompts: its approvers and
    admins, and superusers."""
    members = Q(memberships__workspace_id=workspace_id, memberships__role__in=ANSWERING_ROLES)
    users = get_user_model().objects.filter(members | Q(is_superuser=True), is_active=True)
    return users.values_list("id", flat=True).distinct()


def answerable_chats(user: User) -> QuerySet[Chat]:
    """The chats whose prompts this user may answer."""
    chats = visible_chats(user)
    if getattr(user, "is_superuser", False) or not user.is_authenticated:
        return chats
    return chats.filter(
        workspace__memberships__user_id=user.pk,
        workspace__memberships__role__in=ANSWERING_ROLES,
    )


def answering_workspaces(user: User) -> list[uuid.UUID] | None:
    """The workspaces where this user may answer; None for a superuser (all of them)."""
    if getattr(user, "is_superuser", False):
        return None
    if not user.is_authenticated:
        return []
    return list(
        Membership.objects.filter(user_id=user.pk, role__in=ANSWERING_ROLES).values_list(
            "workspace_id", flat=True
        )
    )
