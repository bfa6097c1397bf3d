"""The runner's outbox: numbered frames kept until the server acknowledges them.

Frames are numbered from 1 per chat and stamped with the runner's clock when they are added,
so a resend carries the same seq and time. Every frame, whatever its kind, is cut to fit the
server's message limit before it is queued: its longest strings are cut on a character
boundary with the runner's mark, harder and harder, and as a last resort what cannot be cut
(a tool's raw message, a turn's usage) is replaced. The bytes cut from what a tool returned
travel in ``cut_bytes`` so the row's ``result_bytes`` stays true. When the server still says a
frame is too large (a proxy with a smaller limit), ``shrink`` cuts it to half its size.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from typing import Any

from activity.wire.frames import NumberedFrame, acp_parts

FRAME_BUDGET = 900 * 1024  # under Daphne's 1 MiB limit, with room for the envelope
STRING_LIMITS = (256 * 1024, 32 * 1024, 4 * 1024, 512)
OUTPUT_KEYS = frozenset({"content", "rawOutput"})
KEPT_KEYS = frozenset({"type", "seq", "at", "attempt_id", "message_id", "stop_reason"})
TOO_LARGE = {"jsonrpc": "2.0", "method": "_koruweb/too_large"}
# What replaces a frame's uncuttable part when cutting its strings was not enough, by kind.
LAST_RESORT: dict[str, dict[str, Any]] = {
    "acp": {"message": TOO_LARGE},
    "turn_ended": {"usage": None},
    "prompt_outcome": {"outcome": {}},
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


MARK = "…[cut by the runner]"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def cut_text(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, the runner's mark included if it was cut."""
    return text if len(text) <= limit else text[: max(limit - len(MARK), 0)] + MARK


def cut_strings(value: Any, limit: int, recut: bool = False) -> tuple[Any, int]:
    """``value`` with every string cut to at most ``limit`` characters (the mark included);
    returns it and the UTF-8 bytes the cuts removed. ``recut``: ``value`` was cut before, so a
    string's mark is not counted as text lost."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value, 0
        kept = cut_text(value, limit)
        was = value.removesuffix(MARK) if recut else value
        return kept, max(utf8_len(was) - utf8_len(kept.removesuffix(MARK)), 0)
    if isinstance(value, list):
        pairs = [cut_strings(item, limit, recut) for item in value]
        return [new for new, _ in pairs], sum(lost for _, lost in pairs)
    if isinstance(value, dict):
        cut = {key: cut_strings(item, limit, recut) for key, item in value.items()}
        return {key: new for key, (new, _) in cut.items()}, sum(lost for _, lost in cut.values())
    return value, 0


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def cut_message(
    message: dict[str, Any], limit: int, recut: bool = False
) -> tuple[dict[str, Any], int]:
    """Cut a raw ACP message's strings; returns it and the bytes cut from a tool's output."""
    params, update = acp_parts(message)
    output_lost = 0
    if update is not None:
        update = dict(update)
        for key in OUTPUT_KEYS & update.keys():
            update[key], lost = cut_strings(update[key], limit, recut)
            output_lost += lost
        message = {**message, "params": {**params, "update": update}}
    cut, _ = cut_strings(message, limit, recut)
    return cut, output_lost


def cut_frame(frame: dict[str, Any], limit: int, recut: bool = False) -> dict[str, Any]:
    """A frame (as JSON data) with its strings cut to ``limit`` characters: a raw message's
    with the output bytes counted, every other field's but its type, ids and stop reason."""
    if frame.get("type") == "acp":
        message, lost = cut_message(frame["message"], limit, recut)
        return {**frame, "message": message, "cut_bytes": frame.get("cut_bytes", 0) + lost}
    return {
        key: value if key in KEPT_KEYS else cut_strings(value, limit, recut)[0]
        for key, value in frame.items()
    }


def dumps(frame: dict[str, Any]) -> str:
    """A frame as JSON text that is valid UTF-8: a lone surrogate (which JSON can carry but
    UTF-8 cannot) becomes U+FFFD, as any decoder would show it."""
    return LONE_SURROGATE.sub("\ufffd", json.dumps(frame, ensure_ascii=False))


def size(text: str) -> int:
    return len(text.encode())


def fit(frame: dict[str, Any], budget: int | None = None, recut: bool = False) -> str:
    """Serialise a frame in at most ``budget`` bytes (``FRAME_BUDGET``), cutting its strings
    harder until it fits; a frame that nothing else makes fit loses its raw part."""
    budget = FRAME_BUDGET if budget is None else budget
    text = dumps(frame)
    for limit in STRING_LIMITS:
        if size(text) <= budget:
            return text
        frame = cut_frame(frame, limit, recut)
        text = dumps(frame)
    if size(text) > budget:
        frame = {**frame, **LAST_RESORT.get(frame.get("type", ""), {})}
        text = dumps(frame)
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
        text = fit(frame)
        self.seq += 1
        self.frames.append((self.seq, text))
        self.changed.set()
        return self.seq

    def start_at(self, seq: int) -> None:
        """The server's first ``ack`` to a runner that has numbered nothing yet: a resumed
        chat's frames go on from the last one the server has (a new chat's start at 1)."""
        if self.seq == 0 and not self.frames:
            self.seq = self.acked = seq

    def ack(self, seq: int) -> None:
        self.acked = max(self.acked, min(seq, self.seq))
        while self.frames and self.frames[0][0] <= self.acked:
            self.frames.popleft()
        if self.reported:  # the server's errors about a frame come before its ack
            self.reported = {seq for seq in self.reported if seq > self.acked}
        self.changed.set()

    def shrink(self, upto: int) -> int | None:
        """The server said a frame it got was too large: cut the largest unacknowledged frame
        sent (up to ``upto``) to half its size. Returns its seq, or None if none can shrink."""
        sent = [(size(text), n, text) for n, text in self.frames if self.acked < n <= upto]
        if not sent:
            return None
        was, seq, text = max(sent)
        smaller = fit(json.loads(text), budget=was // 2, recut=True)
        if size(smaller) >= was:
            return None
        index = next(i for i, (n, _) in enumerate(self.frames) if n == seq)
        self.frames[index] = (seq, smaller)
        return seq

    def kind(self, seq: int) -> str:
        """What frame ``seq`` is, for a person: ``acp session/update``, ``turn_started``…"""
        for n, text in self.frames:
            if n == seq:
                frame = json.loads(text)
                method = frame["message"].get("method") if frame["type"] == "acp" else None
                return f"{frame['type']} {str(method)[:80]}" if method else str(frame["type"])
        return "acknowledged"

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
