"""Start the agent in a process group of its own and speak ACP with it over its stdio.

A terminal's Ctrl-C goes to its foreground process group: were the agent in the runner's, it
would get SIGINT too, and most agents quit on it. In a group of its own only the runner hears
it, and the runner decides: cancel the turn (``session/cancel``), or quit. When the runner is
done the agent's input is closed, then its whole group is terminated, then killed, so a shell
command it left running does not outlive the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from typing import Any

from acp import Client
from acp.client.connection import ClientSideConnection

SHUTDOWN_SECONDS = 2.0


@contextlib.asynccontextmanager
async def spawn(
    client: Client,
    command: list[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    limit: int,
    **connection: Any,
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """The agent's process and an ACP connection to it; raises ``OSError`` if it cannot start."""
    program, *args = command
    process = await asyncio.create_subprocess_exec(
        program,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,  # the agent's own messages go to the runner's terminal
        env=dict(env),
        cwd=cwd,
        limit=limit,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    conn = ClientSideConnection(client, process.stdin, process.stdout, **connection)
    try:
        yield conn, process
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        await stop(process)


async def stop(process: asyncio.subprocess.Process) -> None:
    """Close the agent's input, then SIGTERM and at last SIGKILL its process group."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    for sent in (None, signal.SIGTERM, signal.SIGKILL):
        if sent is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sent)
        try:
            await asyncio.wait_for(process.wait(), SHUTDOWN_SECONDS)
        except TimeoutError:
            continue
        if sent is None:  # it left by itself; whatever it started goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        return
