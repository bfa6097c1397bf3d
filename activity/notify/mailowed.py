"""What is owed to which address by mail, and each mail claimed so that it is sent once
(Web Push's shape: ``queue``). docs/email.md says what is mailed and when.

Nothing here runs on the request or the ingest path: each process's notifier calls ``owe``,
``take`` and ``done`` every ``NOTIFY_POLL_MS`` (``mailwork``).

1. ``owe``: a prompt open longer than a person's ``MailPrefs.prompt_minutes`` in a run they
   may answer is owed to each of their confirmed addresses, keyed ``prompt:<id>``: the unique
   (address, key) pair mails it once, whatever happens twice. A prompt answered or closed
   before its mail went out is not mailed (its unsent mails are deleted). A comment that
   mentions someone is claimed (a conditional update of ``Mention.mailed_at``: one process
   wins) and mailed to them; a turn that ended is claimed likewise
   (``InferenceAttempt.mailed_at``) and mailed to the run's followers.
2. ``take``: mails not sent are claimed one by one (``claimed_at``; a claim older than
   ``RETRY_SECONDS`` is stale) and ``done`` records what came of each, ``MAX_TRIES`` times.

Who is mailed is ``mailwho``'s: mail has its own preferences (``MailPrefs``), and the rules of
notifications otherwise (still a member, may still see the run), but not quiet hours nor
"looking already": a mail does not ring, it waits in a mailbox.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.db.models import F, Model, Q
from django.utils import timezone

from activity.models import EmailAddress, InferenceAttempt, Mail, Membership, Mention, Prompt
from activity.notify import mailsays, mailwho, who
from activity.notify.mailsays import Said
from activity.people import access

MENTIONED = ("comment__author", "comment__tool__chat")
RETRY_SECONDS = 120  # a claimed mail not sent by then is taken again
MAX_TRIES = 5
KEEP_DAYS = 7  # sent (or given up) mails are kept this long, then pruned
LATE_HOURS = 24  # a prompt open this long past a person's minutes is no longer mailed to them
BATCH = 50
PROMPTS_AT_ONCE = 500  # open prompts looked at in one poll, the oldest first
# Mails a person asked for by doing something: sent even after they unsubscribed.
ASKED = ("confirm:", "reset:")
SECRET = ASKED  # their links are secrets: their text is dropped once sent
PROMPT_KEY = re.compile(r"^prompt:([0-9a-f-]{36})$")


def _claim(model: type[Model], pk: object, field: str) -> bool:
    """Take ``model`` row ``pk`` to mail of: one process wins (``field`` is null until then)."""
    unclaimed = model._default_manager.filter(pk=pk, **{f"{field}__isnull": True})
    return unclaimed.update(**{field: timezone.now()}) == 1


def queue(addresses: list[EmailAddress], key: str, said: Said) -> int:
    """One mail of ``said`` to each address (none twice under one key); how many were made."""
    mails = [
        Mail(address=a, key=key, subject=said.subject, text=said.text, html=said.html)
        for a in addresses
    ]
    return len(Mail.objects.bulk_create(mails, ignore_conflicts=True))


def owe(now: datetime | None = None) -> int:
    """Make the mails that are due; how many were made."""
    now = now or timezone.now()
    made = _prompts(now)
    _settled()
    mentions = Mention.objects.filter(mailed_at__isnull=True)
    for mention in mentions.select_related(*MENTIONED)[:BATCH]:
        if _claim(Mention, mention.pk, "mailed_at"):
            made += _mentioned(mention)
    ended = InferenceAttempt.objects.filter(ended_at__isnull=False, mailed_at__isnull=True)
    for turn in ended.select_related("chat")[:BATCH]:
        if _claim(InferenceAttempt, turn.pk, "mailed_at"):
            made += _ended(turn)
    _prune(now)
    return made


def _prompts(now: datetime) -> int:
    minutes = mailwho.prompt_minutes()
    if not minutes:
        return 0
    waiting = Prompt.objects.filter(closed_at__isnull=True, answered_at__isnull=True).filter(
        created_at__lte=now - timedelta(minutes=min(minutes.values())),
        created_at__gte=now - timedelta(minutes=max(minutes.values()), hours=LATE_HOURS),
    )
    made = 0
    for prompt in waiting.select_related("chat", "tool").order_by("created_at")[:PROMPTS_AT_ONCE]:
        key = f"prompt:{prompt.pk}"
        may = set(access.answerers(prompt.chat.workspace_id)) & minutes.keys()
        due = {u for u in may if prompt.created_at <= now - timedelta(minutes=minutes[u])}
        due -= set(Mail.objects.filter(key=key).values_list("address__user_id", flat=True))
        for user_id, addresses in mailwho.addresses(due).items():
            made += queue(addresses, key, mailsays.waiting(prompt, user_id, minutes[user_id]))
    return made


def _settled() -> None:
    """A prompt answered or closed before its mail went out: that mail is not sent at all."""
    unsent = Mail.objects.filter(sent_at__isnull=True, claimed_at__isnull=True)
    keys = unsent.filter(key__startswith="prompt:").values_list("key", flat=True)
    ids = {found[1] for k in keys if (found := PROMPT_KEY.match(k))}
    if not ids:
        return
    settled = Prompt.objects.filter(pk__in=ids).filter(
        Q(closed_at__isnull=False) | Q(answered_at__isnull=False)
    )
    gone = [f"prompt:{pk}" for pk in settled.values_list("pk", flat=True)]
    unsent.filter(key__in=gone).delete()


def _mentioned(mention: Mention) -> int:
    """The person a comment mentions, if they may still see its run, did not write it, have not
    opened it yet and want it mailed."""
    comment = mention.comment
    chat = comment.tool.chat
    if mention.user_id == comment.author_id or mention.seen_at is not None:
        return 0  # their own comment, or opened (or dismissed) already
    if not Membership.objects.filter(user=mention.user_id, workspace=chat.workspace_id).exists():
        return 0
    found = mailwho.addresses(mailwho.wanting([mention.user_id], "mentions"))
    said = mailsays.mentioned(mention)
    return sum(queue(a, f"mention:{mention.pk}", said) for a in found.values())


def _ended(turn: InferenceAttempt) -> int:
    """A turn of a followed run ended: its followers who want it are mailed how."""
    people = mailwho.wanting(who.followers(turn.chat), "follows")
    made = 0
    for user_id, addresses in mailwho.addresses(people).items():
        made += queue(addresses, f"turn:{turn.pk}", mailsays.ended(turn, user_id))
    return made


def _prune(now: datetime) -> None:
    """Sent mails (and those given up) go after ``KEEP_DAYS``; unsent ones a person no longer
    wants (they unsubscribed) or may no longer get (an address not confirmed) go at once."""
    old = Mail.objects.filter(created_at__lt=now - timedelta(days=KEEP_DAYS))
    old.filter(Q(sent_at__isnull=False) | Q(tries__gte=MAX_TRIES)).delete()
    unsent = Mail.objects.filter(sent_at__isnull=True, claimed_at__isnull=True)
    asked = Q(key__startswith=ASKED[0]) | Q(key__startswith=ASKED[1])
    unsubscribed = Q(address__user__mail_prefs__unsubscribed_at__isnull=False)
    unconfirmed = Q(address__confirmed_at__isnull=True) & ~Q(key__startswith="confirm:")
    stale = unsent.filter((unsubscribed & ~asked) | unconfirmed).values_list("pk", flat=True)
    Mail.objects.filter(pk__in=list(stale)).delete()


def take() -> list[Mail]:
    """Claim mails to send now (each claimed by one process only)."""
    stale = timezone.now() - timedelta(seconds=RETRY_SECONDS)
    owed = Mail.objects.filter(sent_at__isnull=True, tries__lt=MAX_TRIES).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=stale)
    )
    owed = owed.filter(Q(address__confirmed_at__isnull=False) | Q(key__startswith="confirm:"))
    taken = []
    for mail in owed.select_related("address")[:BATCH]:
        claim = Mail.objects.filter(pk=mail.pk, claimed_at=mail.claimed_at, sent_at=None)
        if claim.update(claimed_at=timezone.now(), tries=F("tries") + 1) == 1:
            taken.append(mail)
    return taken


def done(mail: Mail, error: str) -> None:
    """Record what came of sending ``mail`` ("" for sent)."""
    if error:
        Mail.objects.filter(pk=mail.pk).update(error=error)
        return
    sent = Mail.objects.filter(pk=mail.pk)
    sent.update(sent_at=timezone.now(), error="")
    if mail.key.startswith(SECRET):
        sent.update(text="", html="")
