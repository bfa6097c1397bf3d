"""The stylesheet of highlighted code (``activity/show/highlight.py``), served from a URL of
its own."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import condition, require_GET

from activity.show import highlight

YEAR = 365 * 24 * 3600


@require_GET
@condition(etag_func=lambda request: highlight.version())
def highlight_css(request: HttpRequest) -> HttpResponse:
    """Pages ask for it as ``?v=<version>``: that URL never changes content, so it is kept a
    year; any other (an old page's) is kept an hour and checked by its ETag."""
    response = HttpResponse(highlight.stylesheet(), content_type="text/css; charset=utf-8")
    current = request.GET.get("v") == highlight.version()
    response["Cache-Control"] = (
        f"public, max-age={YEAR}, immutable" if current else "public, max-age=3600"
    )
    return response
