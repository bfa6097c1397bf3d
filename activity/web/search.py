from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from activity.review import search as searching

PER_PAGE = 20
MAX_PAGE = 500


@require_GET
@login_required
def search(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    page = _page(request.GET.get("page", ""))
    # One more than a page says whether there is a next page, without counting every hit.
    hits = searching.search(request.user, query, PER_PAGE + 1, (page - 1) * PER_PAGE)
    context = {
        "query": query,
        "searched": searching.terms(query) is not None,
        "wordless": bool(query.strip()) and searching.terms(query) is None,
        "hits": hits[:PER_PAGE],
        "page": page,
        "first": (page - 1) * PER_PAGE + 1,
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if len(hits) > PER_PAGE and page < MAX_PAGE else None,
    }
    return render(request, "activity/review/search.html", context)


def _page(value: str) -> int:
    return min(max(int(value), 1), MAX_PAGE) if value.isdecimal() and len(value) < 6 else 1
