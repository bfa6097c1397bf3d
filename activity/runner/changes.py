"""The whole change: what the agent changed in the run's git working tree, sent at the end of
each turn (``frames.Changes``; docs/protocol.md#the-whole-change).

When the run starts, its working tree is snapshotted (``snapshots.WorkTree``: a temporary index,
untracked files included, hooks and filters off; the user's index, refs and stash untouched):
that tree is the run's *base*. A resumed run takes its base up again (the tree, if the
repository still has it), so its whole change still counts from the run's start. Each turn is
snapshotted when it starts and when it ends; at its end the runner sends the turn's diff and the
run's, each cut to ``DIFF_BYTES`` (the server masks them like every string an agent sends). A run
outside git says so once, and the runner goes on without; so does a git that fails.
"""

from __future__ import annotations

import uuid

from activity.runner.link import say
from activity.runner.outbox import Outbox
from activity.runner.snapshots import TREE_ID, Patch, SnapshotError, WorkTree, git, git_env
from activity.wire.frames import CHANGES_FILES, Change, Changes, FileCount

DIFF_BYTES = 256 * 1024  # each of a frame's two diffs: both fit in a frame (outbox.FRAME_BUDGET)
FILES_BYTES = 160 * 1024  # each of its two file lists, as JSON, at most about this
REASON_CHARS = 500


class Tracker:
    def __init__(self, outbox: Outbox, cwd: str) -> None:
        self.outbox = outbox
        self.cwd = cwd
        self.tree: WorkTree | None = None
        self.base = ""  # the run's start, as a tree id
        self.turn_base = ""  # the running turn's start

    async def begin(self, base: str | None = None) -> None:
        """Snapshot the run's start (or take ``base``, a resumed run's, if git still has it)."""
        opened = await WorkTree.open(self.cwd)
        if isinstance(opened, str):
            self.outbox.add(Changes, outside=opened[:REASON_CHARS])
            return
        try:
            if base and await kept(opened, base):
                self.base = base
            else:
                if base:
                    say("the run's first snapshot is gone from the repository: changes count now")
                self.base = await opened.snapshot()
        except SnapshotError as error:
            said = f"git could not snapshot the tree: {error}"
            self.outbox.add(Changes, outside=said[:REASON_CHARS])
            return
        self.tree = opened

    async def turn_starts(self) -> None:
        if self.tree is None:
            return
        try:
            self.turn_base = await self.tree.snapshot()
        except SnapshotError as error:
            say(f"could not snapshot the tree as the turn starts: {error}")
            self.turn_base = ""

    async def turn_ended(self, attempt_id: uuid.UUID) -> None:
        """Send what the turn changed, and the run so far."""
        tree, turn_base = self.tree, self.turn_base
        if tree is None or not turn_base:
            return
        try:
            now = await tree.snapshot()
            turn = await tree.diff(turn_base, now, DIFF_BYTES)
            run = await tree.diff(self.base, now, DIFF_BYTES)
        except SnapshotError as error:
            say(f"could not diff the tree as the turn ended: {error}")
            return
        self.outbox.add(
            Changes,
            attempt_id=attempt_id,
            base=self.base,
            turn=change(turn),
            run=change(run),
            skipped=tree.skipped,
        )


async def kept(tree: WorkTree, base: str) -> bool:
    """Whether the repository still has tree ``base`` (an unreferenced object: ``git gc``
    prunes it in the end)."""
    if not TREE_ID.fullmatch(base):
        return False
    try:
        await git(tree.top, git_env(), "cat-file", "-e", f"{base}^{{tree}}")
    except SnapshotError:
        return False
    return True


def change(patch: Patch) -> Change:
    """A diff as a frame carries it: its files counted up to ``CHANGES_FILES`` and
    ``FILES_BYTES`` of paths (the rest in ``more_files``), so a frame's two changes always fit."""
    files: list[FileCount] = []
    room = FILES_BYTES
    for file in patch.files[:CHANGES_FILES]:
        path = file.path[:4096] or "?"
        room -= len(path.encode("utf-8", "replace")) + 64
        if room < 0:
            break
        files.append(FileCount(path=path, added=file.added, removed=file.removed))
    more = len(patch.files) - len(files)
    return Change(diff=patch.text, files=files, more_files=more, cut_bytes=patch.cut_bytes)
