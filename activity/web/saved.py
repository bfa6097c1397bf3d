"""Saved views' addresses (activity/review/saved.py): ``/views/<id>/`` opens one, ``/views/save``
keeps the filter a page shows, ``/views/<id>/delete`` forgets one. POSTs need the CSRF token;
a view someone may not see is a 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from activity.core.refusals import Refusal
from activity.review import saved


@require_GET
@login_required
def open_view(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(saved.visible(request.user), pk=view_id)
    return redirect(saved.target(view))


@require_POST
@login_required
def save(request: HttpRequest) -> HttpResponse:
    try:
        view = saved.save(request.user, {k: str(v) for k, v in request.POST.items()})
    except Refusal as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    return redirect("open-view", view.pk)


@require_POST
@login_required
def delete(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(saved.visible(request.user), pk=view_id)
    try:
        saved.delete(request.user, view)
    except Refusal as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, {request.get_host()}) and back.startswith("/")
    return redirect(back if safe else "runs")
