"""Password reset by email (Django's views, docs/email.md): a person asks at
``/accounts/password-reset/`` with an address, and each active account that confirmed it is
mailed a one-time link (``PASSWORD_RESET_TIMEOUT``) naming the account — two accounts that
confirmed one address get one mail each, so the person picks the right one. An unknown or
unconfirmed address gets the same page and no mail; the mail is queued, not sent in the
request (``mailowed``), so the answer takes as long either way. Requests are limited per
address asked for and per client address (``PASSWORD_RESETS_PER_ADDRESS``,
``PASSWORD_RESETS_PER_CLIENT`` an hour), like wrong passwords on the login page; past either,
429 whatever the address. The reset link's token is never logged (Django moves it from the
address into the session at once)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import reverse

from activity.models import EmailAddress
from activity.notify import mailowed, mailsays
from activity.people import limits
from activity.web.mail import wake

WINDOW = 3600


class ResetForm(PasswordResetForm):
    """Django's form, matching confirmed addresses (``EmailAddress``), never ``User.email``,
    and queueing its mail for the notifier rather than sending it in the request."""

    def get_users(self, email: str) -> Iterator[Any]:
        confirmed = EmailAddress.objects.filter(email__iexact=email, confirmed_at__isnull=False)
        people = get_user_model().objects.filter(pk__in=confirmed.values("user_id"), is_active=True)
        return (user for user in people if user.has_usable_password())

    def send_mail(
        self,
        subject_template_name: str,
        email_template_name: str,
        context: dict[str, Any],
        from_email: str | None,
        to_email: str,
        html_email_template_name: str | None = None,
    ) -> None:
        user = context["user"]
        address = EmailAddress.objects.filter(
            user=user, email__iexact=self.cleaned_data["email"], confirmed_at__isnull=False
        ).first()
        if address is None:
            return
        args = {"uidb64": context["uid"], "token": context["token"]}
        url = mailsays.link(reverse("password_reset_confirm", kwargs=args))
        hours = settings.PASSWORD_RESET_TIMEOUT / 3600
        said = mailsays.reset(user.pk, user.get_username(), url, hours)
        mailowed.queue([address], f"reset:{secrets.token_hex(8)}", said)


def _allowed(request: HttpRequest) -> bool:
    """Count this request against its address and its client; False past either limit."""
    email = str(request.POST.get("email", "")).strip().casefold()
    client = str(request.META.get("REMOTE_ADDR") or "unknown")
    by_address = limits.count(limits.key("reset:address", email), WINDOW)
    by_client = limits.count(limits.key("reset:client", client), WINDOW)
    return (
        by_address <= settings.PASSWORD_RESETS_PER_ADDRESS
        and by_client <= settings.PASSWORD_RESETS_PER_CLIENT
    )


class ResetView(auth_views.PasswordResetView):
    form_class = ResetForm

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _allowed(request):
            form = self.get_form()
            form.is_valid()
            form.add_error(
                None,
                "Too many password resets asked for this address or from yours: wait an hour "
                "and try again.",
            )
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        wake(request)
        return response


class ConfirmView(auth_views.PasswordResetConfirmView):
    """Django's: the link's token moves into the session and out of the address at once."""

    def dispatch(self, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = super().dispatch(*args, **kwargs)
        response["Referrer-Policy"] = "no-referrer"
        return response
