"""``{% saved_views "runs" query %}`` (or ``"calls" query chat``, ``"search" query``): the views
of that page someone may open, and a form that keeps the filter the page shows
(activity/review/saved.py)."""

from __future__ import annotations

from typing import Any

from django import template

from activity.models import Chat, Workspace
from activity.review import saved

register = template.Library()


@register.inclusion_tag("activity/review/saved_views.html", takes_context=True)
def saved_views(
    context: dict[str, Any], kind: str, query: str, chat: Chat | None = None
) -> dict[str, Any]:
    request = context["request"]
    user = request.user
    if chat is not None:
        spaces = [chat.workspace]
    elif getattr(user, "is_superuser", False):
        spaces = list(Workspace.objects.all())
    else:
        spaces = list(Workspace.objects.filter(memberships__user_id=user.pk).order_by("name"))
    return {
        "views": saved.listed(user, kind, chat),
        "kind": kind,
        "query": saved.canonical(kind, query),
        "chat": chat,
        "spaces": spaces,
        "me": user.pk,
        "here": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }
