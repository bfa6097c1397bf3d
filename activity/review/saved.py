"""Saved views (issue 30): a filter of the runs list, of one run's calls, or a search, kept under
a name, private to its owner or shared with a workspace's members, opened at a stable address
(``/views/<id>/``, web/saved.py).

A view keeps only the query keys its page reads, in a fixed order, so what is kept is exactly a
filter: nothing else of the address it was saved from. Who sees a view: its owner; for a shared
one, the members of its workspace (and superusers). A view of one run's calls opens only for
someone who may see that run. Its owner, or an admin of its workspace, deletes it.
"""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl, urlencode

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.urls import reverse

from activity.core.refusals import Refusal
from activity.models import Chat, Membership, Role, SavedView, ViewKind, Workspace
from activity.people import access

User = AbstractBaseUser | AnonymousUser
KEYS: dict[str, tuple[str, ...]] = {
    ViewKind.RUNS: (
        "workspace",
        "agent",
        "status",
        "since",
        "until",
        "waiting",
        "failures",
        "denied",
    ),
    ViewKind.CALLS: ("status", "kind", "q"),
    ViewKind.SEARCH: ("q", "workspace", "agent", "status", "kind", "since", "until", "sort"),
}
NAME_CHARS, QUERY_CHARS, VIEWS_PER_PERSON = 100, 2000, 200


def canonical(kind: str, query: str) -> str:
    """``query`` with only the keys a page of ``kind`` reads, each once, in a fixed order."""
    given = dict(parse_qsl(query, keep_blank_values=False))
    return urlencode([(key, given[key]) for key in KEYS[kind] if given.get(key)])


def visible(user: User) -> QuerySet[SavedView]:
    views = SavedView.objects.select_related("owner", "workspace", "chat")
    if not user.is_authenticated:
        return views.none()
    if getattr(user, "is_superuser", False):
        return views.filter(Q(owner_id=user.pk) | Q(shared=True))
    mine = Membership.objects.filter(user_id=user.pk).values("workspace_id")
    return views.filter(Q(owner_id=user.pk) | Q(shared=True, workspace_id__in=mine))


def listed(user: User, kind: str, chat: Chat | None = None) -> list[SavedView]:
    """The views of ``kind`` someone sees on its page (of ``chat``'s calls, for a run)."""
    views = visible(user).filter(kind=kind)
    return list(views.filter(chat=chat) if chat is not None else views)


def target(view: SavedView) -> str:
    """The address a view opens."""
    if view.kind == ViewKind.CALLS and view.chat_id is not None:
        path = reverse("chat", args=[view.chat_id])
    else:
        path = reverse("search" if view.kind == ViewKind.SEARCH else "runs")
    return f"{path}?{view.query}" if view.query else path


def save(user: User, fields: dict[str, str]) -> SavedView:
    """A new view of what ``fields`` say (kind, query, name, share: a workspace's slug or "",
    chat for a run's calls); raises ``Refusal`` in words, having saved nothing."""
    kind = fields.get("kind", "")
    if kind not in KEYS:
        raise Refusal("Save a view of the runs, of a run's calls, or of a search.", 400)
    name = fields.get("name", "").strip()
    if not name or len(name) > NAME_CHARS or "\x00" in name:
        raise Refusal(f"Name the view: 1 to {NAME_CHARS} characters.", 400)
    query = canonical(kind, fields.get("query", ""))
    if len(query) > QUERY_CHARS:
        raise Refusal(f"That filter is too long to keep (over {QUERY_CHARS:,} characters).", 400)
    chat = None
    if kind == ViewKind.CALLS:
        chat_id = _uuid(fields.get("chat", ""))
        chat = access.visible_chats(user).filter(pk=chat_id).first() if chat_id else None
        if chat is None:
            raise Refusal("That run is not one you may see.", 404)
    workspace = _workspace(user, fields.get("share", ""), chat)
    owner = user.pk
    if owner is None:
        raise Refusal("Log in to save a view.", 401)
    if SavedView.objects.filter(owner_id=owner).count() >= VIEWS_PER_PERSON:
        raise Refusal(f"You have {VIEWS_PER_PERSON} saved views: delete one first.", 409)
    return SavedView.objects.create(
        owner_id=owner,
        workspace=workspace or (chat.workspace if chat else None),
        chat=chat,
        name=name,
        kind=kind,
        query=query,
        shared=workspace is not None,
    )


def delete(user: User, view: SavedView) -> None:
    admin = view.workspace_id is not None and access.role_in(user, view.workspace_id) == Role.ADMIN
    if view.owner_id != user.pk and not admin:
        raise Refusal("Only its owner or an admin of its workspace deletes a saved view.", 403)
    view.delete()


def _workspace(user: User, slug: str, chat: Chat | None) -> Workspace | None:
    """The workspace a view is shared with ("": private); a run's calls share with its own."""
    if not slug:
        return None
    found = Workspace.objects.filter(slug=slug).first()
    if found is None or access.role_in(user, found.pk) is None:
        raise Refusal("Share it with a workspace you are a member of.", 403)
    if chat is not None and chat.workspace_id != found.pk:
        raise Refusal("A view of a run's calls is shared with the run's own workspace.", 400)
    return found


def _uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None
