"""What a runner keeps on its machine so that ``koruweb agent --resume RUN`` can take the run up
again there (docs/protocol.md#resuming-a-run): agents keep their sessions on the machine that ran
them, so the run is resumed where it ran.

One file per run, ``runs/<chat id>.json`` under ``$KORUWEB_STATE_DIR``, else
``$XDG_STATE_HOME/koruweb``, else ``~/.local/state/koruweb``: the server, the chat, the agent's
session id, the directory, the agent's command, and the chat's secret — the proof a runner
gives in every hello, which the server asks for again before it lets another runner resume the
chat. So the file is the owner's alone (0600, in a 0700 directory), written whole and then
renamed in place, and a resume replaces the secret at once (``frames.Hello.resume``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from activity.runner.link import say
from activity.runner.options import Options

RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


class NotSaved(Exception):
    """No run of that id ran on this machine (or its file cannot be read): why, in words."""


@dataclass(frozen=True)
class SavedRun:
    chat_id: str
    server: str
    session_id: str
    secret: str
    cwd: str
    command: list[str]
    base: str = ""  # the run's first snapshot of its git working tree (runner/changes.py)
    # The secret a ``--resume`` gives the chat, kept before its hello: a resume that fails
    # after the server took it (the agent would not start) is retried with it, never locked out.
    pending: str = ""


def state_dir() -> Path:
    """Where a runner keeps what it needs to resume its runs."""
    if os.environ.get("KORUWEB_STATE_DIR"):
        return Path(os.environ["KORUWEB_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "koruweb"


def run_id(ref: str) -> uuid.UUID:
    """The run ``ref`` names: its id, or its page's address (``…/chats/<id>/``)."""
    found = RUN_ID.search(ref)
    if found is None:
        raise NotSaved(f"--resume {ref[:200]!r}: give the run's id or its page's address")
    return uuid.UUID(found.group(0))


def path_of(chat_id: uuid.UUID) -> Path:
    return state_dir() / "runs" / f"{chat_id}.json"


def save(run: SavedRun) -> None:
    """Keep ``run`` (its file replaced whole); raises ``OSError`` when it cannot be written."""
    runs = state_dir() / "runs"
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=runs, prefix=".run-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:  # mkstemp makes it 0600
            json.dump(asdict(run), file)
        os.replace(temporary, runs / f"{run.chat_id}.json")
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load(ref: str) -> SavedRun:
    """The run ``ref`` names, as a runner on this machine kept it; raises ``NotSaved``."""
    chat_id = run_id(ref)
    path = path_of(chat_id)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        known = {name: kept[name] for name in SavedRun.__dataclass_fields__ if name in kept}
        run = SavedRun(**known)  # what a newer runner added is left to it
    except FileNotFoundError:
        raise NotSaved(
            f"run {chat_id} did not run on this machine (nothing in {path.parent}): resume it "
            "where it ran — the agent keeps its session there"
        ) from None
    except (OSError, ValueError, TypeError) as error:
        raise NotSaved(f"cannot read {path}: {error}") from None
    if run.chat_id != str(chat_id) or not run.session_id or not run.command:
        raise NotSaved(f"{path} is not a run this runner kept")
    return run


def keep(chat_id: uuid.UUID, options: Options, session_id: str, secret: str, base: str) -> None:
    """Keep the run a runner runs (its session started); one that cannot be written is said,
    and the run goes on without ``--resume``."""
    run = SavedRun(
        chat_id=str(chat_id),
        server=options.server,
        session_id=session_id,
        secret=secret,
        cwd=os.path.abspath(options.cwd),
        command=list(options.command),
        base=base,
    )
    try:
        save(run)
    except OSError as error:
        say(f"could not keep the run for --resume ({error}); it goes on")
