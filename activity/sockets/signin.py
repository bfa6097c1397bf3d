"""Who a browser's socket belongs to: the person its session cookie signs in, read once as it
opens, the way Django reads it for a request (``auth.get_user``).

Channels' ``AuthMiddlewareStack`` (cookies, then the session, then the user, each a middleware
holding its own copy of the scope for as long as the socket lives) kept ~3 KiB per open page;
a socket needs only its person and its session's key (``revoke.py`` watches that session), so
this one middleware puts exactly those in the scope: ``user`` (``AnonymousUser`` without a
valid session) and ``session_key`` ("" without one). bench/README.md, "Memory per idle viewer".
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.http.cookie import parse_cookie

from activity.sockets.origins import ASGIApp, Scope, header


def cookie(scope: Scope, name: str) -> str:
    """The value of cookie ``name`` the socket's request carried ("" if none), parsed as Django
    parses a request's (leniently: another site's odd cookie on the same host loses only
    itself)."""
    return parse_cookie(header(scope, b"cookie") or "").get(name, "")


def person(key: str) -> AbstractBaseUser | AnonymousUser:
    """Who session ``key`` signs in, as Django decides it for a request: the session is in
    the store and unexpired, its user exists, is active, and has the password the session was
    made with; anyone else is anonymous."""
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(key or None)
    return auth.get_user(request)


class SignedIn:
    """Wraps a browser socket's consumer, inside ``URLRouter``: its scope gets ``user`` and
    ``session_key``."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        key = cookie(scope, settings.SESSION_COOKIE_NAME)
        user = await database_sync_to_async(person)(key)
        # Written into the scope it is given, not a copy: ``URLRouter`` hands each route a
        # scope of its own (a copy kept for the socket's life is ~0.5 KiB an open page).
        scope["user"] = user
        scope["session_key"] = key if user.is_authenticated else ""
        return await self.application(scope, receive, send)
