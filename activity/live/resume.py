"""A run that outlives its runner: taken up again on its host, or ended from its page
(docs/protocol.md#resuming-a-run).

- **Resume** (a run a host started, once its runner is gone, for an agent that can resume its
  sessions): the chat gets a new secret at once — the runner that had it is refused if it ever
  comes back — and says who resumed it; the host is asked to start a runner in the run's
  directory that takes the agent's session up again (``Start.resume``). That runner replaces
  the secret with its own in its hello (``presence.take_over``) and the run goes on in place.
- **Stop** (a run a host started, its runner connected): the runner is told ``stop``: it
  cancels its turn, runs none of the messages waiting, closes the agent's session where the
  agent offers ``session/close``, and exits; the host reports it exited. The messages waiting
  are removed, by the person who stopped the run; the chat says who stopped it.

Both are for approvers and admins of the run's workspace (``web/drive.py`` checks) and are
pushed to every viewer like any change of the chat.
"""

from __future__ import annotations

import secrets
import uuid

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from activity.core.refusals import Refusal
from activity.live import chats, host_asks
from activity.live.drive import Done, show
from activity.live.presence import digest
from activity.models import WebPrompt, WebPromptStatus
from activity.models.accounts import HostRunStatus
from activity.wire.hostframes import Resume
from activity.wire.orders import WebStop


def resume(chat_id: uuid.UUID, user: User) -> Done:
    """Ask the run's host to take its agent session up again; raises ``Refusal`` having
    changed nothing."""
    secret = secrets.token_urlsafe(32)
    with transaction.atomic(), chats.change(chat_id) as work:
        chat = work.chat
        run, why = chat.host_run, chat.cannot_resume
        if why or run is None:
            raise Refusal(f"This run cannot be resumed here. {why}", 409)
        chat.runner_secret_hash = digest(secret)  # the old runner is refused from now on
        chat.resumed_at, chat.resumed_by = timezone.now(), user
        chat.resumed_via, chat.stopped_at, chat.stopped_by = f"host {run.host.name}", None, None
        work.touch_meta("runner_secret_hash", "resumed_at", "resumed_by", "resumed_via")
        work.touch_meta("stopped_at", "stopped_by")
        chat.runner_left_at = None  # so no sweep counts the new runner's token gone meanwhile
        work.touch_meta("runner_left_at")
        base = chat.changes_base or None  # its whole change counts from the run's start
        taken = Resume(session_id=chat.agent_session_id, secret=secret, base=base)
        try:
            new, frame = host_asks.prepare(
                run.host, user, run.agent, run.root, run.path, chat.pk, resume=taken
            )
        except host_asks.HostError as error:
            raise Refusal(str(error), 409) from None
    host_asks.send(run.host, new, frame)
    return Done(work.done, f"Asked {run.host.name} to resume the run…")


def stop(chat_id: uuid.UUID, user: User) -> Done:
    """Tell the run's runner to end the run; raises ``Refusal`` having changed nothing."""
    with chats.change(chat_id, related=("current_attempt",)) as work:
        chat = work.chat
        if chat.host_run is None or chat.host_run.status != HostRunStatus.STARTED:
            raise Refusal("Only a run a host started, while it runs, can be stopped here.", 409)
        if not chat.runner_connected:
            raise Refusal("The runner is offline: try again once it is connected.", 409)
        now = timezone.now()
        chat.stopped_at, chat.stopped_by = now, user
        work.touch_meta("stopped_at", "stopped_by")
        waiting = WebPrompt.objects.filter(chat=chat, status__in=WebPrompt.WAITING)
        if waiting.update(status=WebPromptStatus.REMOVED, removed_by=user, removed_at=now):
            show(work)
        attempt = chat.current_attempt
        if attempt is not None and attempt.ended_at is None and attempt.cancelled_by_id is None:
            attempt.cancelled_by, attempt.cancel_asked_at = user, now
            work.touch(attempt, "cancelled_by", "cancel_asked_at")
    frame = WebStop(id=uuid.uuid4(), by=user.get_username()[:150])
    return Done(work.done, "Asked the runner to end the run.", [frame.model_dump_json()])
