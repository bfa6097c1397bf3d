"""Agent hosts on the server: a host's socket session, and what the web asks of a host.

A host (``manage.py agent host``, ``runner/host.py``) connects to ``/ws/host/`` with a host
token (``consumers.HostConsumer``, which only relays to a ``HostSession``):

1. Its first frame is a ``host_hello`` (one of another ``frames.PROTOCOL_VERSION``, or of none,
   closes with ``CLOSE_UPGRADE`` and the runner to install): the ``AgentHost`` of its token
   and name is made or updated (its agents, roots and ``max_runs``) and shown online on this
   socket; the host is told ``welcome``. Another host process of the same name online in the
   workspace is refused (``CLOSE_FORBIDDEN``); the runs the server counts as running on it that
   its hello does not list ended while it was away (``reconcile``). A heartbeat keeps it
   "seen" while the socket is up and ends with it (docs/gotchas.md#tasks-outlive-their-socket);
   a host silent for three heartbeats counts as offline (``AgentHost.is_online``).
2. The *New run* page asks for a directory (``ask_listing``): a ``list`` frame goes to the
   host's socket through the channel layer with a reply channel, the session sends the
   host's ``listing`` back on it, and the page waits for it at most ``HOST_REPLY_SECONDS``:
   an offline or slow host is an error in words, never a hang.
3. *Start* (``start_run``) refuses a busy host (its runs starting or started at its
   ``max_runs``) and any field with a NUL, a lone surrogate or too many characters, makes the
   run's chat id and a fresh agent token for that chat alone, records a ``HostRun`` and sends
   ``start``; the host's ``started`` (which must name that chat) and ``exited`` update it.

A run's token is revoked when its run ends: the host reports it failed or exited, the host
reconnects without it, presence counts its runner gone past ``RUNNER_GRACE_SECONDS``, or it
is still *starting* after ``HOST_START_SECONDS`` (``sweep``, from every process's watchdog).
A host that is only away (a restart of the server, a network blip) ends none of its runs.

A host token never writes a chat (``/ws/agent/`` takes only agent tokens); revoking it closes
the host's socket (``groups.token``) and revokes the tokens it was given for its runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from pydantic import ValidationError

from activity.core import groups
from activity.live import boundary
from activity.models import Chat
from activity.models.accounts import (
    RUNNING,
    AgentHost,
    AgentToken,
    HostRun,
    HostRunStatus,
    TokenKind,
)
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_TOO_LARGE,
    CLOSE_UPGRADE,
    MAX_FRAME_BYTES,
    other_protocol,
    upgrade_reason,
)
from activity.wire.hostframes import (
    FIRST_PROMPT_CHARS,
    PATH_CHARS,
    TITLE_CHARS,
    Exited,
    HostHello,
    ListDir,
    Listing,
    Start,
    Started,
    Welcome,
    host_frame,
)

log = logging.getLogger(__name__)
HOST_REPLY_SECONDS = 5.0  # how long a page waits for a host's listing
ASKED_MAX = 100  # listings a session waits for at once; the oldest is forgotten past it
CHAT_URL = re.compile(r"/chats/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/")
Status = HostRunStatus


class HostError(Exception):
    """What the web asked a host cannot be done: the reason, in words, for the person."""


class Duplicate(Exception):
    """Another host process of the same name is online in the workspace."""


class Socket(Protocol):
    channel_name: str

    async def send_text(self, text: str) -> None: ...

    async def close(self, code: int | None = None, reason: str | None = None) -> None: ...

    async def join(self, group: str) -> None: ...

    async def leave(self, group: str) -> None: ...


class HostSession:
    def __init__(self, workspace_id: uuid.UUID, token_id: int, socket: Socket) -> None:
        self.workspace_id = workspace_id
        self.token_id = token_id
        self.socket = socket
        self.host_id: uuid.UUID | None = None
        self.asked: dict[str, str] = {}  # a list frame's id → the reply channel of its page
        self.heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.socket.join(groups.token(self.token_id))  # a revoked token closes us

    async def receive(self, text: str | None) -> None:
        if text is None or len(text) > MAX_FRAME_BYTES:
            await self.socket.close(code=CLOSE_TOO_LARGE, reason="frames are JSON under 1 MiB")
            return
        try:
            raw = boundary.load(text)
            if self.host_id is None:
                if other_protocol(raw, "host_hello"):  # a host of another release
                    await self.socket.close(code=CLOSE_UPGRADE, reason=upgrade_reason())
                    return
                await self.hello(HostHello.model_validate(raw))
                return
            frame = host_frame.validate_python(raw)
        except (boundary.Unreadable, ValidationError) as error:
            said = str(error).splitlines()[0][:300]
            if self.host_id is None:
                await self.socket.close(code=CLOSE_PROTOCOL, reason="the first frame is a hello")
            log.warning("a host sent a frame the server cannot use: %s", said)
            return
        match frame:
            case Listing():
                reply = self.asked.pop(str(frame.id), None)
                if reply is not None:
                    listing = {"type": "host.listing", "listing": frame.model_dump(mode="json")}
                    await get_channel_layer().send(reply, listing)
            case Started():
                await database_sync_to_async(started)(self.host_id, frame)
            case Exited():
                await database_sync_to_async(exited)(self.host_id, frame)

    async def hello(self, hello: HostHello) -> None:
        try:
            host, revoked = await database_sync_to_async(connect)(
                self.workspace_id, self.token_id, hello, self.socket.channel_name
            )
        except Duplicate as duplicate:
            await self.socket.close(code=CLOSE_FORBIDDEN, reason=str(duplicate)[:123])
            return
        await close_sockets(revoked)
        self.host_id = host.pk
        self.heartbeat = asyncio.get_running_loop().create_task(self.beat(host.pk))
        page = reverse("workspace", args=[host.workspace.slug])
        await self.socket.send_text(Welcome(page=page).model_dump_json())

    async def ask(self, event: dict[str, Any]) -> None:
        """A page's request for the host (``host.ask``): sent on; a listing's reply channel
        is kept until the host answers."""
        reply = event.get("reply")
        if reply:
            self.asked[event["id"]] = reply
            while len(self.asked) > ASKED_MAX:
                self.asked.pop(next(iter(self.asked)))
        await self.socket.send_text(event["text"])

    async def beat(self, host_id: uuid.UUID) -> None:
        """The host is here while its socket is; a failed write is tried again within a
        second. Nothing but the socket's end stops it."""
        interval = settings.RUNNER_HEARTBEAT_SECONDS
        failing = False
        while True:
            await asyncio.sleep(min(1.0, interval) if failing else interval)
            try:
                await database_sync_to_async(alive)(host_id, self.socket.channel_name)
                await self.socket.join(groups.token(self.token_id))
                failing = False
            except Exception as fault:
                if not failing:
                    log.warning("the heartbeat of host %s failed, retrying: %r", host_id, fault)
                failing = True

    def end_tasks(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.cancel()

    async def stop(self) -> None:
        self.end_tasks()
        await self.socket.leave(groups.token(self.token_id))
        if self.host_id is not None:
            try:
                await database_sync_to_async(left)(self.host_id, self.socket.channel_name)
            except Exception as fault:  # its silence says it instead (host_silence)
                log.warning("host %s left while the database was away: %r", self.host_id, fault)


# --- the database side of a session ---------------------------------------------------------


def connect(
    workspace_id: uuid.UUID, token_id: int, hello: HostHello, channel: str
) -> tuple[AgentHost, list[int]]:
    """The host of this hello, online on ``channel``, and the run tokens revoked because its
    hello no longer lists their runs; raises ``Duplicate``, having changed nothing, while
    another host process of the same name is online in the workspace."""
    with transaction.atomic():
        others = AgentHost.objects.select_for_update().filter(
            workspace_id=workspace_id, name=hello.name
        )
        for other in others:
            same = other.token_id == token_id and bool(hello.instance)
            if other.is_online and not (same and other.instance == hello.instance):
                raise Duplicate(
                    f"a host named {hello.name[:40]} is online in this workspace already; "
                    "stop it, or give this one another --name"
                )
        host, _ = AgentHost.objects.update_or_create(
            token_id=token_id,
            name=hello.name,
            defaults={
                "workspace_id": workspace_id,
                "agents": [agent.model_dump() for agent in hello.agents],
                "roots": list(hello.roots),
                "online": True,
                "channel": channel,
                "instance": hello.instance or "",
                "max_runs": hello.max_runs,
                "seen_at": timezone.now(),
            },
        )
        revoked = reconcile(host, hello.runs)
    return AgentHost.objects.select_related("workspace").get(pk=host.pk), revoked


def reconcile(host: AgentHost, running: list[uuid.UUID] | None) -> list[int]:
    """The host says which of its runs it runs now (``running``; None: a host that does not
    say): the others the server counts as running ended while it was away. Their tokens are
    revoked: their ids."""
    if running is None:
        return []
    gone = list(host.runs.filter(status__in=RUNNING).exclude(pk__in=running))
    for run in gone:
        if run.status == Status.STARTING:
            run.status, run.error = Status.FAILED, "the host no longer runs it (was it restarted?)"
        else:
            run.status = Status.EXITED
        run.save(update_fields=["status", "error"])
    return revoke_tokens([run.token_id for run in gone if run.token_id is not None])


def alive(host_id: uuid.UUID, channel: str) -> None:
    AgentHost.objects.filter(pk=host_id, channel=channel).update(seen_at=timezone.now())


def left(host_id: uuid.UUID, channel: str) -> None:
    """Only the host's latest socket decides whether it is online."""
    AgentHost.objects.filter(pk=host_id, channel=channel).update(online=False)


def started(host_id: uuid.UUID | None, frame: Started) -> None:
    """The host's word on its run: its page, which must be the run's own chat (a host names
    only chats it started), or why it did not start. Anything else fails the run."""
    found = CHAT_URL.search(frame.chat_url or "")
    with transaction.atomic():
        run = HostRun.objects.select_for_update().filter(pk=frame.id, host_id=host_id).first()
        if run is None or run.status != Status.STARTING:
            return
        if frame.error is not None or found is None:
            run.status = Status.FAILED
            run.error = frame.error or "the runner printed no run page"
            revoke_run_token(run)
        elif run.chat_id is not None and uuid.UUID(found.group(1)) != run.chat_id:
            run.status, run.error = Status.FAILED, "the host reported a page that is not this run's"
            revoke_run_token(run)
        else:
            run.status, run.chat_id = Status.STARTED, uuid.UUID(found.group(1))
        run.save(update_fields=["status", "chat_id", "error"])


def exited(host_id: uuid.UUID | None, frame: Exited) -> None:
    with transaction.atomic():
        run = HostRun.objects.select_for_update().filter(pk=frame.id, host_id=host_id).first()
        if run is None:
            return
        if run.status == Status.STARTING:
            run.status = Status.FAILED
            run.error = f"the runner exited with code {frame.code} before its run started"
        elif run.status == Status.STARTED:
            run.status = Status.EXITED
        run.code = frame.code
        run.save(update_fields=["status", "error", "code"])
        revoke_run_token(run)


def revoke_run_token(run: HostRun) -> None:
    if run.token_id is not None:
        revoke_tokens([run.token_id])


def revoke_tokens(token_ids: list[int]) -> list[int]:
    """Revoke those of ``token_ids`` not yet revoked: their ids."""
    live = AgentToken.objects.filter(pk__in=token_ids, revoked_at__isnull=True)
    revoked = list(live.values_list("pk", flat=True))
    AgentToken.objects.filter(pk__in=revoked).update(revoked_at=timezone.now())
    return revoked


async def close_sockets(token_ids: list[int]) -> None:
    """The sockets still open with these (revoked) tokens close (``consumers.token_revoked``)."""
    layer = get_channel_layer()
    for token_id in token_ids:
        await layer.group_send(groups.token(token_id), {"type": "token.revoked"})


def revoke_issued(token: AgentToken) -> list[int]:
    """The run tokens a host token's host was given, revoked with it: their ids."""
    issued = list(token.issued.filter(revoked_at__isnull=True).values_list("pk", flat=True))
    AgentToken.objects.filter(pk__in=issued).update(revoked_at=timezone.now())
    return issued


def sweep(now: datetime | None = None) -> list[int]:
    """The run tokens of runs that ended without a word, revoked: their ids. A run still
    *starting* after ``HOST_START_SECONDS`` fails; a run whose runner presence counts gone past
    ``RUNNER_GRACE_SECONDS`` (its socket closed, or silent on a process that died) exits. A
    runner that is only reconnecting is back within the grace, and keeps its token."""
    now = now or timezone.now()
    waited = f"the host did not start it within {settings.HOST_START_SECONDS} s"
    with transaction.atomic():  # a run the host reports started meanwhile keeps its token
        stuck = list(
            HostRun.objects.select_for_update().filter(
                status=Status.STARTING,
                created_at__lt=now - timedelta(seconds=settings.HOST_START_SECONDS),
            )
        )
        HostRun.objects.filter(pk__in=[run.pk for run in stuck]).update(
            status=Status.FAILED, error=waited
        )
    tokens = [run.token_id for run in stuck if run.token_id is not None]
    gone_chats = Chat.objects.filter(
        runner_connected=False,
        runner_left_at__lt=now - timedelta(seconds=settings.RUNNER_GRACE_SECONDS),
    ).values("pk")
    gone = AgentToken.objects.filter(chat_id__in=gone_chats, revoked_at__isnull=True)
    gone_ids = list(gone.values_list("pk", flat=True))
    HostRun.objects.filter(token_id__in=gone_ids, status=Status.STARTED).update(
        status=Status.EXITED
    )
    return revoke_tokens(tokens + gone_ids)


# --- what the web asks of a host ------------------------------------------------------------


def check(host: AgentHost, root: str, path: str, agent: str | None = None) -> None:
    """Refuse, in words, what the host would refuse anyway (the host decides for good: it
    resolves symlinks, which the server cannot see)."""
    if not host.is_online:
        raise HostError(f"The host {host} is offline: start `manage.py agent host` there again.")
    if agent is not None and agent not in host.agent_names:
        offered = ", ".join(host.agent_names)
        raise HostError(f"The host {host} offers no agent “{agent}”; it offers: {offered}.")
    if root not in host.roots:
        raise HostError(f"“{root}” is not one of the directories {host} offers.")
    parts = path.replace("\\", "/").split("/")
    if path.startswith("/") or ".." in parts or len(path) > 4096:
        raise HostError(f"“{path}” is outside {root}: pick a directory inside it.")


async def ask_listing(host: AgentHost, root: str, path: str) -> Listing:
    """One level of ``path`` under ``root``, from the host; raises ``HostError``."""
    check(host, root, path)
    layer = get_channel_layer()
    reply = await layer.new_channel()
    frame = ListDir(id=uuid.uuid4(), root=root, path=path)
    asked = {"type": "host.ask", "text": frame.model_dump_json(), "id": str(frame.id)}
    await layer.send(host.channel, {**asked, "reply": reply})
    try:
        message = await asyncio.wait_for(layer.receive(reply), HOST_REPLY_SECONDS)
    except TimeoutError:
        raise HostError(
            f"The host {host} did not answer within {HOST_REPLY_SECONDS:g} s: is it still "
            "running and connected?"
        ) from None
    listing = Listing.model_validate(message["listing"])
    if listing.error:
        raise HostError(listing.error)
    return listing


def start_run(
    host: AgentHost,
    user: User,
    agent: str,
    root: str,
    path: str,
    prompt: str,
    title: str | None = None,
) -> HostRun:
    """Ask ``host`` to start ``agent`` in ``path`` under ``root`` with its first prompt, as a
    runner of a chat whose id is made here, with a token for that chat alone; raises
    ``HostError`` having sent nothing."""
    prompt = prompt.strip()
    for said, value, most in (
        ("The agent", agent, 64),
        ("The directory", root, PATH_CHARS),
        ("The directory", path, PATH_CHARS),
        ("The first prompt", prompt, FIRST_PROMPT_CHARS),
        ("The title", title or "", TITLE_CHARS),
    ):
        refuse_unfit(said, value, most)
    check(host, root, path, agent)
    if not prompt:
        raise HostError("Write the first prompt: what should the agent do?")
    with transaction.atomic():
        host = AgentHost.objects.select_for_update().select_related("workspace").get(pk=host.pk)
        running = host.running()
        if host.max_runs is not None and running >= host.max_runs:
            raise HostError(
                f"The host {host} is busy ({running}/{host.max_runs} runs): wait for one of its "
                "runs to end, or start one on another host."
            )
        host_token = AgentToken.objects.get(pk=host.token_id)
        name = f"{host.name}/{agent} (run)"[:100]
        chat_id = uuid.uuid4()
        token, plain = AgentToken.issue(
            host.workspace, name, TokenKind.AGENT, host_token, chat_id=chat_id
        )
        run = HostRun.objects.create(
            host=host, agent=agent, token=token, requested_by=user, chat_id=chat_id
        )
    frame = Start(
        id=run.pk,
        agent=agent,
        root=root,
        path=path,
        chat_id=chat_id,
        prompt=prompt,
        title=title,
        token=plain,
    )
    try:
        async_to_sync(get_channel_layer().send)(
            host.channel, {"type": "host.ask", "text": frame.model_dump_json(), "id": str(run.pk)}
        )
    except Exception as fault:
        log.warning("asking host %s to start a run failed: %r", host.pk, fault)
        fail(run, "the server could not reach the host; try again")
    return run


def refuse_unfit(said: str, value: str, most: int) -> None:
    """``HostError`` for a field no host could take: a NUL (no command line or path holds one),
    a lone surrogate (no UTF-8 does), or more than ``most`` characters."""
    if "\x00" in value:
        raise HostError(f"{said} holds a NUL character (\\0): remove it and start again.")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise HostError(
            f"{said} holds a character that is not text (a lone surrogate): remove it."
        ) from None
    if len(value) > most:
        raise HostError(
            f"{said} is at most {most:,} characters; this one has {len(value):,}."
            + (
                " Start with a shorter one and send the rest from the run's page."
                if said == "The first prompt"
                else ""
            )
        )


def fail(run: HostRun, error: str) -> None:
    HostRun.objects.filter(pk=run.pk, status=Status.STARTING).update(
        status=Status.FAILED, error=error
    )
    revoke_run_token(run)
