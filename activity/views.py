from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from activity import access, reads


@require_GET
@login_required
def runs(request: HttpRequest) -> HttpResponse:
    chats = access.visible_chats(request.user).order_by("-created_at")[:200]
    return render(request, "activity/runs.html", {"chats": chats})


@require_GET
@login_required
def chat(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    found = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    version, turns = reads.page(found)
    return render(
        request, "activity/chat.html", {"chat": found, "turns": turns, "version": version}
    )
