"""The email section of the notifications page (``{% mail_section %}``): a person's addresses
and what koruweb mails them (activity/web/mail.py takes its forms; docs/email.md)."""

from __future__ import annotations

from typing import Any

from django import template

from activity.models import EmailAddress
from activity.notify import mailaddresses
from activity.notify.mailprefs import PrefsForm, prefs_of

register = template.Library()


@register.inclusion_tag("activity/people/mail_section.html", takes_context=True)
def mail_section(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    user_id = int(request.user.pk)
    prefs = prefs_of(user_id)
    return {
        "addresses": list(EmailAddress.objects.filter(user_id=user_id)),
        "prefs": prefs,
        "form": PrefsForm(instance=prefs),
        "most": mailaddresses.MOST,
        "csrf_token": context.get("csrf_token"),
        "messages": context.get("messages", []),
    }
