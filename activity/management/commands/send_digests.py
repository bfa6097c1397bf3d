"""Queue and send today's digests: ``manage.py send_digests``, from cron once a day
(docs/email.md). Each person who turned the digest on gets at most one a day however often it
runs; it then sends every mail owed (the notifiers of the server processes would otherwise send
them within ``NOTIFY_POLL_MS``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from activity.notify import digest, mailwork


class Command(BaseCommand):
    help = "Queue today's email digests (one per person per day) and send the mail owed."

    def handle(self, *args: Any, **options: Any) -> None:
        queued = digest.queue_all()
        sent = mailwork.send_now()
        digests = f"{queued} digest{'s' if queued != 1 else ''}"
        self.stdout.write(f"Queued {digests}; sent {sent} mail{'s' if sent != 1 else ''}.")
