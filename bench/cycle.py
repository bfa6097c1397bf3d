"""A deterministic cost figure for the live path: ingest one batch, render its push, N times.

In one process, on a migrated SQLite file in a temp dir (the embedded mode's database: WAL,
``synchronous=NORMAL``), DEBUG off: a workspace and a chat made by a runner's hello
(``live.presence.connect``), a turn started, then ``--cycles`` (50) cycles, each

1. one batch of 12 runner frames (``tool_call`` / ``tool_call_update``, increasing seqs) to
   the 4 calls open at a time, validated as the agent socket validates them
   (``runner_frame.validate_python``) and applied by ``ingest.ingest`` as
   ``pipeline.RunnerSession.drain`` does;
2. the push of that batch's ``ChatChange``, rendered as ``broadcast.changed`` renders it
   (``pushes.render_push(chat_id, since)`` → ``broadcast.push_message``): one render for every
   viewer; one viewer gets its text(s).

Each call lives 10 frames (a ``tool_call``, then updates changing its title, its status, its
output, the last completing it); a completed call's slot opens a new call, so every push has
new rows and changed rows, as an agent's tool calls make them.

It prints the number of cycles and the time they took (setup not counted). For an instruction
count that does not depend on the machine's load (within ~0.5% from run to run: address-space
layout still moves CPython's type and dict caches), with ``--cycles 0`` for the setup's share::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        .venv/bin/python bench/cycle.py

Everything random in the process is made deterministic: the ids the models mint with
``uuid.uuid4`` come from a seeded generator (patched before the models are imported, so the
fields' defaults take it), the chat's and turn's ids are fixed, and the frames' clock is fixed.
Run from the repository's root (``bench/`` is not a package it needs).
"""

# ruff: noqa: E402, I001  (the environment and uuid4 are set before Django is imported)
from __future__ import annotations

import argparse
import inspect
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's root

_ids = random.Random(0)


def _uuid4() -> uuid.UUID:
    return uuid.UUID(int=_ids.getrandbits(128), version=4)


uuid.uuid4 = _uuid4  # before any model is imported: their id fields' default is this

_tmp = Path(tempfile.mkdtemp(prefix="koruweb-cycle-"))
os.environ.update(
    DJANGO_SETTINGS_MODULE="koruweb.settings",
    DATABASE_URL=f"sqlite:///{_tmp / 'cycle.sqlite3'}",
    KORUWEB_VAR_DIR=str(_tmp),
    SECRET_KEY="bench-cycle-not-secret",
    DEBUG="0",
    REDIS_URL="",  # the in-memory channel layer (not used: the push is rendered, not sent)
    LOG_LEVEL="WARNING",
)

import django

django.setup()

from django.core.management import call_command
from django.db import connection

# ---- koruweb's live path: every activity.* import is here (porting changes only these) ----
from activity.push.broadcast import push_message
from activity.wire.frames import runner_frame
from activity.live.ingest import ingest
from activity.models import Workspace
from activity.live.presence import connect
from activity.push.pushes import render_push

# --------------------------------------------------------------------------------------------

CYCLES = 50
BATCH = 12  # frames per cycle
CONCURRENT = 4  # calls open at a time
UPDATES = 10  # frames per call: a tool_call, then 9 tool_call_updates (the last completes it)

T0 = 1_767_000_000_000  # a fixed runner clock, epoch ms
CHAT_ID = uuid.UUID(int=1, version=4)
WORKSPACE_ID = uuid.UUID(int=2, version=4)
ATTEMPT_ID = uuid.UUID(int=3, version=4)
REPLY_ID = uuid.UUID(int=4, version=4)
OUTPUT = "collected 212 items\n\ntests/test_parser.py {}%\n\n212 passed in {:.2f}s\n"


# The runner's frames (as tests/frames.py builds them), as a runner sends them over /ws/agent/.
def turn_started(seq: int, attempt_id: uuid.UUID, message_id: uuid.UUID) -> dict[str, Any]:
    return {
        "type": "turn_started",
        "seq": seq,
        "at": T0 + seq,
        "attempt_id": str(attempt_id),
        "message_id": str(message_id),
        "agent_name": "demo-agent",
        "agent_version": "1.0",
        "prompt": "Make the tests pass",
        "title": "Fix the flaky test",
    }


