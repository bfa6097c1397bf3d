"""The server's boundary with a runner: a frame's text → a value every later step can store.

``load`` parses one frame's JSON and cleans it before anything else sees it:

- text any database can store: lone surrogates become U+FFFD and NUL characters are dropped
  (``contract.clean_text``), in keys as in values;
- no non-finite number: ``NaN``, ``Infinity`` and ``-Infinity`` (Python's ``json`` accepts
  them) and numbers too large for a float (``1e999``) become ``null``, so a field that needs a
  number refuses the frame and a free-form one (a tool's raw input) keeps the rest;
- no secret of a known shape (``secrets.mask``: API keys, tokens, private keys, ``KEY=value``
  lines) in any string of a frame that carries what an agent says or does (``acp``,
  ``turn_started``, ``prompt_outcome``, ``turn_ended``, ``changes``), keys and ids included,
  before anything stores, indexes or pushes it. Masks keep byte sizes. Not masked: the hello (its
  secret is the runner's proof). No id needs to pass unmasked: the ids an answer repeats (a
  request's, an option's) are the runner's opaque ones, never the agent's (issue 22,
  ``activity/runner/ids.py``), and to the server an id is an opaque string like any other;
- nesting bounded to ``MAX_DEPTH``: deeper JSON is refused, and JSON nested too deep for the
  parser itself (10,000 levels) is refused instead of raising ``RecursionError``.

Integers are left to the frame models (``frames.py``) and to ingest, which range-check the
ones that reach a column.
"""

from __future__ import annotations

import json
import math
from typing import Any

from activity.core.contract import clean_text
from activity.core.masking import mask
from activity.wire.frames import seq_of

MAX_DEPTH = 64  # levels of arrays and objects in one frame; real ACP messages use a dozen
MASKED_TYPES = frozenset({"acp", "turn_started", "prompt_outcome", "turn_ended", "changes"})


class Unreadable(ValueError):
    """A frame the server cannot read; its message is sent back to the runner."""

    seq: int | None = None  # the seq a frame that parsed claims: the refusal acknowledges it
    from_agent = False  # it is an ``acp`` frame: a message from the agent


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def _no_constant(text: str) -> None:
    return None  # NaN, Infinity, -Infinity


def load(text: str) -> Any:
    """One frame's JSON, cleaned (see the module). Raises ``Unreadable``; for a frame that
    parsed but is nested too deep, ``Unreadable.seq`` is the seq it claims, if any."""
    try:
        raw = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise Unreadable(f"a frame is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # not JSON, or an integer of more than 4,300 digits
        raise Unreadable(f"a frame is one JSON object ({error})") from None
    masked = isinstance(raw, dict) and str(raw.get("type")) in MASKED_TYPES
    try:
        loaded = clean(raw, MAX_DEPTH, masked=masked)
    except Unreadable as error:
        error.seq = seq_of(raw)
        error.from_agent = isinstance(raw, dict) and raw.get("type") == "acp"
        raise
    return loaded


def clean(value: Any, depth: int, *, masked: bool = False) -> Any:
    """``value`` with every string cleaned (and, if ``masked``, its secrets masked); raises
    ``Unreadable`` below ``depth`` levels."""
    if isinstance(value, str):
        return mask(clean_text(value)) if masked else clean_text(value)
    if isinstance(value, dict):
        if depth <= 0:
            raise Unreadable(f"a frame is nested deeper than {MAX_DEPTH} levels")
        return {
            clean(key, depth, masked=masked): clean(item, depth - 1, masked=masked)
            for key, item in value.items()
        }
    if isinstance(value, list):
        if depth <= 0:
            raise Unreadable(f"a frame is nested deeper than {MAX_DEPTH} levels")
        return [clean(item, depth - 1, masked=masked) for item in value]
    return value
