"""Reviewing past turns: the turn as it happened, permalinks, comments and exports."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods

from activity.core.contract import ToolApproval
from activity.models import AgentToken, Chat, InferenceAttempt, ToolActivity
from activity.people import access, limits
from activity.push import broadcast
from activity.review import filters, mentions, reads, reviews
from activity.review.transcript import chat_markdown, interleave
from activity.show import dom, timeline, timeline_reads
from activity.web.requests import HtmxRequest

TURN_PAGE_ROWS = 100  # a turn page's calls; the next are a page further (reads.LIVE_ROWS)


@require_GET
@login_required
def turn(request: HttpRequest, chat_id: uuid.UUID, attempt_id: uuid.UUID) -> HttpResponse:
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    attempt = get_object_or_404(
        InferenceAttempt.objects.select_related("reply"), pk=attempt_id, chat=chat
    )
    chosen = filters.CallFilter(request.GET)
    where = chosen.where() if chosen.active else None
    ordered = attempt.tool_activities.filter(where or Q()).order_by("position")
    page = Paginator(ordered, TURN_PAGE_ROWS).get_page(request.GET.get("page"))
    rows = reads.with_prompts(list(page.object_list))
    start = (rows[0].text_offset or 0) if rows and page.has_previous() else 0
    end = None
    if page.has_next():
        end = ordered.values_list("text_offset", flat=True)[page.end_index()] or 0
    markdown = attempt.reply.markdown
    kept = {k: str(request.GET[k]) for k in ("status", "kind", "q") if request.GET.get(k)}
    line = timeline.build(
        attempt,
        where,
        timeline_reads.waits_of(attempt),
        now=time.time_ns() // 1_000_000,
        window=(_ms(request.GET.get("from")), _ms(request.GET.get("to"))),
        query=kept,
    )
    counts = filters.facets(attempt.tool_activities.all(), chosen)
    failure, waiting = filters.jumps(chat.pk, chosen, rows, counts)
    context = {
        "chat": chat,
        "attempt": attempt,
        "facets": counts,
        "jump_failure": failure,
        "jump_waiting": waiting,
        "page": page,
        "segments": interleave(markdown, rows, start, end),
        "timeline": line,
        "chosen": chosen,
        "page_query": urlencode(
            {**kept, **{k: request.GET[k] for k in ("from", "to") if k in request.GET}}
        ),
        "can_answer": False,  # a review page shows decisions, it does not take answers
        "member_names": mentions.member_names(chat.workspace_id),
    }
    return render(request, "activity/review/turn.html", context)


def _ms(value: str | None) -> int | None:
    """A timeline window's edge (ms from the turn's start), or None when absent or not a number."""
    try:
        return max(int(value or ""), 0)
    except ValueError:
        return None


@require_GET
@login_required
def tool(request: HttpRequest, tool_id: uuid.UUID) -> HttpResponseRedirect:
    """A permalink to a row: its place on the chat page, or its page of a very long turn."""
    row = get_object_or_404(
        ToolActivity.objects.filter(chat__in=access.visible_chats(request.user)), pk=tool_id
    )
    before = ToolActivity.objects.filter(attempt=row.attempt_id, position__lt=row.position)
    after = ToolActivity.objects.filter(chat=row.chat_id, position__gt=row.position)
    if after.count() < reads.LIVE_ROWS or row.approval == ToolApproval.PENDING:
        return redirect(reverse("chat", args=[row.chat_id]) + f"#{dom.tool(row.pk)}")
    page = before.count() // TURN_PAGE_ROWS + 1
    url = reverse("turn", args=[row.chat_id, row.attempt_id])
    return redirect(f"{url}?page={page}#{dom.tool(row.pk)}")


@require_http_methods(["GET", "POST"])
@login_required
def comment(request: HtmxRequest, tool_id: uuid.UUID) -> HttpResponse:
    """POST adds a comment; GET shows the form on a page of its own (see views.answer). Past
    ``COMMENTS_PER_MINUTE`` of one person's, a comment is refused (429) with the limit."""
    row = get_object_or_404(
        ToolActivity.objects.filter(chat__in=access.visible_chats(request.user)).select_related(
            "chat"
        ),
        pk=tool_id,
    )
    if request.method == "GET":
        return render(request, "activity/review/comment.html", {"row": row})
    text = (request.POST.get("text") or "").strip()
    if not text:
        return _refused(request, "Write something first.", 400)
    if not limits.comment_allowed(request.user.pk):
        return _refused(request, limits.comment_wait_words(), 429)
    broadcast.announce_sync(mentions.add_comment(row, request.user, text))
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(reverse("chat", args=[row.chat_id]) + f"#{dom.tool(row.pk)}")


def _refused(request: HtmxRequest, words: str, status: int) -> HttpResponse:
    """A refused comment: said in the form's status (htmx), or as plain text."""
    if request.htmx:
        return HttpResponse(format_html('<span class="refused">{}</span>', words), status=status)
    return HttpResponse(words, status=status, content_type="text/plain")


def _chat_for_export(request: HttpRequest, chat_id: uuid.UUID) -> Chat | HttpResponse:
    """The chat, for a logged-in member or a runner token of its workspace (a run token a host
    was given: of its run's chat alone)."""
    authorization = request.headers.get("Authorization", "")
    if AgentToken.bearer(authorization) is not None:
        found = AgentToken.authenticate(authorization)
        if found is None:
            return JsonResponse({"error": "the token is not valid"}, status=401)
        chat = Chat.objects.filter(pk=chat_id, workspace=found.workspace_id).first()
        if found.chat_id is not None and found.chat_id != chat_id:
            chat = None  # a run's token reads its own run's chat alone
    elif request.user.is_authenticated:
        chat = access.visible_chats(request.user).filter(pk=chat_id).first()
    else:
        return JsonResponse({"error": "log in or send an agent token"}, status=401)
    return chat or JsonResponse({"error": "no such chat"}, status=404)


@require_GET
def tool_activity(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse | StreamingHttpResponse:
    """The contract's JSON: every row of the chat; ``live`` is null on a repository read.
    ``?with=review``: an object instead, ``{"review": …, "rows": [the same rows]}`` (the run's
    review and who it is assigned to, or null: docs/architecture.md#the-review-queue)."""
    chat = _chat_for_export(request, chat_id)
    if isinstance(chat, HttpResponse):
        return chat
    rows = chat.tool_activities.order_by("position")
    review = reviews.record(chat) if request.GET.get("with") == "review" else False

    def stream() -> Iterator[str]:
        yield "[" if review is False else '{"review": ' + json.dumps(review) + ', "rows": ['
        for n, row in enumerate(rows.iterator(chunk_size=500)):
            yield ("," if n else "") + json.dumps(row.to_record().to_json())
        yield "]" if review is False else "]}"

    return StreamingHttpResponse(stream(), content_type="application/json")


@require_GET
@login_required
def transcript(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    attempts = list(chat.attempts.select_related("reply").order_by("started_at", "created_version"))
    rows = reads.with_prompts(list(chat.tool_activities.order_by("position")))
    by_turn: dict[uuid.UUID, list[ToolActivity]] = {a.pk: [] for a in attempts}
    for row in rows:
        by_turn[row.attempt_id].append(row)
    turns = [(a, a.reply.markdown, by_turn[a.pk]) for a in attempts]
    text = chat_markdown(chat, turns, reviews.markdown(chat))
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="koruweb-{chat.pk}.md"'
    return response
