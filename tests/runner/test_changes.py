"""The runner's ``changes`` frames (activity/runner/changes.py): however many files a turn
touched and however long their names, the frame fits the server's limit and says how many it
left out."""

from __future__ import annotations

import json
import uuid

from activity.runner.changes import change
from activity.runner.outbox import FRAME_BUDGET, Outbox
from activity.runner.snapshots import FileCount, Patch
from activity.wire.frames import Changes


def test_a_change_of_thousands_of_long_named_files_fits_a_frame_and_counts_the_rest():
    files = tuple(FileCount(f"{'deep/' * 80}file-{n}.py", n, 1) for n in range(5000))
    patch = Patch("x" * 300_000, files, 0)
    outbox = Outbox()
    outbox.add(Changes, attempt_id=uuid.uuid4(), turn=change(patch), run=change(patch))
    [(_, text)] = outbox.after(0)
    assert len(text.encode()) <= FRAME_BUDGET
    sent = json.loads(text)
    kept = sent["run"]["files"]
    assert 0 < len(kept) < 5000 and len(kept) + sent["run"]["more_files"] == 5000
    assert kept[0] == {"path": files[0].path, "added": 0, "removed": 1}
