"""The review queue's addresses (activity/review/queue.py): ``/reviews/`` is the queue page;
``/chats/<id>/review/assign`` and ``…/unassign`` (POST, CSRF) ask a member to review the run or
no longer, for the run's approvers and admins (viewers 403, outsiders 404); ``/reviews/
assignments/<id>/`` opens the run from the inbox (the assignment leaves it)."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from activity.core.refusals import Refusal
from activity.people import access
from activity.push import inbox as needs
from activity.review import queue
from activity.web.drive import said
from activity.web.requests import HtmxRequest


@require_GET
@login_required
def queue_page(request: HttpRequest) -> HttpResponse:
    context = {"queue": queue.queue(request.user), "listed": queue.LISTED}
    context["days"] = queue.PROGRESS_DAYS
    return render(request, "activity/review/queue.html", context)


def _user_id(request: HttpRequest) -> int:
    try:
        return int(request.POST.get("user", ""))
    except ValueError:
        raise Refusal("Choose whom to assign.", 400) from None


def _back(chat_id: uuid.UUID) -> HttpResponse:
    return redirect(reverse("chat", args=[chat_id]) + "#review-title")


@require_POST
@login_required
def assign(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    """Ask a member to review the run (and for a review, if none is open); they are told."""
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    try:
        found = queue.assign(chat, request.user, _user_id(request))  # type: ignore[arg-type]
    except Refusal as refusal:
        return said(request, str(refusal), "refused", refusal.status)
    needs.tell_mentions_sync([found.user_id])
    return _back(chat.pk)


@require_POST
@login_required
def unassign(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    try:
        user_id = _user_id(request)
        queue.unassign(chat, request.user, user_id)  # type: ignore[arg-type]
    except Refusal as refusal:
        return said(request, str(refusal), "refused", refusal.status)
    needs.tell_mentions_sync([user_id])
    return _back(chat.pk)


@require_GET
@login_required
def open_assignment(request: HttpRequest, assignment_id: int) -> HttpResponse:
    """Go to the run; the assignment leaves the inbox, unless another site sent the browser
    here (as a mention's link: web/mentions.py)."""
    if request.headers.get("Sec-Fetch-Site", "none") in ("same-origin", "none"):
        found = queue.mark_seen(assignment_id, request.user)
        if found is not None:
            needs.tell_mentions_sync([found.user_id])
    else:
        found = queue.own(assignment_id, request.user)
    if found is None:
        raise Http404("no such assignment")
    return _back(found.review.chat_id)
