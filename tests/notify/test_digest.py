"""The daily digest (activity/notify/digest.py, ``manage.py send_digests``) through a real SMTP
server on 127.0.0.1: one a day per person who wants it, of their last 24 hours, however often
the command runs — and the README's cron line, run as written. docs/email.md."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from activity.models import (
    Chat,
    EmailAddress,
    Follow,
    Mail,
    MailPrefs,
    Prompt,
    ToolActivity,
    Workspace,
)
from activity.review import mentions
from tests import frames
from tests.factories import apply, run
from tests.liveserver import BASE_DIR, child_env, database_url
from tests.notify.smtpserver import html, text

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "http://koruweb.test"
README = BASE_DIR / "README.md"
CHECKOUT = "/srv/koruweb"  # where the README's cron line says the checkout is


def busy_day(workspace: Workspace, user: Any, author: Any) -> Chat:
    """A run that asked ``user`` something, mentioned them, and whose turn ended (they follow
    it)."""
    chat = run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Clean the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
    )
    Follow.objects.create(user=user, chat=chat)
    row = ToolActivity.objects.get(chat=chat)
    mentions.add_comment(row, author, f"@{user.username} is this safe?")
    assert chat.current_attempt_id is not None
    apply(chat.pk, frames.turn_ended(4, chat.current_attempt_id))
    return chat


def wants_digest(user: Any, email: str, confirmed: bool = True) -> None:
    MailPrefs.objects.create(user=user, digest=True)
    when = timezone.now() if confirmed else None
    EmailAddress.objects.create(user=user, email=email, confirmed_at=when)


def test_the_digest_mails_each_person_their_day_once_a_day(
    mailbox, acme, acme_approver, acme_viewer, acme_admin, capsys
):
    wants_digest(acme_approver, "alice@acme.test")
    wants_digest(acme_viewer, "bob@acme.test")  # nothing happened to bob
    wants_digest(acme_admin, "carol@acme.test", confirmed=False)
    chat = busy_day(acme, acme_approver, acme_admin)
    call_command("send_digests")
    assert capsys.readouterr().out.strip() == "Queued 1 digest; sent 1 mail."
    (message,) = mailbox.messages
    day = timezone.localdate().isoformat()
    assert message["To"] == "alice@acme.test"
    assert message["Subject"] == f"koruweb: your day, {day}"
    body = text(message)
    prompt = Prompt.objects.get(chat=chat)
    assert "Prompts that waited for you (1):" in body and "rm -rf build" in body
    assert f"{BASE}/prompts/{prompt.pk}/answer" in body
    assert "carol in Clean the build: @alice is this safe?" in body
    assert "Turns of runs you follow that ended (1):" in body and f"{BASE}/chats/{chat.pk}/" in body
    assert f'href="{BASE}/chats/{chat.pk}/"' in html(message)
    assert message["List-Unsubscribe"].startswith(f"<{BASE}/email/unsubscribe/")
    call_command("send_digests")  # again the same day: nothing more
    assert capsys.readouterr().out.strip() == "Queued 0 digests; sent 0 mails."
    assert len(mailbox.messages) == 1
    yesterday = timezone.now() - timedelta(days=1)  # as if that digest went yesterday
    MailPrefs.objects.filter(user=acme_approver).update(digest_sent_at=yesterday)
    Mail.objects.update(key=f"digest:{timezone.localdate(yesterday).isoformat()}")
    Prompt.objects.update(created_at=timezone.now() - timedelta(days=2))  # yesterday's news
    call_command("send_digests")  # the next day: a digest of what is left in the last 24 hours
    assert len(mailbox.messages) == 2 and "Prompts that waited" not in text(mailbox.messages[1])


def cron_line() -> tuple[list[str], str]:
    """The README's crontab line for the digest: its schedule and its command."""
    blocks = re.findall(r"```text\n(.*?)```", README.read_text(), flags=re.S)
    (line,) = [line for b in blocks for line in b.splitlines() if "send_digests" in line]
    fields = line.split(maxsplit=5)
    return fields[:5], fields[5]


def test_the_readmes_cron_line_sends_the_digest_once_a_day(
    mailbox, smtp, acme, acme_approver, acme_admin
):
    schedule, command = cron_line()
    minute, hour, *every = schedule
    assert every == ["*", "*", "*"] and minute.isdigit() and hour.isdigit()  # once a day
    assert command == f"cd {CHECKOUT} && .venv/bin/python manage.py send_digests"
    wants_digest(acme_approver, "alice@acme.test")
    busy_day(acme, acme_approver, acme_admin)
    controller, _ = smtp
    env = child_env(
        DATABASE_URL=database_url(),
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(controller.port),
        KORUWEB_BASE_URL=BASE,
    )
    env["PATH"] = f"{BASE_DIR / '.venv' / 'bin'}:{env.get('PATH', '')}"
    here = command.replace(CHECKOUT, str(BASE_DIR))  # the one word that cannot be written down
    if not (BASE_DIR / ".venv/bin/python").exists():  # a checkout's venv elsewhere
        here = here.replace(".venv/bin/python", sys.executable)
    for _ in range(2):  # cron on two machines, or run twice: one digest
        done = subprocess.run(["sh", "-c", here], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
    (message,) = mailbox.to("alice@acme.test")
    assert message["Subject"].startswith("koruweb: your day, ")
    assert f"{BASE}/chats/" in text(message)
