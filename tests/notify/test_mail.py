"""Email (activity/notify/mail*.py, activity/web/mail.py) through a real SMTP server on
127.0.0.1 (``smtpserver.py``): confirming an address, what is mailed and when, once, to whom,
and unsubscribing from a mail's link without logging in. docs/email.md."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.utils import timezone

from activity.models import (
    Chat,
    EmailAddress,
    Follow,
    Mail,
    MailPrefs,
    Membership,
    Mention,
    Prompt,
    ToolActivity,
    Workspace,
)
from activity.notify import mailsend, mailwork, queue, worker
from activity.review import mentions
from tests import frames
from tests.factories import apply, run
from tests.members import logged_in
from tests.notify.smtpserver import Mailbox, html, links, smtp_mailers, text

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "http://koruweb.test"


@pytest.fixture
def mailbox(smtp: tuple[Controller, Mailbox], settings: Any) -> Mailbox:
    """The SMTP server's mailbox, empty, with Django's SMTP backend pointed at it."""
    controller, box = smtp
    settings.MAILERS = smtp_mailers(controller.port)
    settings.DEFAULT_FROM_EMAIL = "koruweb <koruweb@acme.test>"
    settings.KORUWEB_BASE_URL = BASE
    settings.NOTIFY_DELAY_SECONDS = 0
    box.clear()
    return box


def tick() -> None:
    """The mail round of a process's notifier (``worker.tick`` starts it)."""
    async_to_sync(mailwork.send_round)()


def confirmed(user: User, email: str, **prefs: Any) -> EmailAddress:
    """An address of ``user``'s, confirmed, and what they want mailed."""
    MailPrefs.objects.update_or_create(user=user, defaults=prefs)
    return EmailAddress.objects.create(user=user, email=email, confirmed_at=timezone.now())


def waiting_run(workspace: Workspace, minutes_ago: int = 0) -> Chat:
    chat = run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Clean the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
    )
    then = timezone.now() - timedelta(minutes=minutes_ago)
    Prompt.objects.filter(chat=chat).update(created_at=then)
    return chat


# --- addresses ----------------------------------------------------------------------------------


def confirmation_link(mailbox: Mailbox, email: str) -> str:
    (message,) = mailbox.to(email)
    assert message["Subject"] == "Confirm your email address for koruweb"
    (link,) = [p for p in links(message, BASE) if p.startswith("/email/confirm/")]
    return link


def test_an_address_added_is_mailed_a_link_that_confirms_it_once(mailbox, acme_approver):
    client = logged_in(acme_approver)
    added = client.post("/settings/email/add", {"email": "alice@Acme.test"})
    assert added.status_code == 302 and added["Location"] == "/settings/notifications/#email"
    page = client.get("/settings/notifications/").content.decode()
    assert "A confirmation link is on its way to alice@acme.test" in page
    assert "waiting for its confirmation link" in page
    tick()
    link = confirmation_link(mailbox, "alice@acme.test")
    address = EmailAddress.objects.get(user=acme_approver)
    assert address.token_hash and link.split("/")[3] not in address.token_hash  # a hash only
    assert Mail.objects.get(address=address).text == ""  # the link is not kept once sent
    shown = client.get(link)
    assert shown.status_code == 200 and "Confirm alice@acme.test" in shown.content.decode()
    assert not EmailAddress.objects.get(pk=address.pk).confirmed  # a GET confirms nothing
    done = client.post(link)
    assert done.status_code == 200 and "alice@acme.test is confirmed" in done.content.decode()
    assert EmailAddress.objects.get(pk=address.pk).confirmed
    again = client.post(link)
    assert again.status_code == 404 and "used already" in again.content.decode()


