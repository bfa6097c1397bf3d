"""A person's email addresses: adding one (at most ``MOST``), confirming it by a one-time link
that expires (``EMAIL_CONFIRM_HOURS``; only the link token's hash is kept), sending that link
again, removing one. Only a confirmed address gets mail. docs/email.md.

The link proves the mailbox, and it is bound to the account that has the address: it confirms
only for that account logged in (``web/mail.py``: an invite adds an address its inviter chose),
and opened while another person is logged in it is refused.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import BaseUserManager
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from activity.models import EmailAddress, Mail
from activity.notify import mailowed, mailsays
from activity.people import limits

MOST = 5  # addresses per person
PREFIX = "ec_"
RESEND_SECONDS = 60  # one confirmation mail per address within this
LINKS_PER_HOUR = 10  # confirmation mails per person within an hour


class Refused(Exception):
    """What the person asked cannot be done: the message says why."""


def hash_token(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def normal(email: str) -> str:
    """The address as typed, its domain in lower case; refused if it is not an address."""
    email = BaseUserManager.normalize_email(email.strip())
    try:
        validate_email(email)
    except ValidationError:
        raise Refused(f"“{email[:254]}” is not an email address.") from None
    return email


def add(user: Any, email: str) -> EmailAddress:
    """Add ``email`` to ``user``'s addresses and mail it a confirmation link."""
    email = normal(email)
    mine = EmailAddress.objects.filter(user=user)
    if mine.filter(email__iexact=email).exists():
        raise Refused(f"{email} is one of your addresses already.")
    if mine.count() >= MOST:
        raise Refused(f"You have {MOST} addresses, the most one person may: remove one first.")
    try:
        with transaction.atomic():
            address = EmailAddress.objects.create(user=user, email=email)
    except IntegrityError:
        raise Refused(f"{email} is one of your addresses already.") from None
    send_link(address)
    return address


def send_link(address: EmailAddress) -> None:
    """Mail ``address`` a new confirmation link (an earlier one stops working)."""
    now = timezone.now()
    if address.confirmed:
        raise Refused(f"{address.email} is confirmed already.")
    if address.token_sent_at and now - address.token_sent_at < timedelta(seconds=RESEND_SECONDS):
        raise Refused("A link went to that address less than a minute ago: wait a moment.")
    if limits.count(limits.key("mail-links", str(address.user_id)), 3600) > LINKS_PER_HOUR:
        raise Refused(f"{LINKS_PER_HOUR} confirmation mails within an hour: wait and try again.")
    plain = PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(plain)
    EmailAddress.objects.filter(pk=address.pk).update(token_hash=digest, token_sent_at=now)
    Mail.objects.filter(address=address, key__startswith="confirm:", sent_at__isnull=True).delete()
    hours = settings.EMAIL_CONFIRM_HOURS
    said = mailsays.confirm(address.user_id, address.email, plain, hours)
    mailowed.queue([address], f"confirm:{digest[:16]}", said)


def find(plain: str) -> EmailAddress | None:
    """The address a confirmation link names while the link is unused; None otherwise."""
    if not plain.startswith(PREFIX):
        return None
    return EmailAddress.objects.select_related("user").filter(token_hash=hash_token(plain)).first()


def expired(address: EmailAddress) -> bool:
    hours = timedelta(hours=settings.EMAIL_CONFIRM_HOURS)
    return address.token_sent_at is None or timezone.now() - address.token_sent_at > hours


def confirm(address: EmailAddress, plain: str) -> bool:
    """Confirm the address the link names; False if the link was used meanwhile."""
    unused = EmailAddress.objects.filter(pk=address.pk, token_hash=hash_token(plain))
    return unused.update(confirmed_at=timezone.now(), token_hash="") == 1


def remove(user: Any, address_id: int) -> str:
    """Remove one of ``user``'s addresses (and its mails owed); the address removed."""
    address = EmailAddress.objects.filter(user=user, pk=address_id).first()
    if address is None:
        raise Refused("That address is not one of yours.")
    address.delete()
    return address.email
