"""koruweb's ASGI application with masking slowed down, for the test that shows a slow frame
holds up nobody but its own runner (tests/integration/test_slow_frame.py).

A string that carries ``SLOW_MARKER`` takes ``SLOW_MASK_SECONDS`` (from the environment) to
mask, as a pathological agent output would, and ``started`` then ``ended`` are written to the
file ``SLOW_MASK_LOG`` around it; every other string is masked as usual.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from activity.core import masking as secrets
from activity.live import boundary
from koruweb.asgi import application  # sets Django up first

SLOW_MARKER = "slow-to-mask-marker"
_mask = secrets.mask


def slow_mask(text: str) -> str:
    if SLOW_MARKER not in text:
        return _mask(text)
    log = Path(os.environ["SLOW_MASK_LOG"])
    with log.open("a") as said:
        said.write("started\n")
    time.sleep(float(os.environ.get("SLOW_MASK_SECONDS", "5")))
    masked = _mask(text)
    with log.open("a") as said:
        said.write("ended\n")
    return masked


secrets.mask = slow_mask
setattr(boundary, "mask", slow_mask)  # noqa: B010 - boundary imported it by name

__all__ = ["application"]
