"""The server's boundary with a runner (activity/live/boundary.py, frames.py): a frame's text is
parsed safely and cleaned before anything stores it, and numbers are checked against the
columns they reach."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from activity.live import boundary
from activity.wire.frames import BIGINT_MAX, MAX_CUT_BYTES, runner_frame, seq_of
from tests import frames


def test_lone_surrogates_and_nul_characters_are_cleaned_in_keys_and_values():
    text = json.dumps({"ti\ud800tle": ["a\x00b", {"k": "\udfffz"}], "n": 1})
    loaded = boundary.load(text)
    assert loaded == {"ti\ufffd\ufffd\ufffdtle": ["ab", {"k": "\ufffd\ufffd\ufffdz"}], "n": 1}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_a_number_json_cannot_carry_becomes_null(number):
    assert boundary.load(f'{{"cost": {number}, "ok": 1.5}}') == {"cost": None, "ok": 1.5}


def test_json_nested_deeper_than_the_bound_is_refused_with_the_seq_it_claims():
    nested = "[" * (boundary.MAX_DEPTH + 1) + "]" * (boundary.MAX_DEPTH + 1)
    with pytest.raises(boundary.Unreadable, match="nested deeper") as refused:
        boundary.load(f'{{"type": "acp", "seq": 5, "message": {nested}}}')
    assert (refused.value.seq, refused.value.from_agent) == (5, True)
    at_the_bound = "[" * (boundary.MAX_DEPTH - 1) + "]" * (boundary.MAX_DEPTH - 1)
    assert boundary.load(f'{{"message": {at_the_bound}}}')


def test_json_nested_ten_thousand_deep_is_refused_without_a_recursion_error():
    with pytest.raises(boundary.Unreadable) as refused:
        boundary.load('{"seq": 5, "x": ' + "[" * 10_000 + "]" * 10_000 + "}")
    assert refused.value.seq is None  # it never parsed: there is no seq to acknowledge


@pytest.mark.parametrize("text", ["", "{", "[1,", '{"a": 1}}', "1" * 5000])
def test_what_is_not_json_is_unreadable(text):
    with pytest.raises(boundary.Unreadable):
        boundary.load(text)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", BIGINT_MAX + 1),
        ("at", BIGINT_MAX + 1),
        ("at", -(2**63) - 1),
        ("cut_bytes", MAX_CUT_BYTES + 1),
        ("cut_bytes", 2**70),
    ],
)
def test_integers_beyond_their_columns_are_refused(field, value):
    with pytest.raises(ValidationError):
        runner_frame.validate_python({**frames.say(1, "x"), field: value})


@pytest.mark.parametrize("seq", [0, -1, BIGINT_MAX + 1, 2**70, True, 1.0, "1", None, [1]])
def test_a_seq_that_no_chat_can_reach_is_no_seq_to_acknowledge(seq):
    assert seq_of({"seq": seq}) is None


def test_the_largest_seq_a_column_holds_is_one():
    assert seq_of({"seq": BIGINT_MAX}) == BIGINT_MAX


def test_an_id_an_agent_controls_is_masked_like_any_other_string_of_its_frame():
    """The runner forwards its own opaque ids (activity/runner/ids.py): the server keeps no
    agent id unmasked, not even one an answer repeats."""
    key = "sk-ant-api03-" + "Jx3kP9vQ2mW7zR5tY1uN8bC4dF6gH0jLa2s4d6f8"
    token = "ghp_" + "Jx3kP9vQ2mW7zR5tY1uN8bC4dF6gH0jLa2s4"
    asked = frames.permission(2, 1, "c1", "Run it")
    asked["message"]["id"] = token
    asked["message"]["params"]["options"][0]["optionId"] = key
    told = frames.outcome(3, 1, key) | {"request_id": token}
    loaded = [boundary.load(json.dumps(frame)) for frame in (asked, told)]
    assert key not in json.dumps(loaded) and token not in json.dumps(loaded)
    assert loaded[0]["message"]["id"] == loaded[1]["request_id"] == "ghp_" + "*" * 36
    masked_key = "sk-ant-api03-" + "*" * 40
    assert loaded[0]["message"]["params"]["options"][0]["optionId"] == masked_key
    assert loaded[1]["outcome"]["optionId"] == masked_key
    assert loaded[0]["message"]["params"]["options"][1]["optionId"] == "reject"  # plain ids stay
