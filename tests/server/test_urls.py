"""The project's URLs: Django's accounts views, the password reset by email at
``/accounts/password-reset/`` (docs/email.md) and not at Django's default addresses."""

from __future__ import annotations

import pytest
from django.urls import reverse


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"],
)
def test_the_password_reset_is_not_at_djangos_default_addresses(client, path):
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "someone@example.com"}).status_code == 404


def test_the_password_reset_is_mounted_under_its_own_address():
    assert reverse("password_reset") == "/accounts/password-reset/"
    assert reverse("password_reset_done") == "/accounts/password-reset/sent/"
    assert reverse("password_reset_complete") == "/accounts/password-reset/done/"
    assert reverse("logout") == "/accounts/logout/"
