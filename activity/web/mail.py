"""Email (docs/email.md): a person's addresses and what koruweb mails them, on their
notifications page (the section is ``templatetags/mailsettings.py``'s); the confirmation link an
address is sent; the unsubscribe link every mail carries.

- ``add``, ``resend``, ``remove`` (POST, logged in): an address, its confirmation link again,
  or one removed. ``prefs`` (POST): what to mail; ``turn_on`` (POST): mail again after an
  unsubscribe. Each goes back to the notifications page with a message.
- ``confirm`` (logged in as the account that has the address): GET shows the address and a
  button, POST confirms it (a link a mail scanner fetches confirms nothing). The link proves the
  mailbox, the login that the account wants it: an invite adds the address its inviter typed,
  who must not confirm it alone and then reset the account's password through it. Refused
  when another person is logged in; logged out, the login page comes first.
- ``unsubscribe`` (no login, no CSRF token: the signed token stands in for it): GET shows one
  button, POST — the button, or a mail client's one-click POST (RFC 8058) — turns all mail off.
"""

from __future__ import annotations

import asyncio
import contextvars

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from activity.models import MailPrefs
from activity.notify import mailaddresses, mailsays, worker
from activity.notify.mailaddresses import Refused
from activity.notify.mailprefs import PrefsForm, prefs_of

PAGE = "activity/people/mail.html"


async def _start_notifier() -> None:
    # In a context of its own: a task made in this request's would keep its sync thread's
    # executor, gone once the request ends, and fail every database call after it.
    asyncio.get_running_loop().call_soon(worker.ensure_running, context=contextvars.Context())


def wake(request: HttpRequest) -> None:
    """Under Daphne, make sure this process's notifier runs: a mail a request queues goes out
    within ``NOTIFY_POLL_MS`` even where no page's socket has started it yet."""
    if isinstance(request, ASGIRequest):
        async_to_sync(_start_notifier)()


def back(anchor: str = "email") -> HttpResponse:
    return redirect(f"{reverse('notifications')}#{anchor}")


@require_POST
@login_required
def add(request: HttpRequest) -> HttpResponse:
    try:
        address = mailaddresses.add(request.user, request.POST.get("email", ""))
    except Refused as refused:
        messages.error(request, str(refused))
        return back()
    wake(request)
    messages.success(request, f"A confirmation link is on its way to {address.email}.")
    return back()


@require_POST
@login_required
def resend(request: HttpRequest, address_id: int) -> HttpResponse:
    address = request.user.email_addresses.filter(pk=address_id).first()  # type: ignore[union-attr]
    try:
        if address is None:
            raise Refused("That address is not one of yours.")
        mailaddresses.send_link(address)
    except Refused as refused:
        messages.error(request, str(refused))
        return back()
    wake(request)
    messages.success(request, f"A new confirmation link is on its way to {address.email}.")
    return back()


@require_POST
@login_required
def remove(request: HttpRequest, address_id: int) -> HttpResponse:
    try:
        email = mailaddresses.remove(request.user, address_id)
    except Refused as refused:
        messages.error(request, str(refused))
        return back()
    messages.success(request, f"Removed {email}: koruweb mails it nothing more.")
    return back()


@require_POST
@login_required
def prefs(request: HttpRequest) -> HttpResponse:
    assert request.user.pk is not None
    form = PrefsForm(request.POST, instance=prefs_of(int(request.user.pk)))
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, str(error))
        return back()
    form.save()
    messages.success(request, "Saved what koruweb mails you.")
    return back()


@require_POST
@login_required
def turn_on(request: HttpRequest) -> HttpResponse:
    MailPrefs.objects.filter(user_id=int(request.user.pk or 0)).update(unsubscribed_at=None)
    messages.success(request, "Mail is on again, as you set it below.")
    return back()


@require_http_methods(["GET", "POST"])
def confirm(request: HttpRequest, token: str) -> HttpResponse:
    if not request.user.is_authenticated:  # the mailbox alone does not speak for the account
        return redirect_to_login(request.get_full_path())
    address = mailaddresses.find(token)
    if address is None:
        words = "This confirmation link is not valid, or was used already."
        return page(request, "refused", status=404, words=words)
    if request.user.pk != address.user_id:
        words = (
            "This link confirms an address of another account than the one you are logged "
            "in as: log out, or log in as that account, and open it again."
        )
        return page(request, "refused", status=403, words=words)
    if mailaddresses.expired(address):
        words = "This confirmation link has expired: send a new one from your notifications page."
        return page(request, "refused", status=410, words=words)
    if request.method == "GET":
        return page(request, "confirm", email=address.email)
    if not mailaddresses.confirm(address, token):
        words = "This confirmation link is not valid, or was used already."
        return page(request, "refused", status=404, words=words)
    return page(request, "confirmed", email=address.email)


@csrf_exempt  # the signed token is the proof, and a mail client's one-click POST has no other
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    user_id = mailsays.read_unsubscribe(token)
    if user_id is None or not get_user_model().objects.filter(pk=user_id).exists():
        words = "This unsubscribe link is not valid: check that it was copied whole."
        return page(request, "refused", status=404, words=words)
    if request.method == "GET":
        return page(request, "unsubscribe")
    MailPrefs.objects.update_or_create(
        user_id=user_id, defaults={"unsubscribed_at": timezone.now()}
    )
    return page(request, "unsubscribed")


def page(request: HttpRequest, state: str, *, status: int = 200, **context: object) -> HttpResponse:
    response = render(request, PAGE, {"state": state, **context}, status=status)
    add_never_cache_headers(response)
    response["Referrer-Policy"] = "no-referrer"  # the address holds a token
    # Django logs a refusal's (4xx) address, and this address holds a token: never logged.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response
