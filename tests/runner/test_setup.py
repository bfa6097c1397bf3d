"""The runner reads how to log in and which modes there are from what real agents answered.

The answers in ``tests/agents/real/captured/`` are what claude-agent-acp 0.101.0, codex-acp
0.16.0 and gemini-cli 0.61.0 sent to ``initialize`` and ``session/new``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from activity.runner import setup

CAPTURED = Path(__file__).parent.parent / "agents" / "real" / "captured"


def captured(agent: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((CAPTURED / f"{agent}.json").read_text())
    return found


@pytest.mark.parametrize(
    ("agent", "ids", "config_id"),
    [
        ("claude", ("default", "acceptEdits", "plan", "auto"), "mode"),
        ("codex", ("read-only", "auto", "full-access"), "mode"),
        ("gemini", ("default", "autoEdit", "yolo", "plan"), None),
    ],
)
def test_the_modes_are_read_from_each_real_agents_own_session_answer(agent, ids, config_id):
    modes = setup.modes(captured(agent)["session/new"])
    assert modes.ids == ids and modes.config_id == config_id


def test_a_mode_select_in_groups_and_a_session_with_only_modes_are_both_read():
    grouped = {
        "configOptions": [
            {"id": "model", "type": "select", "options": [{"value": "m"}]},
            {
                "id": "approvals",
                "category": "mode",
                "type": "select",
                "options": [
                    {"group": "safe", "name": "Safe", "options": [{"value": "ask", "name": "Ask"}]},
                    {"value": "yolo"},
                ],
            },
        ]
    }
    assert setup.modes(grouped) == setup.Modes(("ask", "yolo"), ("Ask", "yolo"), "approvals")
    only = {"modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]}}
    assert setup.modes(only) == setup.Modes(("a",), ("A",), None, current="a")


@pytest.mark.parametrize(
    "odd", [{}, {"modes": None}, {"configOptions": "x"}, {"configOptions": [1, {"id": 2}]}]
)
def test_an_agent_without_modes_or_with_odd_shapes_has_no_modes(odd):
    assert setup.modes(odd).ids == ()


@pytest.mark.parametrize(
    ("agent", "current"), [("claude", "auto"), ("codex", "read-only"), ("gemini", "default")]
)
def test_the_mode_a_session_starts_in_is_known_before_any_is_set(agent, current):
    assert setup.modes(captured(agent)["session/new"]).current == current


def test_a_turns_usage_is_the_prompt_answers_or_what_gemini_reports_in_its_meta():
    assert setup.usage({"stopReason": "end_turn", "usage": {"inputTokens": 5}}) == {
        "inputTokens": 5
    }
    gemini = {"_meta": {"quota": {"token_count": {"input_tokens": 2400, "output_tokens": 68}}}}
    assert setup.usage(gemini) == {"inputTokens": 2400, "outputTokens": 68, "totalTokens": 2468}
    for nothing in ({}, {"_meta": {"quota": 1}}, {"_meta": {"quota": {"token_count": {"x": 1}}}}):
        assert setup.usage(nothing) is None


def test_codex_is_authenticated_with_the_method_whose_key_is_set():
    methods = setup.auth_methods(captured("codex")["initialize"])
    assert [m.id for m in methods] == ["chatgpt", "codex-api-key", "openai-api-key"]
    picked = setup.pick(methods, {"OPENAI_API_KEY": "sk-x"})
    assert picked is not None and picked.id == "openai-api-key"
    picked = setup.pick(methods, {"CODEX_API_KEY": "k", "OPENAI_API_KEY": "sk-x"})
    assert picked is not None and picked.id == "codex-api-key"


def test_without_any_credentials_the_message_names_each_method_and_what_it_needs():
    methods = setup.auth_methods(captured("codex")["initialize"])
    assert setup.pick(methods, {"OPENAI_API_KEY": ""}) is None
    message = setup.no_credentials(methods)
    assert "chatgpt (Login with ChatGPT: needs an interactive login)" in message
    assert "openai-api-key (Use OPENAI_API_KEY: needs OPENAI_API_KEY)" in message


def test_a_method_that_names_its_variable_only_in_its_text_is_understood():
    init = {"authMethods": [{"id": "k", "name": "Key", "description": "Set `ACME_API_KEY`."}]}
    (method,) = setup.auth_methods(init)
    assert method.needs == ("ACME_API_KEY",) and method.ready({"ACME_API_KEY": "1"})