def test_a_confirmation_link_expires_and_a_forged_one_is_refused(mailbox, acme_approver, settings):
    client = logged_in(acme_approver)
    client.post("/settings/email/add", {"email": "alice@acme.test"})
    tick()
    link = confirmation_link(mailbox, "alice@acme.test")
    forged = link[:-3] + "xyz/"
    assert client.post(forged).status_code == 404
    EmailAddress.objects.update(token_sent_at=timezone.now() - timedelta(hours=49))
    expired = client.post(link)
    assert expired.status_code == 410 and "expired" in expired.content.decode()
    assert not EmailAddress.objects.get().confirmed


def test_a_confirmation_link_asks_for_a_login_first_and_refuses_another_person(
    mailbox, acme_approver, acme_viewer
):
    logged_in(acme_approver).post("/settings/email/add", {"email": "alice@acme.test"})
    tick()
    link = confirmation_link(mailbox, "alice@acme.test")
    refused = logged_in(acme_viewer).post(link)
    assert refused.status_code == 403 and "another account" in refused.content.decode()
    anyone = Client()
    for asked in (anyone.get(link), anyone.post(link)):
        assert asked.status_code == 302 and asked["Location"] == f"/accounts/login/?next={link}"
    assert not EmailAddress.objects.get().confirmed
    owner = Client(enforce_csrf_checks=True)  # logged in: its button's form carries the token
    owner.force_login(acme_approver)
    page = owner.get(link).content.decode()
    assert "Confirm alice@acme.test" in page
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    assert owner.post(link).status_code == 403  # a post from another site confirms nothing
    done = owner.post(link, {"csrfmiddlewaretoken": token})
    assert done.status_code == 200 and "alice@acme.test is confirmed" in done.content.decode()
    assert EmailAddress.objects.get().confirmed


def test_addresses_are_a_persons_own_at_most_five_and_need_a_login(
    mailbox, acme_approver, acme_viewer, client
):
    alice = logged_in(acme_approver)
    for n in range(5):
        alice.post("/settings/email/add", {"email": f"alice{n}@acme.test"})
    sixth = alice.post("/settings/email/add", {"email": "alice5@acme.test"}, follow=True)
    assert "You have 5 addresses" in sixth.content.decode()
    same = alice.post("/settings/email/add", {"email": "ALICE0@acme.test"}, follow=True)
    assert "one of your addresses already" in same.content.decode()
    bad = alice.post("/settings/email/add", {"email": "not an address"}, follow=True)
    assert "is not an email address" in bad.content.decode()
    first = EmailAddress.objects.filter(user=acme_approver).first()
    assert first is not None
    bob = logged_in(acme_viewer)
    bob.post(f"/settings/email/{first.pk}/remove")
    assert EmailAddress.objects.filter(pk=first.pk).exists()  # not bob's
    alice.post(f"/settings/email/{first.pk}/remove")
    assert not EmailAddress.objects.filter(pk=first.pk).exists()
    for path in ("/settings/email/add", "/settings/email/prefs", "/settings/notifications/"):
        assert client.post(path, {"email": "x@acme.test"}).status_code == 302  # to log in
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(acme_approver)
    assert csrf.post("/settings/email/add", {"email": "z@acme.test"}).status_code == 403


def test_an_unconfirmed_address_gets_nothing_but_its_link(mailbox, acme, acme_approver):
    MailPrefs.objects.create(user=acme_approver, prompt_minutes=1, mentions=True)
    EmailAddress.objects.create(user=acme_approver, email="alice@acme.test")
    waiting_run(acme, minutes_ago=5)
    tick()
    assert mailbox.to("alice@acme.test") == [] and not Mail.objects.exists()


# --- a prompt waiting -------------------------------------------------------------------------


