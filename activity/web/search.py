"""The search page: the runs whose calls or replies hold the words, grouped by run
(activity/review/search.py, activity/review/grouped.py), filtered by a GET form whose URL
is the search."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from activity.people import access
from activity.review import grouped
from activity.review import search as searching

RUN_FILTERS = ("workspace", "agent", "status", "since", "until")  # the runs list's own names


@require_GET
@login_required
def search(request: HttpRequest) -> HttpResponse:
    form = grouped.SearchForm(request.GET, access.visible_chats(request.user))
    page = _page(request.GET.get("page", ""))
    results = grouped.grouped(request.user, form, page)
    words = searching.terms(form.query)
    context = {
        "form": form,
        "query": form.query,
        "results": results,
        "searched": words is not None,
        "wordless": bool(form.query.strip()) and words is None,
        "shortened": searching.shortened(form.query),
        "max_terms": searching.MAX_TERMS,
        "max_term_chars": searching.MAX_TERM_CHARS,
        "max_query_chars": searching.MAX_QUERY_CHARS,
        "previous_page": page - 1,
        "next_page": page + 1,
        "words_only": urlencode({"q": form.query}),
        "runs_query": urlencode({k: request.GET[k] for k in RUN_FILTERS if request.GET.get(k)}),
    }
    return render(request, "activity/review/search.html", context)


def _page(value: str) -> int:
    return min(max(int(value), 1), grouped.MAX_PAGE) if value.isdecimal() and len(value) < 6 else 1
