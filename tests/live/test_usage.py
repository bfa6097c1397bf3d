"""What a run costs and how it is named: the agent's usage and cost per turn and per run said
the way a person reads them, the run titled by its first prompt, the agent's version as a
version (activity/live/usage.py, activity/templatetags/long.py)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from activity.live import usage
from activity.models import Chat, InferenceAttempt
from activity.templatetags.long import version_label
from tests import frames
from tests.factories import apply, run

pytestmark = pytest.mark.django_db


def reading(seq: int, used: int, size: int, amount: float | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if amount is not None:
        update["cost"] = {"amount": amount, "currency": "USD"}
    return frames.update(seq, update)


def test_counts_and_money_read_as_a_person_says_them():
    assert [usage.compact(n) for n in (950, 12_345, 200_000, 1_234_567)] == [
        "950",
        "12.3k",
        "200k",
        "1.2M",
    ]
    assert usage.window(12_345, 200_000) == "12.3k / 200k tokens · 6%"
    assert usage.window(500, 0) == "500 tokens"
    assert usage.window(None, 200_000) == ""
    assert usage.money(1.234, "usd") == "$1.23"
    assert usage.money(1234.5, "EUR") == "€1,234.50"
    assert usage.money(0.004, "USD") == "<$0.01"
    assert usage.money(0.4, "CHF") == "0.40 CHF"
    assert usage.money("not a number", "USD") == ""


def test_each_turn_costs_what_the_session_grew_by_and_the_run_says_its_total(acme):
    first, second = uuid.uuid4(), uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, first, uuid.uuid4(), prompt="Fix the flaky test"),
        reading(2, 10_000, 200_000, 0.50),
        {**frames.turn_ended(3, first), "usage": {"totalTokens": 12_345, "inputTokens": 12_000}},
        frames.turn_started(4, second, uuid.uuid4(), prompt="Now the docs", title="Now the docs"),
        reading(5, 24_000, 200_000, 1.73),
        {**frames.turn_ended(6, second), "usage": {"totalTokens": 8_000}},
    )
    one, two = (InferenceAttempt.objects.get(pk=pk) for pk in (first, second))
    assert usage.turn(one) == usage.Figures(
        window="10k / 200k tokens · 5%",
        tokens="12.3k tokens",
        cost="$0.50",
        detail="12,000 in",
    )
    assert usage.turn(two).cost == "$1.23"  # 1.73 - 0.50
    figures = usage.run(chat, [one, two])
    assert (figures.window, figures.tokens, figures.cost) == (
        "24k / 200k tokens · 12%",
        "20.3k tokens",
        "$1.73",
    )
    assert chat.title == "Fix the flaky test"  # the first prompt names the run, not the latest


def test_the_chat_page_shows_usage_humanised_and_the_agent_version(acme, as_approver):
    attempt = uuid.uuid4()
    start = {**frames.turn_started(1, attempt, uuid.uuid4()), "agent_version": "0.31.0"}
    chat = run(acme, start, reading(2, 123_456, 200_000, 1.234))
    apply(chat.pk, {**frames.turn_ended(3, attempt), "usage": {"totalTokens": 2_000}})
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert "123k / 200k tokens · 62%" in page and "$1.23" in page
    assert "123456 of 200000" not in page
    assert "demo-agent v0.31.0" in page
    assert "2k tokens" in page


def test_a_version_reads_as_a_version():
    def label(name: str | None, version: str | None) -> str:
        return version_label(SimpleNamespace(agent_name=name, agent_version=version))

    assert label("demo", "1") == "demo v1"
    assert label("claude-code-acp", "v0.31.0") == "claude-code-acp v0.31.0"
    assert label("gemini", "nightly") == "gemini (nightly)"
    assert label(None, "") == "agent"


def test_a_reading_after_the_turn_ended_counts_for_that_turn(acme):
    attempt = uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, attempt, uuid.uuid4()),
        frames.turn_ended(2, attempt),
        reading(3, 5_000, 100_000, 0.02),
    )
    assert Chat.objects.get(pk=chat.pk).usage["used"] == 5_000
    assert usage.turn(InferenceAttempt.objects.get(pk=attempt)).cost == "$0.02"


@pytest.mark.parametrize("amount", ["1e400", float("inf"), float("nan"), "sNaN", 1e30, "x", None])
def test_a_cost_no_one_could_pay_or_no_number_at_all_shows_nothing_and_breaks_no_page(amount):
    assert usage.money(amount, "USD") == ""
