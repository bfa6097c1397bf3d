"""The login page, with a limit on wrong passwords per account and per address.

After ``LOGIN_FAILURE_LIMIT`` wrong passwords for one user name, or from one address, within
``LOGIN_LOCKOUT_SECONDS``, the form refuses every attempt for that name or from that address —
the right password included, so guessing gains nothing — with a message saying how long to wait
(HTTP 429). The count lives in the ``login_throttle`` cache (Redis when ``REDIS_URL`` is set, so
every process shares it) and ends ``LOGIN_LOCKOUT_SECONDS`` after the first failure; a
successful login clears its account's count, never its address's. ``force_login`` and the agent
tokens never pass through here.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from activity.people import limits

CACHE = limits.CACHE


def _key(kind: str, value: str) -> str:
    return limits.key(f"login-failures:{kind}", value)


def _keys(request: HttpRequest) -> list[str]:
    username = str(request.POST.get("username", "")).strip().casefold()
    address = str(request.META.get("REMOTE_ADDR") or "unknown")
    return [_key("account", username), _key("address", address)]


def locked_out(request: HttpRequest) -> bool:
    counts = limits.shared(CACHE).get_many(_keys(request))
    return any(count >= settings.LOGIN_FAILURE_LIMIT for count in counts.values())


def count_failure(key: str) -> None:
    """One more failure under ``key``, in the cache every process shares (``limits.count``):
    the count ends ``LOGIN_LOCKOUT_SECONDS`` after its first failure. The invite links count
    theirs here too (``invites.record_failure``)."""
    limits.count(key, settings.LOGIN_LOCKOUT_SECONDS)


def record_failure(request: HttpRequest) -> None:
    for key in _keys(request):
        count_failure(key)


def record_success(request: HttpRequest) -> None:
    limits.shared(CACHE).delete(_keys(request)[0])


def wait_words() -> str:
    minutes = max(1, -(-settings.LOGIN_LOCKOUT_SECONDS // 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


class LoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if locked_out(request):
            form = self.get_form()
            form.add_error(
                None,
                "Too many failed logins for this account or from this address. "
                f"Wait {wait_words()} and try again.",
            )
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            record_success(request)
        else:
            record_failure(request)
        return response
