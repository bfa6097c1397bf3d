"""The runner's outbox: numbered, stamped, kept until acknowledged, never over the limit."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import ValidationError

from activity.frames import Acp, TurnEnded, runner_frame
from activity.runner.main import page_url
from activity.runner.outbox import FRAME_BUDGET, MARK, Outbox, cut_message


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
