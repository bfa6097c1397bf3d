"""What a mail says: its subject, its plain text and its HTML, rendered from the templates of
``templates/activity/mail/`` with absolute links into the pages (``KORUWEB_BASE_URL``) and, in
every mail, a link that unsubscribes its person in one click without logging in
(``unsubscribe_url``: a token signed for them). The words are Web Push's where they fit
(``says``). docs/email.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.template.loader import render_to_string
from django.urls import reverse

from activity.core.contract import bound
from activity.models import InferenceAttempt, Mention, Prompt
from activity.notify import says

UNSUBSCRIBE_SALT = "koruweb.mail.unsubscribe"
SUBJECT_CHARS = 150


@dataclass(frozen=True)
class Said:
    subject: str
    text: str
    html: str


def link(path: str) -> str:
    """An absolute link to one of this server's pages."""
    return settings.KORUWEB_BASE_URL + path


def unsubscribe_token(user_id: int) -> str:
    return signing.dumps({"u": user_id}, salt=UNSUBSCRIBE_SALT)


def read_unsubscribe(token: str) -> int | None:
    """The person an unsubscribe token was made for; None for a forged one. It never expires:
    an old mail's link still turns mail off."""
    try:
        found = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("u"), int):
        return None
    return int(found["u"])


def unsubscribe_url(user_id: int) -> str:
    return link(reverse("mail-unsubscribe", args=[unsubscribe_token(user_id)]))


def compose(name: str, subject: str, user_id: int, **context: Any) -> Said:
    """Mail ``name`` (``activity/mail/<name>.txt`` and ``.html``) for person ``user_id``."""
    context |= {
        "subject": bound(" ".join(subject.split()), SUBJECT_CHARS),  # a header: one line
        "unsubscribe_url": unsubscribe_url(user_id),
        "settings_url": link(reverse("notifications")),
        "site_url": link("/"),
    }
    text = render_to_string(f"activity/mail/{name}.txt", context)
    html = render_to_string(f"activity/mail/{name}.html", context)
    return Said(context["subject"], text, html)


def waiting(prompt: Prompt, user_id: int, minutes: int) -> Said:
    """A prompt that waited ``minutes`` or more for this person's answer."""
    return compose(
        "prompt",
        f"{says.run_name(prompt.chat)} needs you",
        user_id,
        run=says.run_name(prompt.chat),
        asked=says.asked(prompt),
        minutes=minutes,
        url=link(reverse("answer", args=[prompt.pk])),
    )


def mentioned(mention: Mention) -> Said:
    comment = mention.comment
    author = comment.author.get_username() if comment.author else "someone"
    run = says.run_name(comment.tool.chat)
    return compose(
        "mention",
        f"{author} mentioned you in {run}",
        mention.user_id,
        author=author,
        run=run,
        comment=bound(comment.text, 2000),
        url=link(reverse("open-mention", args=[mention.pk])),
    )


def ended(turn: InferenceAttempt, user_id: int) -> Said:
    """A turn of a run this person follows ended: how (the push's words)."""
    told = says.ended(turn)
    return compose(
        "ended",
        told["title"],
        user_id,
        run=says.run_name(turn.chat),
        body=told["body"],
        url=link(reverse("chat", args=[turn.chat_id])),
    )


def confirm(user_id: int, email: str, token: str, hours: int) -> Said:
    return compose(
        "confirm",
        "Confirm your email address for koruweb",
        user_id,
        email=email,
        hours=hours,
        url=link(reverse("mail-confirm", args=[token])),
    )


def reset(user_id: int, username: str, url: str, hours: float) -> Said:
    return compose(
        "reset",
        f"Reset the password of {username} on koruweb",
        user_id,
        username=username,
        url=url,
        hours=hours,
    )


def digest(user_id: int, day: str, found: dict[str, Any]) -> Said:
    """A person's day: what waited for them, their mentions, the runs they follow that ended
    (``digest.gather``'s lists)."""
    return compose("digest", f"koruweb: your day, {day}", user_id, day=day, **found)
