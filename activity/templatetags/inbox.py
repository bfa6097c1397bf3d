"""``{% inbox_link %}``: the header's *Inbox* link with the count of what waits for this person
(``needs.py``): the prompts they may answer, the comments that mention them and the runs they
are asked to review; needs.js keeps it, and the tab title, live."""

from __future__ import annotations

import json

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from activity.push import inbox as needs

register = template.Library()


@register.simple_tag(takes_context=True)
def inbox_link(context: template.Context) -> SafeString:
    user = context.get("user")
    if not getattr(user, "is_authenticated", False):
        return SafeString("")
    said = needs.counts(user)
    total = sum(said["counts"].values()) + said["mentions"] + said["reviews"]
    return format_html(
        '<a href="{}" id="inbox-link" class="inbox-link" data-counts="{}" data-all="{}"'
        ' data-mentions="{}" data-reviews="{}">Inbox'
        '<span class="needs-count" id="needs-count" aria-hidden="true"{}>{}</span>'
        '<span class="visually-hidden" id="needs-words">{}</span></a>',
        reverse("inbox"),
        json.dumps(said["counts"]),
        "true" if said["all"] else "false",
        said["mentions"],
        said["reviews"],
        "" if total else SafeString(" hidden"),
        total,
        f", {total} waiting for you" if total else "",
    )
