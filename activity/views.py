from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from activity.models import Chat


@require_GET
@login_required
def runs(request: HttpRequest) -> HttpResponse:
    chats = Chat.objects.select_related("workspace").order_by("-created_at")[:100]
    return render(request, "activity/runs.html", {"chats": chats})
