"""Starting each real agent: modes refused with the agent's own list, logging in, or not."""

from __future__ import annotations

import pytest

from activity.models import InferenceAttempt
from tests.agents.real.fixtures import StartAgent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("vendor", "modes"),
    [
        ("anthropic", "default (Manual), acceptEdits (Accept edits), plan (Plan), auto (Auto)"),
        ("openai", "read-only (Read Only), auto (Default), full-access (Full Access)"),
        ("gemini", "default (Default), autoEdit (Auto Edit), yolo (YOLO), plan (Plan)"),
    ],
)
def test_a_mode_the_agent_does_not_have_is_refused_with_its_own_modes_and_exit_code_5(
    start_agent: StartAgent, vendor: str, modes: str
) -> None:
    run = start_agent(vendor, "--mode", "turbo", "--prompt", "hello")
    code, err = run.finish()
    assert code == 5, err
    assert f"the agent has no mode 'turbo'; its modes: {modes}" in err
    assert "Traceback" not in err
    assert not InferenceAttempt.objects.filter(chat_id=run.chat_id).exists()


def test_codex_without_any_key_says_which_methods_need_what_and_exits_6(
    start_agent: StartAgent,
) -> None:
    run = start_agent("openai", "--prompt", "hello", OPENAI_API_KEY="")
    code, err = run.finish()
    assert code == 6, err
    assert "the agent asks to authenticate and no method's credentials are set" in err
    assert "chatgpt (Login with ChatGPT: needs an interactive login)" in err
    assert "codex-api-key (Use CODEX_API_KEY: needs CODEX_API_KEY)" in err
    assert "Traceback" not in err
