"""The runner's outbox: numbered, stamped, kept until acknowledged, never over the limit."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import ValidationError

from activity.runner import outbox as outbox_module
from activity.runner.main import ERROR_CHARS, Runner
from activity.runner.options import Options, page_url
from activity.runner.outbox import FRAME_BUDGET, MARK, Outbox, cut_message
from activity.wire.frames import (
    Acp,
    NumberedFrame,
    PromptOutcome,
    TurnEnded,
    TurnStarted,
    runner_frame,
)


def tool_update(text: str) -> dict:
    return {
        "message": {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "c1",
                    "rawInput": {"command": "cat big.log"},
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                },
            },
        },
    }


def test_frames_are_numbered_in_the_order_they_are_added_and_kept_until_acknowledged():
    outbox = Outbox()
    for n in range(5):
        outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason=f"r{n}")
    assert [seq for seq, _ in outbox.after(0)] == [1, 2, 3, 4, 5]
    outbox.ack(3)
    assert [seq for seq, _ in outbox.after(0)] == [4, 5]
    outbox.ack(2)  # an older ack changes nothing
    assert outbox.acked == 3 and not outbox.drained
    outbox.ack(5)
    assert outbox.drained


def test_a_resent_frame_carries_the_same_seq_and_time():
    outbox = Outbox()
    outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason="end_turn")
    first = outbox.after(0)
    assert outbox.after(0) == first
    assert json.loads(first[0][1])["at"] > 0


def test_a_huge_output_is_cut_to_fit_and_the_cut_bytes_are_counted():
    outbox = Outbox()
    text = "é" * 3_000_000  # 6 MB of UTF-8
    outbox.add(Acp, **tool_update(text))
    ((_, raw),) = outbox.after(0)
    assert len(raw.encode()) <= FRAME_BUDGET
    frame = json.loads(raw)
    runner_frame.validate_python(frame)  # still a valid frame for the server
    kept = frame["message"]["params"]["update"]["content"][0]["content"]["text"]
    kept_bytes = len(kept.removesuffix(MARK).encode())
    assert frame["cut_bytes"] + kept_bytes == len(text.encode())


def test_cutting_an_input_does_not_count_as_output():
    message = tool_update("small")["message"]
    message["params"]["update"]["rawInput"] = {"file_path": "a.py", "content": "x" * 100}
    cut, lost = cut_message(message, 40)
    assert lost == 0
    assert len(cut["params"]["update"]["rawInput"]["content"]) == 40


def test_the_page_url_follows_the_server_url():
    assert page_url("ws://h:8000", "c") == "http://h:8000/chats/c/"  # type: ignore[arg-type]
    assert page_url("wss://koru.example/", "c") == "https://koru.example/chats/c/"  # type: ignore[arg-type]


def test_a_frame_the_server_would_refuse_is_never_numbered():
    outbox = Outbox()
    with pytest.raises(ValidationError):
        outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason="")
    outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason="end_turn")
    assert [seq for seq, _ in outbox.after(0)] == [1]  # no gap for the server to refuse


def test_a_lone_surrogate_from_an_agent_travels_as_a_replacement_character():
    outbox = Outbox()
    outbox.add(Acp, **tool_update("half a pair: \ud83d"))
    ((_, raw),) = outbox.after(0)
    raw.encode()  # valid UTF-8
    assert (
        "half a pair: \ufffd"
        in json.loads(raw)["message"]["params"]["update"]["content"][0]["content"]["text"]
    )


# --- every kind of frame fits (issue 13: a 1 MiB prompt looped the runner) ----------------------

BUDGET = 64 * 1024  # the tests' frame budget: small, so their strings stay small too
HUGE = "ü😀" * 100_000  # 200,000 characters, 600,000 bytes: several budgets


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(outbox_module, "FRAME_BUDGET", BUDGET)
    return BUDGET


def turn_started(**fields: object) -> dict:
    return {"attempt_id": uuid.uuid4(), "message_id": uuid.uuid4(), **fields}


# (kind, fields with one huge string, where that string is in the frame sent)
HUGE_FIELDS: dict[str, tuple[type[NumberedFrame], dict, tuple[str, ...]]] = {
    "a prompt": (TurnStarted, turn_started(prompt=HUGE), ("prompt",)),
    "a title": (TurnStarted, turn_started(prompt="hi", title=HUGE), ("title",)),
    "an agent's name": (TurnStarted, turn_started(agent_name=HUGE), ("agent_name",)),
    "a request id": (
        PromptOutcome,
        {"request_id": HUGE, "outcome": {"outcome": "cancelled"}},
        ("request_id",),
    ),
    "a chosen option": (
        PromptOutcome,
        {"request_id": 5, "outcome": {"outcome": "selected", "optionId": HUGE}},
        ("outcome", "optionId"),
    ),
    "a turn's usage": (
        TurnEnded,
        {"attempt_id": uuid.uuid4(), "stop_reason": "end_turn", "usage": {"note": HUGE}},
        ("usage", "note"),
    ),
    "an agent's message": (
        Acp,
        {"message": {"jsonrpc": "2.0", "method": "_x/log", "params": {"text": HUGE}}},
        ("message", "params", "text"),
    ),
}


@pytest.mark.parametrize("where", list(HUGE_FIELDS))
def test_a_frame_of_any_kind_with_a_huge_string_is_cut_on_a_character_to_fit_with_the_mark(
    small_budget, where
):
    kind, fields, path = HUGE_FIELDS[where]
    outbox = Outbox()
    outbox.add(kind, **fields)
    ((_, raw),) = outbox.after(0)
    assert len(raw.encode()) <= small_budget
    frame = json.loads(raw)
    runner_frame.validate_python(frame)  # the server still accepts it
    kept = frame
    for key in path:
        kept = kept[key]
    assert kept.endswith(MARK) and len(kept) < len(HUGE)
    assert HUGE.startswith(kept.removesuffix(MARK))  # whole characters, none split


def test_a_usage_too_big_even_with_its_strings_cut_is_dropped_and_the_turn_still_ends(
    small_budget,
):
    usage = {f"model-{n}": n for n in range(20_000)}  # many small numbers: nothing to cut
    outbox = Outbox()
    outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason="end_turn", usage=usage)
    ((_, raw),) = outbox.after(0)
    assert len(raw.encode()) <= small_budget
    frame = runner_frame.validate_json(raw)
    assert isinstance(frame, TurnEnded) and frame.stop_reason == "end_turn"
    assert frame.usage is None


def test_a_long_agent_error_ends_its_turn_cut_with_the_mark():
    runner = Runner(Options(server="ws://127.0.0.1:9", token="t", command=["agent"]))
    runner.end_turn(uuid.uuid4(), "agent_error", error="the model said: " + "no " * 2000)
    ((_, raw),) = runner.outbox.after(0)
    error = json.loads(raw)["error"]
    assert len(error) == ERROR_CHARS and error.endswith(MARK)
    assert error.startswith("the model said: no no")


def test_a_frame_the_server_finds_too_large_shrinks_to_half_and_still_counts_its_cut_bytes():
    outbox = Outbox()
    text = "é" * 300_000  # 600 KB: under the budget, so sent whole at first
    outbox.add(TurnEnded, attempt_id=uuid.uuid4(), stop_reason="end_turn")
    outbox.add(Acp, **tool_update(text))
    sizes = [len(outbox.after(1)[0][1].encode())]
    while (shrunk := outbox.shrink(upto=2)) is not None:
        assert shrunk == 2  # the largest frame sent, not the oldest
        sizes.append(len(outbox.after(1)[0][1].encode()))
        frame = json.loads(outbox.after(1)[0][1])
        runner_frame.validate_python(frame)
        if frame["message"].get("method") == "session/update":
            kept = frame["message"]["params"]["update"]["content"][0]["content"]["text"]
            assert frame["cut_bytes"] + len(kept.removesuffix(MARK).encode()) == len(text.encode())
    assert all(later <= earlier // 2 for earlier, later in zip(sizes, sizes[1:], strict=False))
    assert len(sizes) > 3
