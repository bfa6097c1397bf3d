"""GitHub Copilot CLI (``copilot --acp``) against the fake Anthropic Messages API.

Copilot runs in its documented offline mode (``COPILOT_OFFLINE=true``: no GitHub login, no
telemetry, no web tools, no GitHub MCP server, no auto-update), which needs a model of your
own ("bring your own key"): here the ``anthropic`` provider pointed at the fake, which calls
``POST {base}/v1/messages`` with the same body and stream as Claude Code does (``max_tokens``,
``messages``, ``model``, ``stream``, ``system``, ``temperature``, ``thinking``, ``tools``), so
``anthropic.py`` answers it. Copilot's tools are its own: ``bash {command, description}``,
``create {path, file_text}``, ``edit {path, old_str, new_str}``, ``view {path}``, …
"""

from __future__ import annotations

from pathlib import Path

from tests.agents.real import anthropic

COMMAND = ["copilot", "--acp"]
MODEL = "claude-sonnet-4-5"
# Copilot's modes are URLs (session/new's ``modes`` and its ``mode`` config option).
MODES = "https://agentclientprotocol.com/protocol/session-modes"
AGENT, PLAN, AUTOPILOT = f"{MODES}#agent", f"{MODES}#plan", f"{MODES}#autopilot"

handle = anthropic.handle


def environment(model_url: str, home: Path) -> dict[str, str]:
    """Copilot offline with the fake as its own Anthropic provider, and its home in ``home``."""
    return {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_TYPE": "anthropic",
        "COPILOT_PROVIDER_BASE_URL": model_url,  # without /v1: Copilot adds it
        "COPILOT_PROVIDER_API_KEY": "sk-ant-fake-key-for-tests",
        "COPILOT_MODEL": MODEL,
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_HOME": str(home / ".copilot"),
    }