def session_update(seq: int, update: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": update},
    }
    return {"type": "acp", "seq": seq, "at": T0 + seq, "message": message}


def tool_call(seq: int, call_id: str, title: str, **fields: Any) -> dict[str, Any]:
    update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, **fields}
    return session_update(seq, update)


def tool_update(seq: int, call_id: str, **fields: Any) -> dict[str, Any]:
    update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, **fields}
    return session_update(seq, update)


def output(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


class Workload:
    """``CONCURRENT`` calls open at a time, updated in turn, each ``UPDATES`` frames long."""

    def __init__(self) -> None:
        self.slots: list[tuple[str, int] | None] = [None] * CONCURRENT
        self.turn = 0
        self.calls = 0

    def frame(self, seq: int) -> dict[str, Any]:
        slot = self.turn % CONCURRENT
        self.turn += 1
        current = self.slots[slot]
        if current is None:
            self.calls += 1
            name = f"c{self.calls}"
            self.slots[slot] = (name, 1)
            command = {"command": f"pytest -q tests/test_parser.py -k case_{self.calls}"}
            return tool_call(
                seq, name, f"{name} #{seq}", kind="execute", status="pending", rawInput=command
            )
        name, done = current
        last = done + 1 >= UPDATES
        self.slots[slot] = None if last else (name, done + 1)
        text = OUTPUT.format(done * 100 // UPDATES, seq / 1000)
        if last:
            return tool_update(seq, name, status="completed", content=output(text))
        if done % 3 == 1:  # the title alone
            return tool_update(seq, name, title=f"{name} #{seq}")
        if done % 3 == 2:  # the status and the output
            return tool_update(seq, name, status="in_progress", content=output(text))
        return tool_update(seq, name, title=f"{name} #{seq}", content=output(text))  # both


def apply(chat_id: uuid.UUID, raw: list[dict[str, Any]]) -> Any:
    """One batch, validated as the agent socket validates each frame, then ingested."""
    return ingest(chat_id, [runner_frame.validate_python(r) for r in raw])


def push(change: Any) -> list[str]:
    """The push of a committed change, as ``broadcast.changed`` renders it; what a viewer gets."""
    if change.version <= change.since:
        return []
    message = push_message(render_push(change.chat_id, change.since))
    return [message["text"], *message.get("more", ())]


class Queries:
    """Counts the SQL statements of each step of a cycle (``connection.execute_wrapper``)."""

    def __init__(self) -> None:
        self.step = ""
        self.counts: dict[str, int] = {}

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.counts[self.step] = self.counts.get(self.step, 0) + 1
        return execute(sql, params, many, context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=CYCLES)
    cycles = parser.parse_args().cycles
    try:
        call_command("migrate", verbosity=0)
        workspace = Workspace.objects.create(id=WORKSPACE_ID, slug="bench", name="Bench")
        change, _ = connect(workspace.pk, CHAT_ID, "runner")  # the runner's hello
        push(change)
        push(apply(CHAT_ID, [turn_started(1, ATTEMPT_ID, REPLY_ID)]).change)
        load = Workload()
        seq = 1
        sent = 0
        queries = Queries()
        start = time.perf_counter()
        with connection.execute_wrapper(queries):
            for _ in range(cycles):
                queries.step = "ingest"
                batch = [load.frame(seq + n) for n in range(1, BATCH + 1)]
                seq += BATCH
                result = apply(CHAT_ID, batch)
                assert result.acked == seq and not result.errors, result
                queries.step = "push"
                texts = push(result.change)
                assert texts, "a batch that changed nothing"
                sent += sum(map(len, texts))
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(_tmp, ignore_errors=True)
    print(f"code: {Path(inspect.getfile(ingest)).parent}")  # the checkout measured
    print(f"cycles: {cycles}")
    each = f" ({elapsed / cycles * 1000:.2f} ms per cycle)" if cycles else ""
    print(f"total: {elapsed:.3f} s{each}")
    print(f"frames: {cycles * BATCH}, calls: {load.calls}, pushed: {sent} bytes")
    if cycles:
        each = ", ".join(f"{n / cycles:.1f} to {step}" for step, n in queries.counts.items())
        print(f"queries per cycle: {each}")


if __name__ == "__main__":
    main()
