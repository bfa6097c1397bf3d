"""The reference the live path is held to: koruweb with one transaction and one push per update.

``daphne bench.onepush:application`` serves koruweb with the agent socket taking one frame per
batch instead of everything that has arrived: every update is written, acknowledged, rendered
and pushed on its own. At a light load koruweb does exactly that anyway (each update finds the
socket idle); the issue's latency target at 50 updates/s is "no worse than this".
"""

# ruff: noqa: E402, I001  (koruweb.asgi sets Django up: it comes first)
from __future__ import annotations

from koruweb.asgi import application

from activity.wire.frames import NumberedFrame
from activity.sockets.pipeline import RunnerSession

__all__ = ["application"]


def one_frame(self: RunnerSession) -> list[NumberedFrame | tuple[int, str]]:
    return [self.pending.pop(0)]


RunnerSession.next_batch = one_frame  # type: ignore[method-assign]
