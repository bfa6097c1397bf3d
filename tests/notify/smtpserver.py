"""A real SMTP server on 127.0.0.1 for the email tests (``aiosmtpd``'s ``Controller``, in a
thread of its own): it takes what Django's SMTP backend sends and keeps each message, parsed.
A message is kept before the server answers 250, so once ``send()`` returns it is here."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.liveserver import free_port


class Mailbox:
    """What the server received, by recipient."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self.messages.append(message)
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [m for m in self.messages if address in str(m["To"])]

    def clear(self) -> None:
        with self._lock:
            self.messages.clear()


def running() -> Iterator[tuple[Controller, Mailbox]]:
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller, mailbox
    finally:
        controller.stop()


def smtp_mailers(port: int) -> dict[str, Any]:
    """Django's mailers (``settings.MAILERS``) sending through this server: the test
    environment swaps them for its in-memory outbox."""
    backend = "django.core.mail.backends.smtp.EmailBackend"
    options = {"host": "127.0.0.1", "port": port, "timeout": 10}
    return {"default": {"BACKEND": backend, "OPTIONS": options}}


def text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def html(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("html",))
    assert part is not None
    return str(part.get_content())


def links(message: EmailMessage, base: str) -> list[str]:
    """The links into the site a message's plain text holds, as paths."""
    return [m.removeprefix(base) for m in re.findall(re.escape(base) + r"/\S+", text(message))]


BASE = "http://koruweb.test"  # the base URL the mail tests' links start with


@pytest.fixture(scope="session")
def smtp() -> Iterator[tuple[Controller, Mailbox]]:
    """One SMTP server per test process (a pytest plugin: tests/conftest.py)."""
    yield from running()


@pytest.fixture
def mailbox(smtp: tuple[Controller, Mailbox], settings: Any) -> Mailbox:
    """The SMTP server's mailbox, empty, with Django's SMTP backend pointed at it."""
    controller, box = smtp
    settings.MAILERS = smtp_mailers(controller.port)
    settings.KORUWEB_BASE_URL = BASE
    box.clear()
    return box
