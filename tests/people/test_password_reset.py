"""Password reset by email (activity/web/passwords.py), end to end through a real SMTP server on
127.0.0.1: a confirmed address gets a link, the link sets a new password, the new password logs
in; an unknown or unconfirmed address gets the same page and no mail; requests are limited.
docs/email.md."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient, Client
from django.utils import timezone

from activity.models import EmailAddress
from activity.notify import mailwork, worker
from tests.notify.smtpserver import html, links, text

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "http://koruweb.test"
OLD, NEW = "an old pass phrase 1", "a new pass phrase 2"


@pytest.fixture
def dana() -> User:
    user = User.objects.create_user("dana", password=OLD)
    EmailAddress.objects.create(user=user, email="dana@acme.test", confirmed_at=timezone.now())
    return user


def send() -> None:
    async_to_sync(mailwork.send_round)()


def ask(client: Client, email: str) -> Any:
    return client.post("/accounts/password-reset/", {"email": email})


def test_a_confirmed_address_resets_its_password_end_to_end(mailbox, dana):
    client = Client(enforce_csrf_checks=True)
    login = client.get("/accounts/login/").content.decode()
    assert 'href="/accounts/password-reset/"' in login and "Forgot your password?" in login
    form = client.get("/accounts/password-reset/").content.decode()
    token = form.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    asked = client.post(
        "/accounts/password-reset/", {"email": "Dana@ACME.test", "csrfmiddlewaretoken": token}
    )
    assert asked.status_code == 302 and asked["Location"] == "/accounts/password-reset/sent/"
    assert "Check your mail" in client.get(asked["Location"]).content.decode()
    send()
    (message,) = mailbox.to("dana@acme.test")
    assert message["Subject"] == "Reset the password of dana on koruweb"
    assert "dana" in html(message) and "List-Unsubscribe" in message
    (link,) = [p for p in links(message, BASE) if p.startswith("/accounts/password-reset/")]
    opened = client.get(link)
    assert opened.status_code == 302 and opened["Location"].endswith("/set-password/")
    page = client.get(opened["Location"]).content.decode()
    assert "Set a new password" in page
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    done = client.post(
        opened["Location"],
        {"new_password1": NEW, "new_password2": NEW, "csrfmiddlewaretoken": token},
    )
    assert done.status_code == 302 and done["Location"] == "/accounts/password-reset/done/"
    assert Client().login(username="dana", password=NEW)
    assert not Client().login(username="dana", password=OLD)
    again = Client().get(link)  # used: the link no longer works
    assert again.status_code == 200 and "This link does not work" in again.content.decode()
    assert "set-password" not in text(message)


def test_an_unknown_or_unconfirmed_address_gets_the_same_answer_and_no_mail(mailbox, dana):
    EmailAddress.objects.create(user=dana, email="dana@old.test")  # never confirmed
    User.objects.create_user("erin", email="erin@acme.test", password=OLD)  # User.email only
    answers = [ask(Client(), email) for email in ("dana@old.test", "erin@acme.test", "x@y.test")]
    known = ask(Client(), "dana@acme.test")
    for answer in answers:
        assert (answer.status_code, answer["Location"]) == (known.status_code, known["Location"])
    send()
    assert [m["To"] for m in mailbox.messages] == ["dana@acme.test"]


def test_two_accounts_that_confirmed_one_address_each_get_a_mail_naming_them(mailbox, dana):
    twin = User.objects.create_user("dana-work", password=OLD)
    EmailAddress.objects.create(user=twin, email="dana@acme.test", confirmed_at=timezone.now())
    ask(Client(), "dana@acme.test")
    send()
    subjects = sorted(m["Subject"] for m in mailbox.to("dana@acme.test"))
    assert subjects == [
        "Reset the password of dana on koruweb",
        "Reset the password of dana-work on koruweb",
    ]


def test_resets_are_limited_per_address_and_per_client(mailbox, dana, settings):
    settings.PASSWORD_RESETS_PER_ADDRESS = 2
    settings.PASSWORD_RESETS_PER_CLIENT = 3
    assert [ask(Client(), "dana@acme.test").status_code for _ in range(3)] == [302, 302, 429]
    other = ask(Client(), "someone@acme.test")
    assert other.status_code == 429  # the fourth from this client
    assert "Too many password resets" in other.content.decode()
    send()
    assert len(mailbox.to("dana@acme.test")) == 2


async def test_under_daphnes_loop_the_reset_mail_goes_out_with_nobody_calling_the_notifier(
    mailbox, dana, settings
):
    """The request queues the mail and starts its process's notifier (no page's socket did):
    the mail arrives within a few polls."""
    settings.NOTIFY_POLL_MS = 50
    client = AsyncClient()
    try:
        asked = await client.post("/accounts/password-reset/", {"email": "dana@acme.test"})
        assert asked.status_code == 302
        async with asyncio.timeout(10):
            while not mailbox.to("dana@acme.test"):
                await asyncio.sleep(0.05)
    finally:
        if worker._task is not None:
            worker._task.cancel()
        await database_sync_to_async(connections.close_all)()
    (message,) = mailbox.to("dana@acme.test")
    assert message["Subject"] == "Reset the password of dana on koruweb"
