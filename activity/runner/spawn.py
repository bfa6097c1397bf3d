"""Start the agent in a process group of its own and speak ACP with it over its stdio.

Every line the agent writes passes through ``relay`` first: the SDK's reader drops a connection
on anything but one JSON object per line, so a JSON-RPC batch (an array) is split into its
messages, and a line that is not a JSON object, or a message whose id is a list or an object
(no JSON-RPC id), is reported once and skipped.

A terminal's Ctrl-C goes to its foreground process group: were the agent in the runner's, it
would get SIGINT too, and most agents quit on it. In a group of its own only the runner hears
it, and the runner decides: cancel the turn (``session/cancel``), or quit. When the runner is
done the agent's input is closed, then its whole group is terminated, then killed, so a shell
command it left running does not outlive the run; if the runner itself is killed, the kernel
sends the agent SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from acp import Client
from acp.client.connection import ClientSideConnection

SHUTDOWN_SECONDS = 2.0
PR_SET_PDEATHSIG = 1


@contextlib.asynccontextmanager
async def spawn(
    client: Client,
    command: list[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    limit: int,
    warn: Callable[[str], None],
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
        preexec_fn=_die_with_runner,
    )
    assert process.stdin is not None and process.stdout is not None
    reader = asyncio.StreamReader(limit=limit)
    pump = asyncio.create_task(relay(process.stdout, reader, warn))
    conn = ClientSideConnection(client, process.stdin, reader, **connection)
    try:
        yield conn, process
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        await stop(process)
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


async def relay(
    source: asyncio.StreamReader, sink: asyncio.StreamReader, warn: Callable[[str], None]
) -> None:
    """Copy the agent's messages to the SDK's reader, one JSON object per line."""
    try:
        while line := await _line(source):
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                warn(f"the agent wrote a line that is not JSON, skipped: {line[:80]!r}")
                continue
            for item in message if isinstance(message, list) and message else [message]:
                if not isinstance(item, dict):
                    warn(f"the agent sent a JSON-RPC message that is not an object: {item!r:.80}")
                elif isinstance(item.get("id"), list | dict):  # the SDK's reader would stop on it
                    # Not the id itself: an agent's ids are never shown (ids.py).
                    shape = "a list" if isinstance(item["id"], list) else "an object"
                    warn(f"the agent sent a message whose id is {shape}, no JSON-RPC id; skipped")
                elif item is message:
                    sink.feed_data(line if line.endswith(b"\n") else line + b"\n")
                else:  # one message of a JSON-RPC batch
                    sink.feed_data(json.dumps(item).encode() + b"\n")
    finally:
        sink.feed_eof()


async def _line(source: asyncio.StreamReader) -> bytes:
    """One line, however long (the limit bounds each read, not the line)."""
    chunks: list[bytes] = []
    while True:
        try:
            chunks.append(await source.readuntil(b"\n"))
            return b"".join(chunks)
        except asyncio.LimitOverrunError as over:
            chunks.append(await source.readexactly(over.consumed))
        except asyncio.IncompleteReadError as end:
            chunks.append(end.partial)
            return b"".join(chunks)


def _die_with_runner() -> None:
    """In the agent's process (Linux): SIGTERM when the runner dies, however it dies, so an
    agent in its own process group is never left behind."""
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


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


class OneLine(logging.Formatter):
    """The SDK logs what it could not handle with a traceback; a person needs one line."""

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        text = f"koruweb: {record.getMessage()}" + (f": {error!r}" if error else "")
        return text.splitlines()[0][:300]


def not_sdk_notification_error(record: logging.LogRecord) -> bool:
    """The SDK logs every notification it could not handle; the runner forwards them all raw,
    says itself which it does not understand, and the server says which it could not read."""
    return not record.getMessage().startswith("Unhandled error while handling notification")


def one_line_logs() -> None:
    """What the SDK logs goes to standard error, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    handler.addFilter(not_sdk_notification_error)
    logging.basicConfig(handlers=[handler], level=logging.WARNING, force=True)
