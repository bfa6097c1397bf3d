"""Email (issue 31): the addresses a person confirmed, what each person wants mailed, and the
mails owed (what decides and sends them is ``activity/notify/mail*.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class EmailAddress(models.Model):
    """An address of a person's. Only a confirmed one (``confirmed_at``) gets mail; it is
    confirmed by a one-time link that expires (``token_hash``: the link's token, hashed)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_addresses"
    )
    email = models.EmailField(max_length=254)
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    token_hash = models.CharField(max_length=64, blank=True)  # the pending confirmation's
    token_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "email"], name="one_address_per_person")
        ]
        indexes = [models.Index(fields=["email"], name="addresses_by_email")]

    def __str__(self) -> str:
        return f"{self.email} of {self.user_id}"

    @property
    def confirmed(self) -> bool:
        return self.confirmed_at is not None


class MailPrefs(models.Model):
    """What a person wants by mail: a prompt that waited ``prompt_minutes`` for their answer
    (None: never), mentions, runs they follow that fail or finish, a daily digest. One click on
    a mail's unsubscribe link turns all of it off (``unsubscribed_at``)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mail_prefs"
    )
    prompt_minutes = models.PositiveIntegerField(null=True, blank=True)
    mentions = models.BooleanField(default=False)
    follows = models.BooleanField(default=False)
    digest = models.BooleanField(default=False)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    digest_sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"mail of {self.user_id}"


class Mail(models.Model):
    """A mail owed to one confirmed address, sent once whichever process claims it first
    (``claimed_at``), off the request and ingest paths. ``key`` names what it is about: one
    address is never mailed the same thing twice."""

    address = models.ForeignKey(EmailAddress, on_delete=models.CASCADE, related_name="mails")
    key = models.CharField(max_length=200)  # "prompt:<id>", "mention:<id>", "digest:<date>"
    subject = models.CharField(max_length=200)
    text = models.TextField()
    html = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    tries = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["address", "key"], name="one_mail_per_key")]
        indexes = [models.Index(fields=["sent_at", "claimed_at"], name="mails_owed")]

    def __str__(self) -> str:
        return f"{self.key} to {self.address_id}"
