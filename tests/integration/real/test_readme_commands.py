"""The runner's command lines in README.md and docs/agents.md, run as written (``koruweb agent``
with the venv's ``koruweb``, ``.venv/bin/python manage.py agent`` with this interpreter).

Only what cannot be written down is replaced: the server's address, the token (``TOKEN``) and a
key the docs elide (``…``). The agent answers from the fake model API (an untagged prompt gets a
plain answer), so each line must start its agent, run one turn and exit 0.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from activity.models import Chat
from tests.agents.real.fakeapi import FakeModels
from tests.agents.real.fixtures import vendor as fake_vendor
from tests.agents.real.harness import KORUWEB_AGENT, RealRun, isolated_env
from tests.liveserver import BASE_DIR, Server

pytestmark = pytest.mark.django_db(transaction=True)
VENDOR = {"claude-agent-acp": "anthropic", "codex-acp": "openai", "gemini": "gemini"}
VENDOR["opencode"] = "opencode"  # tests/agents/real/opencode.py
VENDOR["copilot"] = "copilot"  # Copilot CLI, through its own Anthropic provider (BYOK)


# The runner's command lines the docs write, up to their flags, and what runs each here.
RUNNERS = {
    ("koruweb", "agent"): KORUWEB_AGENT,
    (".venv/bin/python", "manage.py", "agent"): [sys.executable, "manage.py", "agent"],
}


def agent_lines(path: Path) -> list[str]:
    """Every ``koruweb agent`` and ``manage.py agent`` command in the file's ``sh`` blocks,
    continuations joined."""
    blocks = re.findall(r"```sh\n(.*?)```", path.read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    # A comment starts at a "#" after a space (Copilot's mode ids are URLs with a "#" in them).
    lines = [" ".join(re.split(r"(?:^|\s)#", line)[0].split()) for line in lines]
    return [line for line in lines if re.search(r"(^|\s)(koruweb|manage\.py) agent ", line)]


def runner_of(words: list[str]) -> tuple[int, list[str]]:
    """Where the runner's command starts in ``words`` (environment words before it), and what
    runs it here."""
    for start in range(len(words)):
        for written, command in RUNNERS.items():
            if tuple(words[start : start + len(written)]) == written:
                return start, command
    raise AssertionError(f"no runner in {words}")


DOCUMENTED = [
    (path.name, line)
    for path in (BASE_DIR / "README.md", BASE_DIR / "docs" / "agents.md")
    for line in agent_lines(path)
]


def test_the_readme_and_the_agents_page_show_a_command_line_for_each_tested_agent():
    agents = {shlex.split(line)[-1] for _, line in DOCUMENTED} | {
        shlex.split(line)[-2] for _, line in DOCUMENTED
    }
    assert {"claude-agent-acp", "codex-acp", "gemini"} <= agents
    assert "opencode" in agents
    assert "copilot" in agents


@pytest.mark.parametrize(
    ("where", "line"),
    DOCUMENTED,
    ids=[f"{where}:{line.split(' -- ')[-1]}" for where, line in DOCUMENTED],
)
def test_a_documented_command_line_runs_one_turn_and_exits_0(
    where: str,
    line: str,
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    tmp_path: Path,
) -> None:
    words = shlex.split(line.replace("ws://127.0.0.1:8000", koruweb_server.ws_url))
    start, runner = runner_of(words)
    env_words, words = words[:start], words[start:]
    assert all("=" in word for word in env_words), line
    command = words[words.index("--") + 1 :]
    vendor = VENDOR[command[0]]
    home = tmp_path / "home"
    env = isolated_env(home, fake_vendor(vendor).environment(f"{fake_models.url}/{vendor}", home))
    for word in env_words:  # KEY=… from the docs: the fake's own key stands in
        assert word.split("=", 1)[0] in env, f"{where}: {word} is not what the agent reads"
    flags = words[words.index("agent") + 1 : words.index("--")]
    flags = [agent_token if w == "TOKEN" else w for w in flags]
    assert flags[:4] == ["--server", koruweb_server.ws_url, "--token", agent_token], line
    run = RealRun(koruweb_server.ws_url, agent_token, command, env, *flags[4:], runner=runner)
    code, err = run.finish(within=90)
    assert code == 0, f"{where}: {line}\n{err}"
    turn = Chat.objects.get(pk=run.chat_id).current_attempt
    assert turn is not None and turn.prompt == "Fix the failing test"
    assert turn.stop_reason == "end_turn" and turn.reply.markdown
