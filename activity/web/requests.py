"""The request a view gets: Django's, with ``request.htmx`` from django-htmx's middleware
(``HtmxMiddleware``, in settings): true when htmx sent it, so a view answers with a fragment."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    htmx: HtmxDetails
