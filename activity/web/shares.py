"""Share links' addresses (activity/review/shares.py; docs/architecture.md#share-links):
``/s/<token>/`` shows the run to anyone who holds the link, ``/chats/<id>/share`` makes one and
``/shares/<id>/revoke`` revokes one (POSTs with the CSRF token, by who may share the run; a run
someone may not see is a 404). A shared page sends no referrer, is not indexed and is never
cached; a link that is not live is a 404 that says so and names nothing."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from activity.core.refusals import Refusal
from activity.models import ShareLink
from activity.people import access
from activity.review import filters, reads, shares
from activity.show import dom

PAGE = "activity/review/shared.html"
MADE = "activity/review/share_made.html"
GONE = "activity/review/share_gone.html"


def private(response: HttpResponse) -> HttpResponse:
    """What every page of a link sends: no referrer (a reply's link must not carry the token
    away), not indexed, not cached."""
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    add_never_cache_headers(response)
    return response


@require_GET
def shared(request: HttpRequest, token: str) -> HttpResponse:
    link = shares.find(token)
    if link is None:
        return private(render(request, GONE, status=404))
    shares.opened(link)
    chat = link.chat
    shown = reads.page(chat, filters.CallFilter({}))
    context = {
        "chat": chat,
        "link": link,
        "token": token,
        "turns": shown.turns,
        "turns_id": dom.TURNS,
        "version": shown.version,
        "quiet_ms": settings.PAGE_QUIET_MS,
        "shared": True,
    }
    return private(render(request, PAGE, context))


@require_POST
@login_required
def make(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    try:
        hours = int(request.POST.get("hours", ""))
    except ValueError:
        hours = 0
    try:
        made = shares.make(chat, request.user, hours)  # type: ignore[arg-type]
    except Refusal as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    url = request.build_absolute_uri(f"/s/{made.token}/")
    context = {"chat": chat, "link": made.link, "url": url, "lasts": shares.LASTS[hours]}
    return private(render(request, MADE, context))


@require_POST
@login_required
def revoke(request: HttpRequest, link_id: int) -> HttpResponse:
    visible = access.visible_chats(request.user)
    link = get_object_or_404(
        ShareLink.objects.select_related("chat__workspace"), pk=link_id, chat__in=visible
    )
    try:
        shares.revoke(link, request.user)  # type: ignore[arg-type]
    except Refusal as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, {request.get_host()}) and back.startswith("/")
    return redirect(back if safe else "chat", *([] if safe else [link.chat_id]))
