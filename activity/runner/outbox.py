"""The runner's outbox: numbered frames kept until the server acknowledges them.

Frames are numbered from 1 per chat and stamped with the runner's clock when they are added,
so a resend carries the same seq and time. Huge strings are cut before a frame is queued so
every frame stays under the server's message limit; the bytes cut from what a tool returned
travel in ``cut_bytes`` so the row's ``result_bytes`` stays true.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from typing import Any

from activity.frames import Acp, NumberedFrame, acp_parts

FRAME_BUDGET = 900 * 1024  # under Daphne's 1 MiB limit, with room for the envelope
STRING_LIMITS = (256 * 1024, 32 * 1024, 4 * 1024, 512)
OUTPUT_KEYS = frozenset({"content", "rawOutput"})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


MARK = "…[cut by the runner]"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def cut_strings(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` with every string cut to at most ``limit`` characters (the mark included);
    returns it and the UTF-8 bytes the cuts removed."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value, 0
        kept = value[: max(limit - len(MARK), 0)]
        lost = len(value.encode("utf-8", "surrogatepass")) - len(
            kept.encode("utf-8", "surrogatepass")
        )
        return kept + MARK, lost
    if isinstance(value, list):
        pairs = [cut_strings(item, limit) for item in value]
        return [new for new, _ in pairs], sum(lost for _, lost in pairs)
    if isinstance(value, dict):
        cut = {key: cut_strings(item, limit) for key, item in value.items()}
        return {key: new for key, (new, _) in cut.items()}, sum(lost for _, lost in cut.values())
    return value, 0


def cut_message(message: dict[str, Any], limit: int) -> tuple[dict[str, Any], int]:
    """Cut a raw ACP message's strings; returns it and the bytes cut from a tool's output."""
    params, update = acp_parts(message)
    output_lost = 0
    if update is not None:
        update = dict(update)
        for key in OUTPUT_KEYS & update.keys():
            update[key], lost = cut_strings(update[key], limit)
            output_lost += lost
        message = {**message, "params": {**params, "update": update}}
    cut, _ = cut_strings(message, limit)
    return cut, output_lost


def dumps(frame: dict[str, Any]) -> str:
    """A frame as JSON text that is valid UTF-8: a lone surrogate (which JSON can carry but
    UTF-8 cannot) becomes U+FFFD, as any decoder would show it."""
    return LONE_SURROGATE.sub("\ufffd", json.dumps(frame, ensure_ascii=False))


def fit(frame: dict[str, Any]) -> str:
    """Serialise a frame, cutting its strings harder until it fits the budget."""
    text = dumps(frame)
    for limit in STRING_LIMITS:
        if len(text.encode()) <= FRAME_BUDGET:
            return text
        message, lost = cut_message(frame["message"], limit)
        frame = {**frame, "message": message, "cut_bytes": frame.get("cut_bytes", 0) + lost}
        text = dumps(frame)
    if len(text.encode()) > FRAME_BUDGET:
        frame = {**frame, "message": {"jsonrpc": "2.0", "method": "_koruweb/too_large"}}
        text = json.dumps(frame)
    return text


class Outbox:
    def __init__(self) -> None:
        self.seq = 0  # the last seq given out
        self.acked = 0  # everything up to here is committed on the server
        self.frames: deque[tuple[int, str]] = deque()
        self.changed = asyncio.Event()  # set when a frame is added or acknowledged
        self.reported: set[int] = set()  # frames whose problem the runner has already said

    def add(self, kind: type[NumberedFrame], **fields: Any) -> int:
        """Number, stamp and queue a frame of ``kind`` (a model of ``frames.py``, so the server
        accepts it by construction). Synchronous: the order of calls is the wire order.

        The number is taken only once the frame is written, so a frame that cannot be built or
        written leaves no gap in the numbers (a gap would make the server refuse every later
        frame); such a frame raises ``ValidationError``.
        """
        frame = kind(seq=self.seq + 1, at=now_ms(), **fields).model_dump(mode="json")
        text = fit(frame) if kind is Acp else dumps(frame)
        self.seq += 1
        self.frames.append((self.seq, text))
        self.changed.set()
        return self.seq

    def ack(self, seq: int) -> None:
        self.acked = max(self.acked, min(seq, self.seq))
        while self.frames and self.frames[0][0] <= self.acked:
            self.frames.popleft()
        if self.reported:  # the server's errors about a frame come before its ack
            self.reported = {seq for seq in self.reported if seq > self.acked}
        self.changed.set()

    def after(self, seq: int) -> list[tuple[int, str]]:
        return [(n, text) for n, text in self.frames if n > seq]

    @property
    def drained(self) -> bool:
        return self.acked >= self.seq

    async def wait_drained(self) -> None:
        while not self.drained:
            self.changed.clear()
            if self.drained:
                return
            await self.changed.wait()