def test_a_prompt_waiting_longer_than_a_persons_minutes_mails_them_once(
    mailbox, acme, acme_approver, acme_admin
):
    confirmed(acme_approver, "alice@acme.test", prompt_minutes=5)
    confirmed(acme_admin, "carol@acme.test", prompt_minutes=30)
    chat = waiting_run(acme, minutes_ago=6)
    threads = [threading.Thread(target=ticked) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tick()
    (message,) = mailbox.to("alice@acme.test")
    assert message["Subject"] == "Clean the build needs you"
    assert message["From"] == "koruweb <koruweb@acme.test>"
    prompt = Prompt.objects.get(chat=chat)
    assert f"{BASE}/prompts/{prompt.pk}/answer" in text(message)
    assert "rm -rf build" in text(message) and "waited 5 minutes" in text(message)
    assert f'href="{BASE}/prompts/{prompt.pk}/answer"' in html(message)
    assert mailbox.to("carol@acme.test") == []  # her 30 minutes are not up


def ticked() -> None:
    """A whole notifier's round (Web Push's too) in a thread: as a second process would."""
    try:
        async_to_sync(worker.tick)()
    finally:
        connections.close_all()


def test_a_prompt_answered_first_or_for_someone_who_said_never_or_a_viewer_is_not_mailed(
    mailbox, acme, acme_approver, acme_admin, acme_viewer
):
    confirmed(acme_approver, "alice@acme.test", prompt_minutes=5)
    confirmed(acme_admin, "carol@acme.test", prompt_minutes=None, mentions=True)
    confirmed(acme_viewer, "bob@acme.test", prompt_minutes=1)
    chat = waiting_run(acme, minutes_ago=3)
    prompt = Prompt.objects.get(chat=chat)
    logged_in(acme_approver).post(f"/prompts/{prompt.pk}/answer", {"choice": "reject"})
    Prompt.objects.filter(pk=prompt.pk).update(created_at=timezone.now() - timedelta(minutes=9))
    tick()
    assert mailbox.messages == []


def test_a_prompt_answered_after_its_mail_was_owed_but_before_it_went_is_not_mailed(
    mailbox, acme, acme_approver
):
    from activity.notify import mailowed

    confirmed(acme_approver, "alice@acme.test", prompt_minutes=5)
    prompt = Prompt.objects.get(chat=waiting_run(acme, minutes_ago=6))
    assert mailowed.owe() == 1
    logged_in(acme_approver).post(f"/prompts/{prompt.pk}/answer", {"choice": "reject"})
    tick()
    assert mailbox.messages == [] and not Mail.objects.exists()


# --- mentions and runs followed -----------------------------------------------------------------


def test_a_mention_mails_the_member_it_names_but_not_its_author(
    mailbox, acme, acme_approver, acme_viewer
):
    confirmed(acme_viewer, "bob@acme.test", mentions=True)
    confirmed(acme_approver, "alice@acme.test", mentions=True)
    row = ToolActivity.objects.get(chat=waiting_run(acme))
    mentions.add_comment(row, acme_approver, "@bob is this safe? @alice says so")
    tick()
    tick()
    (message,) = mailbox.to("bob@acme.test")
    assert message["Subject"] == "alice mentioned you in Clean the build"
    assert "@bob is this safe?" in text(message) and "@bob is this safe?" in html(message)
    mention = Mention.objects.get(user=acme_viewer)
    assert f"{BASE}/mentions/{mention.pk}/" in text(message)
    assert mailbox.to("alice@acme.test") == []  # her own comment


def test_a_mention_of_someone_who_left_or_does_not_want_it_is_not_mailed(
    mailbox, acme, acme_approver, acme_viewer, acme_admin
):
    confirmed(acme_viewer, "bob@acme.test", mentions=True)
    confirmed(acme_admin, "carol@acme.test", mentions=False, follows=True)
    row = ToolActivity.objects.get(chat=waiting_run(acme))
    Membership.objects.filter(user=acme_viewer).delete()
    mentions.add_comment(row, acme_approver, "@bob @carol look")
    tick()
    assert mailbox.messages == []


def test_a_followed_runs_turn_that_ends_mails_its_followers(
    mailbox, acme, acme_approver, acme_viewer
):
    confirmed(acme_viewer, "bob@acme.test", follows=True)
    confirmed(acme_approver, "alice@acme.test", follows=True)  # does not follow it
    chat = waiting_run(acme)
    Follow.objects.create(user=acme_viewer, chat=chat)
    assert chat.current_attempt_id is not None
    apply(chat.pk, frames.turn_ended(4, chat.current_attempt_id, "refusal"))
    tick()
    tick()
    (message,) = mailbox.to("bob@acme.test")
    assert message["Subject"] == "Clean the build: Refused"
    assert "The agent refused to go on." in text(message)
    assert f"{BASE}/chats/{chat.pk}/" in text(message)
    assert mailbox.to("alice@acme.test") == []


# --- unsubscribing --------------------------------------------------------------------------


def mailed_once(mailbox: Mailbox, acme: Workspace, user: User, email: str) -> Any:
    confirmed(user, email, prompt_minutes=1, mentions=True)
    waiting_run(acme, minutes_ago=2)
    tick()
    (message,) = mailbox.to(email)
    return message


def test_every_mail_unsubscribes_its_person_in_one_click_without_a_login(
    mailbox, acme, acme_approver, client
):
    message = mailed_once(mailbox, acme, acme_approver, "alice@acme.test")
    header = message["List-Unsubscribe"]
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url = header.strip("<>")
    assert url.startswith(f"{BASE}/email/unsubscribe/") and url in text(message)
    assert url in html(message)
    path = url.removeprefix(BASE)
    page = client.get(path)
    assert page.status_code == 200 and "Unsubscribe" in page.content.decode()
    assert MailPrefs.objects.get(user=acme_approver).unsubscribed_at is None  # GET changes nothing
    one_click = client.post(
        path, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert one_click.status_code == 200
    assert MailPrefs.objects.get(user=acme_approver).unsubscribed_at is not None
    mailbox.clear()
    waiting_run(acme, minutes_ago=2)
    tick()
    assert mailbox.messages == []
    settings_page = logged_in(acme_approver).get("/settings/notifications/").content.decode()
    assert "Turn mail on again" in settings_page
    logged_in(acme_approver).post("/settings/email/on")
    assert MailPrefs.objects.get(user=acme_approver).unsubscribed_at is None


def test_the_unsubscribe_button_works_and_a_forged_token_is_refused(
    mailbox, acme, acme_approver, client
):
    message = mailed_once(mailbox, acme, acme_approver, "alice@acme.test")
    path = message["List-Unsubscribe"].strip("<>").removeprefix(BASE)
    forged = path[:-3] + "xx/"
    assert client.get(forged).status_code == 404
    assert client.post(forged).status_code == 404
    assert MailPrefs.objects.get(user=acme_approver).unsubscribed_at is None
    pressed = Client(enforce_csrf_checks=True).post(path)  # the page's button: no CSRF token
    assert pressed.status_code == 200 and "Unsubscribed" in pressed.content.decode()
    assert MailPrefs.objects.get(user=acme_approver).unsubscribed_at is not None


def test_what_to_mail_is_saved_from_the_notifications_page(acme_approver):
    client = logged_in(acme_approver)
    page = client.get("/settings/notifications/").content.decode()
    assert 'id="email"' in page and "A daily digest" in page
    wrong = client.post("/settings/email/prefs", {"prompt_minutes": "0"}, follow=True)
    assert "Say 1 to 1440 minutes" in wrong.content.decode()
    client.post("/settings/email/prefs", {"prompt_minutes": "15", "digest": "on"})
    prefs = MailPrefs.objects.get(user=acme_approver)
    assert prefs.prompt_minutes == 15 and prefs.digest and not prefs.mentions


# --- an invite that carries an address ----------------------------------------------------------


def test_an_invite_carries_an_address_which_the_new_member_confirms_by_mail(
    mailbox, as_admin, acme
):
    made = as_admin.post(
        "/workspaces/acme/invites/create",
        {"role": "viewer", "days": "7", "email": "dana@Acme.test"},
    )
    link = made.content.decode().split('value="http://testserver')[1].split('"')[0]
    assert "dana@acme.test" in as_admin.get("/workspaces/acme/invites/").content.decode()
    bad = as_admin.post(
        "/workspaces/acme/invites/create", {"role": "viewer", "days": "7", "email": "nope"}
    )
    assert bad.status_code == 400 and "is not an email address" in bad.content.decode()
    stranger = Client()
    assert "Joining adds dana@acme.test" in stranger.get(link).content.decode()
    password = "a long passphrase 42"
    stranger.post(link, {"username": "dana", "password1": password, "password2": password})
    joined = stranger.get(link).content.decode()
    assert "You joined Acme" in joined and "confirm dana@acme.test" in joined
    address = EmailAddress.objects.get(user__username="dana")
    assert address.email == "dana@acme.test" and not address.confirmed  # joining proves nothing
    tick()
    stranger.post(confirmation_link(mailbox, "dana@acme.test"))
    assert EmailAddress.objects.get(pk=address.pk).confirmed


def test_an_invited_address_is_confirmed_only_by_its_account_so_its_inviter_cannot_reset_it(
    mailbox, as_admin, acme
):
    made = as_admin.post(
        "/workspaces/acme/invites/create",
        {"role": "viewer", "days": "7", "email": "mallory@evil.test"},
    )
    link = made.content.decode().split('value="http://testserver')[1].split('"')[0]
    victor = User.objects.create_user("victor", password="a long passphrase 42")
    member = logged_in(victor)
    joined = member.post(link)  # an account of its own joins by the invite: it adds the address
    assert joined.status_code == 302
    address = EmailAddress.objects.get(user=victor)
    assert address.email == "mallory@evil.test" and not address.confirmed
    tick()
    link = confirmation_link(mailbox, "mallory@evil.test")
    # The inviter holds the mailbox, not the account: the link asks them to log in as it.
    for asked in (Client().get(link), Client().post(link)):
        assert asked.status_code == 302 and asked["Location"].startswith("/accounts/login/?next=")
    assert not EmailAddress.objects.get(pk=address.pk).confirmed
    mailbox.clear()
    Client().post("/accounts/password-reset/", {"email": "mallory@evil.test"})
    tick()
    assert mailbox.to("mallory@evil.test") == []  # no reset link for victor's account
    assert "Confirm mallory@evil.test" in member.get(link).content.decode()
    assert member.post(link).status_code == 200  # the account itself, logged in, confirms it
    assert EmailAddress.objects.get(pk=address.pk).confirmed


# --- a slow SMTP server -----------------------------------------------------------------------


async def test_an_smtp_server_that_hangs_holds_no_push_up(
    mailbox, acme, acme_approver, monkeypatch
):
    """The notifier's poll waits for its mail round ``BUDGET_SECONDS`` at most, then goes on to
    Web Push; the round finishes alone, and the next poll starts no second one meanwhile."""
    await database_sync_to_async(confirmed)(acme_approver, "alice@acme.test", prompt_minutes=1)
    await database_sync_to_async(waiting_run)(acme, 2)
    release = threading.Event()
    calls: list[str] = []

    def hanging(mail: Mail) -> str:
        calls.append(mail.key)
        release.wait(10)
        return "SMTPServerDisconnected: gone"

    monkeypatch.setattr(mailsend, "send", hanging)
    monkeypatch.setattr(mailwork, "BUDGET_SECONDS", 0.2)
    pushed: list[int] = []

    def owe() -> int:
        pushed.append(1)
        return 0

    monkeypatch.setattr(queue, "owe", owe)
    try:
        async with asyncio.timeout(5):
            await worker.tick()
            await worker.tick()
        assert pushed == [1, 1] and len(calls) == 1  # push went on; one round, one mail
    finally:
        release.set()
        assert mailwork._round is not None
        await mailwork._round
        await database_sync_to_async(connections.close_all)()
    failed = await database_sync_to_async(Mail.objects.get)()
    assert failed.sent_at is None and failed.error.startswith("SMTPServerDisconnected")
