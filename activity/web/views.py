from __future__ import annotations

import uuid

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods

from activity.core.refusals import Refusal
from activity.live import answers
from activity.models import Prompt, ReviewOutcome, Role, RunReview
from activity.notify import who
from activity.people import access
from activity.push import broadcast, watching
from activity.push import inbox as needs
from activity.review import filters, mentions, queue, reads, shares
from activity.review import runs as runs_list
from activity.show import dom
from activity.web.requests import HtmxRequest
from activity.wire.frames import WEB_PROMPT_CHARS


@require_GET
@login_required
def runs(request: HttpRequest) -> HttpResponse:
    visible = access.visible_chats(request.user)
    form = runs_list.RunFilter(request.GET or None, visible)
    chosen = form.apply(visible) if request.GET else visible
    page = Paginator(chosen.order_by("-created_at"), runs_list.PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    rows = needs.rows(list(page.object_list))
    query = request.GET.copy()
    query.pop("page", None)
    answer_in = access.answering_workspaces(request.user)  # where a waiting run needs *you*
    context = {"form": form, "page": page, "rows": rows, "query": query.urlencode()}
    context |= {"answer_in": answer_in or [], "answer_all": answer_in is None}
    return render(request, "activity/runs/runs.html", context)


@require_GET
@login_required
def chat(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    found = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    shown = reads.page(found, filters.CallFilter(request.GET))  # one version, every region
    context = {
        "chat": found,
        "turns": shown.turns,
        **shown.panel.context(),
        "turns_id": dom.TURNS,
        "version": shown.version,
        "quiet_ms": settings.PAGE_QUIET_MS,
        "watching": watching.on_page(found.pk, request.user),
        "can_answer": access.can_answer(request.user, found),
        "can_manage": access.role_in(request.user, found.workspace_id) == Role.ADMIN,
        "web_prompt_chars": WEB_PROMPT_CHARS,
        "member_names": mentions.member_names(found.workspace_id),
        "following": who.follows(int(request.user.pk or 0), found),
        "review": RunReview.objects.filter(chat=found).select_related("reviewed_by").first(),
        "outcomes": ReviewOutcome.choices,
        "assignees": queue.assignees(found),  # the review queue (review/queue.py)
    }
    if context["can_answer"]:
        taken = [a.user_id for a in context["assignees"]]
        context["assignable"] = queue.assignable(found).exclude(pk__in=taken)
        context["assign_full"] = len(taken) >= queue.MAX_ASSIGNEES
    if shares.may_share(request.user, found):
        context |= {"can_share": True, "share_lasts": shares.LASTS}
        context["share_links"] = shares.live_links(found).select_related("created_by")
    return render(request, "activity/runs/chat.html", context)


@require_GET
@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    prompts = reads.inbox(access.answerable_chats(request.user))
    mentioned, count = mentions.waiting_for(request.user), mentions.waiting_count(request.user)
    context = {"prompts": prompts, "mentions": mentioned, "mention_count": count}
    assigned, assigned_count = queue.waiting_for(request.user), queue.waiting_count(request.user)
    context |= {"assigned": assigned, "assigned_count": assigned_count}
    context |= {"waiting": len(prompts) + count + assigned_count, "can_answer": True}
    return render(request, "activity/people/inbox.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def answer(request: HtmxRequest, prompt_id: uuid.UUID) -> HttpResponse:
    """POST answers a prompt; GET shows its form on a page of its own (with a CSRF token: a
    form that arrived in a push, rendered once for every viewer, links here)."""
    prompt = get_object_or_404(
        Prompt.objects.select_related("chat", "chat__workspace", "answered_by"),
        pk=prompt_id,
        chat__in=access.visible_chats(request.user),
    )
    if request.method == "GET":
        return render(request, "activity/runs/prompt.html", {"prompt": prompt})
    try:
        decision = answer_as(request, prompt)
    except Refusal as refusal:
        if not request.htmx:
            return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
        return HttpResponse(
            format_html('<span class="refused">{}</span>', str(refusal)), status=refusal.status
        )
    if not request.htmx:
        return redirect("chat", prompt.chat_id)
    return HttpResponse(format_html('<span class="sent">{}</span>', f"{decision}: sent."))


def answer_as(request: HttpRequest, prompt: Prompt) -> str:
    """Answer ``prompt`` as the request's person, with what it posted (the rules every answer
    keeps: the role, the choices offered, the first answer wins); the runner and every page are
    told. The decision as a person reads it; a ``Refusal`` when it may not be."""
    if access.role_in(request.user, prompt.chat.workspace_id) not in access.ANSWERING_ROLES:
        raise Refusal(
            f"You may watch this run, but only an {Role.APPROVER} or an {Role.ADMIN} "
            "of its workspace may answer.",
            403,
        )
    told, decision = answers.parse(prompt, request.POST)
    recorded = answers.record(prompt.pk, request.user, decision, told, source(request))  # type: ignore[arg-type]
    async_to_sync(answers.send_answer)(recorded.change.chat_id, recorded.request_id, told)
    broadcast.announce_sync(recorded.change)
    return decision


def source(request: HttpRequest) -> str:
    """Where an answer came from: the browser's address and a short user agent."""
    agent = request.headers.get("User-Agent", "")[:120]
    return f"{request.META.get('REMOTE_ADDR', '?')} · {agent}"
