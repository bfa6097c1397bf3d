"""OpenCode (npm ``opencode-ai`` 1.18.33, ``opencode acp``) against the fake chat completions API
(tests/agents/real/chatcompletions.py), offline.

Its config (``OPENCODE_CONFIG``, written into the temporary home) declares a provider ``fake``
through the bundled ``@ai-sdk/openai-compatible`` package, pointed at the fake with a fake key;
turns autoupdate and sharing off; and makes OpenCode ask before a command or an edit (its
default is to allow both without asking). Its ``question`` tool stays off (it exists only with
``OPENCODE_ENABLE_QUESTION_TOOL=1``, and then hangs the turn: docs/agent-probes.md). Sessions
live in ``$XDG_DATA_HOME/opencode/opencode.db``, in the temporary home.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.real import chatcompletions

COMMAND = ["opencode", "acp"]
MODEL = chatcompletions.MODEL
API_KEY = "sk-fake-opencode-key-for-tests"
USAGE = chatcompletions.USAGE
handle = chatcompletions.handle


def config(base_url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"fake/{MODEL}",
        "small_model": f"fake/{MODEL}",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": base_url, "apiKey": API_KEY},
                "models": {
                    MODEL: {
                        "name": "Fake model",
                        "tool_call": True,
                        "limit": {"context": 128000, "output": 8192},
                    }
                },
            }
        },
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
    }


def environment(model_url: str, home: Path) -> dict[str, str]:
    """OpenCode pointed at the fake with a config of its own in ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "opencode.json"
    path.write_text(json.dumps(config(f"{model_url}/v1"), indent=2))
    return {
        "OPENCODE_CONFIG": str(path),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
