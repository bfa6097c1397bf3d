"""What the web asks of a host: one level of a directory, and a run started.

1. The *New run* page asks for a directory (``ask_listing``): a ``list`` frame goes to the
   host's socket through the channel layer with a reply channel, the host's session
   (activity/live/hosts.py) sends the host's ``listing`` back on it, and the page waits for it
   at most ``HOST_REPLY_SECONDS``: an offline or slow host is an error in words, never a hang.
2. *Start* (``start_run``) refuses a busy host (its runs starting or started at its
   ``max_runs``) and any field with a NUL, a lone surrogate or too many characters, makes the
   run's chat id and a fresh agent token for that chat alone, records a ``HostRun`` and sends
   ``start``; the host's ``started`` (which must name that chat) and ``exited`` update it. A
   start the server cannot deliver fails at once and its token is revoked
   (activity/live/run_tokens.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import transaction

from activity.live.run_tokens import revoke_run_token
from activity.models.accounts import AgentHost, AgentToken, HostRun, HostRunStatus, TokenKind
from activity.wire.hostframes import (
    FIRST_PROMPT_CHARS,
    PATH_CHARS,
    TITLE_CHARS,
    ListDir,
    Listing,
    Resume,
    Start,
)

log = logging.getLogger(__name__)
HOST_REPLY_SECONDS = 5.0  # how long a page waits for a host's listing
Status = HostRunStatus


class HostError(Exception):
    """What the web asked a host cannot be done: the reason, in words, for the person."""


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
    refuse_unfit("The first prompt", prompt, FIRST_PROMPT_CHARS)
    refuse_unfit("The title", title or "", TITLE_CHARS)
    if not prompt:
        raise HostError("Write the first prompt: what should the agent do?")
    run, frame = prepare(host, user, agent, root, path, uuid.uuid4(), prompt=prompt, title=title)
    send(host, run, frame)
    return run


def prepare(
    host: AgentHost,
    user: User,
    agent: str,
    root: str,
    path: str,
    chat_id: uuid.UUID,
    *,
    prompt: str | None = None,
    title: str | None = None,
    resume: Resume | None = None,
) -> tuple[HostRun, Start]:
    """The run of ``agent`` in ``path`` under ``root`` for chat ``chat_id``, recorded with a
    token for that chat alone, and the ``start`` that asks the host for it (``send``); raises
    ``HostError`` having recorded nothing: a busy host, a field no host could take."""
    for said, value, most in (
        ("The agent", agent, 64),
        ("The directory", root, PATH_CHARS),
        ("The directory", path, PATH_CHARS),
    ):
        refuse_unfit(said, value, most)
    check(host, root, path, agent)
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
        token, plain = AgentToken.issue(
            host.workspace, name, TokenKind.AGENT, host_token, chat_id=chat_id
        )
        run = HostRun.objects.create(
            host=host,
            agent=agent,
            token=token,
            requested_by=user,
            chat_id=chat_id,
            root=root,
            path=path,
            resumes=resume is not None,
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
        resume=resume,
    )
    return run, frame


def send(host: AgentHost, run: HostRun, frame: Start) -> None:
    """Send the host its ``start``; one the server cannot deliver fails the run at once."""
    try:
        async_to_sync(get_channel_layer().send)(
            host.channel, {"type": "host.ask", "text": frame.model_dump_json(), "id": str(run.pk)}
        )
    except Exception as fault:
        log.warning("asking host %s to start a run failed: %r", host.pk, fault)
        fail(run, "the server could not reach the host; try again")


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
