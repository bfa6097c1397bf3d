"""The agent's session: started, or taken up again (docs/protocol.md#resuming-a-run).

Agents say what they can do with a session in ``initialize``'s ``agentCapabilities``, each its
own way, so the runner reads what each one advertised and never assumes:

- ``sessionCapabilities.resume``: ``session/resume`` takes a session up without replaying it
  (claude-agent-acp, codex-acp);
- ``loadSession``: ``session/load`` takes it up *and replays the whole conversation* as
  ``session/update`` notifications (gemini-cli offers only this; it streams them around its
  answer). The server has that conversation already, so nothing the agent sends is forwarded
  until the runner's first prompt: the run's page would otherwise show every past message and
  call twice;
- ``sessionCapabilities.close``: ``session/close`` ends it (the web's Stop).

An agent that asks to authenticate first (``Authentication required``) is authenticated with the
first method whose credentials are in the environment (``setup.pick``), then asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acp import RequestError
from acp.client.connection import ClientSideConnection

from activity.runner import setup
from activity.runner.turns import TurnTable

AUTH_REQUIRED = -32000  # JSON-RPC error code: "Authentication required"
CANNOT = (
    "the agent cannot resume a session: it offers neither session/resume nor session/load "
    "(its initialize says so)"
)


class NoCredentials(Exception):
    """The agent asks to authenticate and cannot be (exit 6): why, in words."""


@dataclass(frozen=True)
class Capable:
    resume: bool  # session/resume or session/load
    replays: bool  # only session/load: the conversation is replayed before the answer
    close: bool  # session/close


def capable(init: Mapping[str, Any]) -> Capable:
    """What ``initialize``'s answer (dumped by alias) says the agent can do with a session."""
    offered = init.get("agentCapabilities")
    offered = offered if isinstance(offered, dict) else {}
    session = offered.get("sessionCapabilities")
    session = session if isinstance(session, dict) else {}
    resumes = isinstance(session.get("resume"), dict)
    loads = offered.get("loadSession") is True
    return Capable(
        resume=resumes or loads,
        replays=loads and not resumes,
        close=isinstance(session.get("close"), dict),
    )


async def take_up(
    conn: ClientSideConnection, table: TurnTable, can: Capable, session_id: str, cwd: str
) -> Any:
    """``session/resume``, else ``session/load`` with its replay held back from the server."""
    if not can.replays:
        return await conn.resume_session(session_id=session_id, cwd=cwd, mcp_servers=[])
    # Held back until the runner's first prompt, not just until the answer: gemini-cli streams
    # its replay without waiting for it, so part of it comes after the answer.
    table.replaying = True
    return await conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=[])


def said(error: RequestError) -> str:
    """An agent's error with the details it gave (``data``), in one line."""
    data = error.data
    details = data.get("details") if isinstance(data, dict) else data
    return f"{error} ({details})" if isinstance(details, str) and details else str(error)


async def close(conn: ClientSideConnection, session_id: str, seconds: float) -> None:
    """``session/close``, given ``seconds``; an agent that fails it is stopped anyway."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.close_session(session_id=session_id), seconds)


async def authenticated(
    init: Mapping[str, Any], ask: Callable[[], Awaitable[Any]], conn: Any
) -> Any:
    """``ask()``; when the agent asks to authenticate first, again after authenticating with
    the first method whose credentials are in the environment. Raises ``NoCredentials``."""
    try:
        return await ask()
    except RequestError as error:
        if error.code != AUTH_REQUIRED:
            raise
    methods = setup.auth_methods(init)
    method = setup.pick(methods, os.environ)
    if method is None:
        raise NoCredentials(setup.no_credentials(methods))
    try:
        await conn.authenticate(method_id=method.id)
    except RequestError as error:
        raise NoCredentials(f"the agent refused authentication with {method.id}: {error}") from None
    return await ask()
