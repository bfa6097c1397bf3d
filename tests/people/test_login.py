"""Guessing passwords stops at LOGIN_FAILURE_LIMIT wrong ones, per account and per address."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.test import Client

pytestmark = [pytest.mark.django_db]
PASSWORD = "correct horse battery staple"
LIMIT = 10
REFUSED = "Too many failed logins for this account or from this address"


@pytest.fixture(autouse=True)
def limit(settings):
    settings.LOGIN_FAILURE_LIMIT = LIMIT
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast
    caches["login_throttle"].clear()
    yield
    caches["login_throttle"].clear()


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password=PASSWORD)


def log_in(username: str, password: str, address: str = "192.0.2.1"):
    return Client(REMOTE_ADDR=address).post(
        "/accounts/login/", {"username": username, "password": password}
    )


def logged_in(response) -> bool:
    return response.status_code == 302 and bool(response.wsgi_request.user.is_authenticated)


def test_the_right_password_logs_in_after_wrong_ones_below_the_limit(alice):
    for _ in range(LIMIT - 1):
        assert log_in("alice", "wrong").status_code == 200
    assert logged_in(log_in("alice", PASSWORD))


def test_after_the_limit_the_account_is_refused_even_the_right_password_from_a_new_address(alice):
    for attempt in range(LIMIT):
        log_in("alice", "wrong", address=f"198.51.100.{attempt}")
    refused = log_in("alice", PASSWORD, address="203.0.113.9")
    assert refused.status_code == 429
    assert REFUSED in refused.content.decode()
    assert "Wait 15 minutes and try again" in refused.content.decode()
    assert not refused.wsgi_request.user.is_authenticated


def test_after_the_limit_the_address_is_refused_for_every_account(alice):
    User.objects.create_user("bob", password=PASSWORD)
    for attempt in range(LIMIT):
        log_in(f"guess{attempt}", "wrong", address="192.0.2.66")
    refused = log_in("bob", PASSWORD, address="192.0.2.66")
    assert refused.status_code == 429 and REFUSED in refused.content.decode()
    assert logged_in(log_in("bob", PASSWORD, address="192.0.2.67"))  # others are not affected


def test_a_successful_login_clears_its_accounts_count(alice):
    for attempt in range(LIMIT - 1):
        log_in("alice", "wrong", address=f"198.51.100.{attempt}")
    assert logged_in(log_in("alice", PASSWORD, address="203.0.113.1"))
    for attempt in range(LIMIT - 1):
        log_in("alice", "wrong", address=f"198.51.100.{attempt + 100}")
    assert logged_in(log_in("alice", PASSWORD, address="203.0.113.2"))


def test_the_limit_is_a_setting(alice, settings):
    settings.LOGIN_FAILURE_LIMIT = 2
    log_in("alice", "wrong")
    log_in("alice", "wrong")
    assert log_in("alice", PASSWORD).status_code == 429


def test_a_user_name_counts_whatever_its_case(alice):
    for attempt in range(LIMIT):
        log_in("ALICE" if attempt % 2 else "alice", "wrong", address=f"198.51.100.{attempt}")
    assert log_in("alice", PASSWORD, address="203.0.113.9").status_code == 429


def test_the_login_page_says_what_koruweb_is_before_asking_who_you_are():
    page = Client().get("/accounts/login/").content.decode()
    about = page.index('<p class="about">koruweb lets your team watch coding-agent runs live')
    assert "answer their permission prompts and questions from the web" in page
    assert "review past turns together" in page
    assert "Agent Client Protocol" in page
    assert about < page.index('name="username"')
