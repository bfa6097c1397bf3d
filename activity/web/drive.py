"""Driving a run from its page: send a message, edit or remove a queued one, cancel the
running turn, switch the agent's mode (``drive.py``), resume or stop a run a host started
(``resume.py``). Every one is a POST (CSRF), for an
approver or an admin of the chat's workspace (or a superuser); anyone else who can see the
chat gets 403, anyone who cannot 404, and nothing changes. A queued message is its author's:
only they edit it, only they or an admin remove it (403 for anyone else)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from activity.core.refusals import Refusal
from activity.live import drive, resume
from activity.models import Chat, Role
from activity.people import access
from activity.push import broadcast
from activity.push import inbox as needs
from activity.review import queue, reviews
from activity.web.requests import HtmxRequest

Action = Callable[[Chat, User], drive.Done]


def act(request: HtmxRequest, chat_id: uuid.UUID, action: Action) -> HttpResponse:
    """Check who asks, do it, tell the runner and every viewer, answer the person."""
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    try:
        if not access.can_answer(request.user, chat):
            raise Refusal(
                f"You may watch this run, but only an {Role.APPROVER} or an {Role.ADMIN} "
                "of its workspace may drive it.",
                403,
            )
        done = action(chat, request.user)  # type: ignore[arg-type]
    except Refusal as refusal:
        return said(request, str(refusal), "refused", refusal.status)
    async_to_sync(drive.deliver)(chat.pk, done.frames)
    broadcast.announce_sync(done.change)
    if not request.htmx:
        return redirect("chat", chat.pk)
    return said(request, done.said, "sent")


def said(request: HtmxRequest, words: str, kind: str, status: int = 200) -> HttpResponse:
    if not request.htmx:
        return HttpResponse(words, status=status, content_type="text/plain")
    return HttpResponse(format_html('<span class="{}">{}</span>', kind, words), status=status)


@require_POST
@login_required
def send(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    text = request.POST.get("text", "")
    return act(request, chat_id, lambda chat, user: drive.send(chat.pk, user, text))


@require_POST
@login_required
def edit(request: HtmxRequest, chat_id: uuid.UUID, prompt_id: uuid.UUID) -> HttpResponse:
    text = request.POST.get("text", "")
    return act(request, chat_id, lambda chat, user: drive.edit(chat.pk, prompt_id, user, text))


@require_POST
@login_required
def remove(request: HtmxRequest, chat_id: uuid.UUID, prompt_id: uuid.UUID) -> HttpResponse:
    def remove_it(chat: Chat, user: User) -> drive.Done:
        manages = access.role_in(user, chat.workspace_id) == Role.ADMIN
        return drive.remove(chat.pk, prompt_id, user, manages)

    return act(request, chat_id, remove_it)


@require_POST
@login_required
def cancel(request: HtmxRequest, chat_id: uuid.UUID, attempt_id: uuid.UUID) -> HttpResponse:
    return act(request, chat_id, lambda chat, user: drive.cancel(chat.pk, attempt_id, user))


@require_POST
@login_required
def mode(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    chosen = request.POST.get("mode", "")
    return act(request, chat_id, lambda chat, user: drive.switch_mode(chat.pk, chosen, user))


@require_POST
@login_required
def resume_run(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    """*Resume*: the run's host takes its agent session up again (``resume.resume``)."""
    return act(request, chat_id, lambda chat, user: resume.resume(chat.pk, user))


@require_POST
@login_required
def stop_run(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    """*Stop*: the run's runner ends the run and exits (``resume.stop``)."""
    return act(request, chat_id, lambda chat, user: resume.stop(chat.pk, user))


@require_POST
@login_required
def review_run(request: HtmxRequest, chat_id: uuid.UUID) -> HttpResponse:
    """Ask for the run's review, or give it (``reviews.py``); back to the run's page."""
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    user = request.user
    try:
        if request.POST.get("action") == "request":
            reviews.request(chat, user)  # type: ignore[arg-type]
        else:
            outcome, note = request.POST.get("outcome", ""), request.POST.get("note", "")
            reviews.give(chat, user, outcome, note)  # type: ignore[arg-type]
    except Refusal as refusal:
        return said(request, str(refusal), "refused", refusal.status)
    needs.tell_mentions_sync(queue.assignee_ids(chat))  # in their inboxes, or no longer
    return redirect("chat", chat.pk)
