"""One "not found" page for everything a person may not see, whatever DEBUG says.

A run of a workspace someone is not a member of, and a run that does not exist, must look the
same (``access.visible_chats`` makes both a 404), so the page says "Not found, or not yours"
and nothing else: never Django's debug page, which would list the site's URLs and say what was
looked up. ``NotFoundMiddleware`` renders ``templates/404.html`` for every ``Http404`` a view
raises and for a path no URL matches; with DEBUG off Django's own handler renders the same
template. A request from htmx gets a one-line fragment instead of a whole page, since htmx
swaps an error response into its target.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.utils.html import format_html

from activity.web.requests import HtmxRequest

TEMPLATE = "404.html"
WORDS = "Not found, or not yours."


def not_found(request: HtmxRequest) -> HttpResponse:
    """The 404 a person sees: the plain page, or a fragment for htmx."""
    if request.htmx:
        return HttpResponse(format_html('<span class="refused">{}</span>', WORDS), status=404)
    response = render(request, TEMPLATE, status=404)
    response["Cache-Control"] = "no-store"
    return response


def page_not_found(request: HtmxRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: what Django calls with DEBUG off (the middleware comes first)."""
    return not_found(request)


class NotFoundMiddleware:
    """Put it after the authentication and htmx middleware, so the page knows who is logged in
    and whether htmx asked."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HtmxRequest) -> HttpResponseBase:
        response = self.get_response(request)
        # No URL matched (``resolver_match`` is set only once one did): with DEBUG on,
        # Django has already answered with its debug page, which lists every URL pattern.
        if response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            return not_found(request)
        return response

    def process_exception(self, request: HtmxRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return not_found(request)
        return None
