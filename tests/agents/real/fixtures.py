"""Session fixtures for the real agents' tests: the fake model API, the agents, one server.

Loaded by the root conftest (``pytest_plugins``), so the integration and browser tests share
one fake model API for the whole session.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from activity.models import AgentToken, Role, Workspace
from tests.agents.real.fakeapi import FakeModels
from tests.agents.real.harness import BIN, BIN_DIRS, RealRun, WebUser, isolated_env
from tests.browser.helpers import PASSWORD, member
from tests.liveserver import Server

VENDORS: tuple[str, ...] = ("anthropic", "openai", "gemini")  # tests/agents/real/<vendor>.py


def vendor(name: str) -> ModuleType:
    return importlib.import_module(f"tests.agents.real.{name}")


@pytest.fixture(scope="session")
def fake_models() -> Iterator[FakeModels]:
    """One fake of every vendor's model API, for the whole session."""
    with FakeModels({name: vendor(name).handle for name in VENDORS}) as fake:
        yield fake


@pytest.fixture(scope="session")
def real_agents() -> Path:
    """``node_modules/.bin`` of the pinned agents (``make test`` runs ``npm ci`` first)."""
    missing = [
        command
        for name in VENDORS
        if not any((d / (command := vendor(name).COMMAND[0])).exists() for d in BIN_DIRS)
    ]
    if missing or shutil.which("node") is None:
        pytest.fail(
            f"the real agents are not installed ({', '.join(missing) or 'node is missing'}): "
            "run scripts/ensure-agents (make test does), which needs Node 20 and the npm registry"
        )
    return BIN


@pytest.fixture(scope="session")
def agent_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One koruweb server (over Redis) for every real agent's test."""
    running = Server(tmp_path_factory.mktemp("daphne") / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def koruweb_server(agent_server: Server, transactional_db: None) -> Server:
    """The session's server, on this test's data; started again if a test left it down."""
    if not agent_server.running:
        agent_server.start()
    return agent_server


@pytest.fixture
def workspace(transactional_db: None) -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def agent_token(workspace: Workspace) -> str:
    return AgentToken.issue(workspace, "laptop")[1]


@pytest.fixture
def approver(koruweb_server: Server, workspace: Workspace) -> WebUser:
    """Ann, an approver of the workspace, logged in on the live server (no browser)."""
    member(workspace, "ann", Role.APPROVER)
    return WebUser(koruweb_server.url, "ann", PASSWORD)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The agent's working directory: a small project."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "greet.py").write_text('def greet(name):\n    return "Hello " + name\n')
    (root / "notes.txt").write_text("first line\nsecond line\n")
    return root


StartAgent = Callable[..., RealRun]


@pytest.fixture
def start_agent(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    project: Path,
    tmp_path: Path,
) -> Iterator[StartAgent]:
    """``start_agent("anthropic", "--mode", "default", "--prompt", p)``: the README's command
    line with that vendor's agent, isolated, against the fake; killed at the end of the test."""
    runs: list[RealRun] = []

    def start(name: str, *flags: str, stdin: bool = False, **env: str) -> RealRun:
        module = vendor(name)
        home = tmp_path / f"home-{name}-{len(runs)}"
        extra = module.environment(f"{fake_models.url}/{name}", home)
        run = RealRun(
            koruweb_server.ws_url,
            agent_token,
            list(module.COMMAND),
            isolated_env(home, {**extra, **env}),
            "--cwd",
            str(project),
            *flags,
            stdin=stdin,
        )
        runs.append(run)
        return run

    try:
        yield start
    finally:
        for run in runs:
            if run.process.poll() is None:
                run.kill()


# GitHub Copilot CLI through its own Anthropic provider (tests/agents/real/copilot.py).
VENDORS = (*VENDORS, "copilot")

# OpenCode: tests/agents/real/opencode.py (the chat completions fake under /opencode/).
VENDORS = (*VENDORS, "opencode")
