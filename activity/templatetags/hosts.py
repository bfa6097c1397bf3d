"""``{% new_run_link %}``: the header's *New run* link, for whoever may start a run now."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from activity.models.accounts import AgentHost
from activity.people import access

register = template.Library()


def can_start_runs(user: Any) -> bool:
    """An approver or admin of a workspace with an online host (a superuser: any host)."""
    if not getattr(user, "is_authenticated", False):
        return False
    online = AgentHost.objects.online()
    if not user.is_superuser:
        online = online.filter(
            workspace__memberships__user_id=user.pk,
            workspace__memberships__role__in=access.ANSWERING_ROLES,
        )
    return online.exists()


@register.simple_tag(takes_context=True)
def new_run_link(context: template.Context) -> SafeString:
    if not can_start_runs(context.get("user")):
        return SafeString("")
    return format_html('<a href="{}" id="new-run-link">New run</a>', reverse("new-run"))
