"""What a run costs: the tokens and money the agent reports, kept per run and per turn, and
said the way a person reads them (``12.3k / 200k tokens · 6%``, ``$1.23``).

An agent reports two things (docs/gotchas.md#usage-reports): ``usage_update`` — its context
window (``used`` of ``size`` tokens) and the session's cost so far (``cost: {amount,
currency}``), each update replacing the last — and, with a turn's end, the prompt response's
``usage`` (``totalTokens``, ``inputTokens``, ``outputTokens``, ``thoughtTokens``,
``cachedReadTokens``, ``cachedWriteTokens``). The chat keeps the latest ``usage_update``
(``Chat.usage``); a turn keeps its response's counts (``InferenceAttempt.usage``) and the
session's meter when it started and the latest reading during it (``InferenceAttempt.meter``),
so a turn's cost is what the session's cost grew by while it ran. Numbers only: nothing an
agent wrote is kept here.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from activity.live.work import Work
from activity.models import Chat, InferenceAttempt

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


def compact(n: int | float) -> str:
    """A count for a person: 950, 12.3k, 200k, 1.2M (one decimal while it says something)."""
    n = float(n)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            value = n / size
            text = f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"
            return text.removesuffix(".0") + suffix
    return f"{n:.0f}"


def money(amount: Any, currency: Any) -> str:
    """A cost: ``$1.23``, ``€0.05``, ``0.40 CHF``; a cent's fraction is ``<$0.01``."""
    try:
        value = Decimal(str(amount))
        shown = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError):  # not a number, NaN, infinite or past 28 digits
        return ""
    if not value.is_finite():
        return ""
    code = str(currency or "").upper()[:8]
    symbol = SYMBOLS.get(code)
    if 0 < value < Decimal("0.01"):
        return f"<{symbol}0.01" if symbol else f"<0.01 {code}".strip()
    text = f"{shown:,.2f}"
    if symbol:
        return f"-{symbol}{text[1:]}" if text.startswith("-") else f"{symbol}{text}"
    return f"{text} {code}".strip()


def window(used: Any, size: Any) -> str:
    """The context window: ``12.3k / 200k tokens · 6%``."""
    if not _number(used):
        return ""
    if not _number(size) or size <= 0:
        return f"{compact(used)} tokens"
    share = round(100 * used / size)
    return f"{compact(used)} / {compact(size)} tokens · {share}%"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cost(reading: Any) -> tuple[Decimal, str] | None:
    cost = reading.get("cost") if isinstance(reading, dict) else None
    if not isinstance(cost, dict) or not _number(cost.get("amount")):
        return None
    return Decimal(str(cost["amount"])), str(cost.get("currency") or "")


@dataclass(frozen=True)
class Figures:
    """What a run or a turn says about its usage, ready to show."""

    window: str = ""  # the context window at its latest reading
    tokens: str = ""  # tokens the turn (or every turn of the run) used
    cost: str = ""
    detail: str = ""  # the parts of ``tokens``, for a tooltip

    def __bool__(self) -> bool:
        return bool(self.window or self.tokens or self.cost)


def _token_parts(usage: Any) -> tuple[int | None, list[str]]:
    if not isinstance(usage, dict):
        return None, []
    total = usage.get("totalTokens")
    names = (
        ("inputTokens", "in"),
        ("outputTokens", "out"),
        ("thoughtTokens", "thinking"),
        ("cachedReadTokens", "cache read"),
        ("cachedWriteTokens", "cache written"),
    )
    parts = [f"{usage[k]:,} {words}" for k, words in names if _number(usage.get(k))]
    return (total if _number(total) else None), parts


def turn(attempt: InferenceAttempt) -> Figures:
    """A turn's tokens (its prompt response's), its context window and what it cost."""
    total, parts = _token_parts(attempt.usage)
    meter = attempt.meter if isinstance(attempt.meter, dict) else {}
    after, before = meter.get("after"), meter.get("before")
    cost = ""
    now, then = _cost(after), _cost(before)
    if now is not None:
        spent = now[0] - then[0] if then is not None and then[1] == now[1] else now[0]
        cost = money(spent, now[1])
    reading = after if isinstance(after, dict) else {}
    return Figures(
        window=window(reading.get("used"), reading.get("size")),
        tokens=f"{compact(total)} tokens" if total is not None else "",
        cost=cost,
        detail=" · ".join(parts),
    )


def run(chat: Chat, attempts: list[InferenceAttempt]) -> Figures:
    """A run's context window now, its cost so far, and the tokens all its turns used."""
    reading = chat.usage if isinstance(chat.usage, dict) else {}
    totals = [_token_parts(a.usage)[0] for a in attempts]
    counted = [n for n in totals if n is not None]
    cost = _cost(reading)
    of = f"tokens of {len(counted)} turn{'s' if len(counted) != 1 else ''}"
    return Figures(
        window=window(reading.get("used"), reading.get("size")),
        tokens=f"{compact(sum(counted))} tokens" if counted else "",
        cost=money(*cost) if cost is not None else "",
        detail=of if counted else "",
    )


def record(work: Work, reading: dict[str, Any]) -> None:
    """A ``usage_update``: the run's latest reading, and the turn's (the current one, or the
    last if it came after the turn ended)."""
    chat = work.chat
    chat.usage = reading
    work.touch_meta("usage")
    attempt = chat.current_attempt
    if attempt is not None:
        meter = dict(attempt.meter) if isinstance(attempt.meter, dict) else {}
        meter["after"] = reading
        attempt.meter = meter
        work.touch(attempt, "meter")


def opening(chat: Chat) -> dict[str, Any]:
    """A new turn's meter: the session's reading when it started."""
    return {"before": chat.usage} if isinstance(chat.usage, dict) else {}
