"""One mail to one address, through Django's email backend (SMTP, configured from the
environment: docs/email.md): a plain-text body and its HTML alternative, and the headers that
let a mail client unsubscribe its reader in one click (RFC 8058)."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMultiAlternatives

from activity.models import Mail
from activity.notify import mailsays


def message(mail: Mail) -> EmailMultiAlternatives:
    """What goes out for ``mail`` (its address and its person loaded)."""
    unsubscribe = mailsays.unsubscribe_url(mail.address.user_id)
    sent = EmailMultiAlternatives(
        subject=mail.subject,
        body=mail.text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[mail.address.email],
        headers={
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
    )
    sent.attach_alternative(mail.html, "text/html")
    return sent


def send(mail: Mail) -> str:
    """Send ``mail``; what went wrong ("" when it went). Never the mail's text: a
    confirmation's or a reset's link is a secret."""
    try:
        message(mail).send()
    except Exception as fault:  # the server cannot be reached, or refused: tried again later
        return f"{type(fault).__name__}: {str(fault)[:150]}"[:200]
    return ""
