"""The project's URLs: Django's accounts views but the password reset (nobody has an email)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import NoReverseMatch, reverse


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"],
)
def test_the_password_reset_is_not_mounted(client, path):
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "someone@example.com"}).status_code == 404


def test_no_page_links_a_password_reset():
    with pytest.raises(NoReverseMatch):
        reverse("password_reset")
    templates = Path(settings.BASE_DIR, "templates").rglob("*.html")
    assert not [t for t in templates if "password_reset" in t.read_text()]
    assert reverse("logout") == "/accounts/logout/"
