"""``koruweb``, the runner's own command (``activity/runner/cli.py``): ``koruweb agent`` and
``koruweb host`` without Django, ``manage.py agent`` as their alias, and a server of another
protocol, whose reason the runner and the host print before they stop without retrying."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from activity.runner import cli
from activity.wire.frames import CLOSE_UPGRADE, PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[2]
REASON = (
    "this koruweb server speaks runner protocol 9; install its runner: pip install 'koruweb==9.0'"
)


class OtherServer:
    """A koruweb of another protocol: it reads each hello and closes with ``CLOSE_UPGRADE``."""

    def __init__(self) -> None:
        self.hellos: list[dict[str, Any]] = []

    async def handle(self, socket: ServerConnection) -> None:
        self.hellos.append(json.loads(await socket.recv()))
        await socket.close(CLOSE_UPGRADE, REASON)


@contextlib.asynccontextmanager
async def other_server() -> AsyncIterator[tuple[OtherServer, str]]:
    fake = OtherServer()
    async with serve(fake.handle, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield fake, f"ws://127.0.0.1:{port}"


async def koruweb(*words: str, within: float = 30) -> tuple[int, str]:
    """``python -m activity.runner.cli WORDS``: its exit code and standard error."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "activity.runner.cli",
        *words,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"koruweb {' '.join(words)} did not stop within {within} s") from None
    assert process.returncode is not None
    return process.returncode, err.decode()


# --- a server of another protocol --------------------------------------------------------------


async def test_a_runner_refused_for_its_protocol_prints_the_servers_reason_and_exits_2_at_once():
    async with other_server() as (fake, url):
        agent = ["--", sys.executable, "-c", "pass"]
        code, err = await koruweb("agent", "--server", url, "--token", "t", "--prompt", "x", *agent)
    assert code == 2, err
    assert REASON in err and f"this runner's protocol {PROTOCOL_VERSION}" in err
    assert len(fake.hellos) == 1  # no retry
    assert fake.hellos[0]["type"] == "hello" and fake.hellos[0]["protocol"] == PROTOCOL_VERSION


async def test_a_host_refused_for_its_protocol_prints_the_servers_reason_and_exits_2_at_once(
    tmp_path: Path,
):
    async with other_server() as (fake, url):
        offer = ["--agent", f"demo={sys.executable}", "--root", str(tmp_path)]
        code, err = await koruweb("host", "--server", url, "--token", "t", *offer)
    assert code == 2, err
    assert REASON in err and f"this host's protocol {PROTOCOL_VERSION}" in err
    assert len(fake.hellos) == 1
    assert fake.hellos[0]["type"] == "host_hello"
    assert fake.hellos[0]["protocol"] == PROTOCOL_VERSION


# --- the command line --------------------------------------------------------------------------


def test_koruweb_runs_without_importing_django() -> None:
    found = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "activity.runner.cli", "agent", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    assert "--allow-web" in found.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in found.stderr.splitlines()]
    assert "activity.runner.main" in imported and "activity.runner.host" in imported
    assert not [name for name in imported if name.split(".")[0] in {"django", "channels"}]


def test_koruweb_says_its_commands_and_refuses_another(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "koruweb agent --server" in capsys.readouterr().out
    assert cli.main([]) == 2
    assert "koruweb host --server" in capsys.readouterr().err
    assert cli.main(["serve"]) == 2
    assert "no such command 'serve'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("words", "code", "said"),
    [
        (["--server", "ws://127.0.0.1:9", "--token", "t"], 1, "give the agent's command after --"),
        (["--server", "http://x", "--token", "t", "--", "a"], 1, "use ws://HOST:PORT"),
        (["--server", "ws://127.0.0.1:9", "--", "a"], 1, "give an agent token"),
        (["--token", "t", "--", "a"], 2, "the following arguments are required: --server"),
        (["--server", "ws://x", "--connect-timeout", "soon", "--", "a"], 2, "invalid float"),
    ],
    ids=["no agent", "not ws", "no token", "no server", "a bad number"],
)
def test_a_command_line_that_cannot_run_exits_as_manage_py_agent_did(
    words: list[str], code: int, said: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.delenv("KORUWEB_TOKEN", raising=False)
    assert cli.main(["agent", *words]) == code
    assert said in capsys.readouterr().err


def test_a_host_command_line_that_cannot_run_exits_3_with_koruweb_hosts_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    words = ["host", "--server", "ws://x", "--token", "t", "--root", str(tmp_path)]
    assert cli.main([*words, "--agent", "demo=no-such-agent-anywhere"]) == 3
    err = capsys.readouterr().err
    assert "was not found" in err and "usage: koruweb host --server" in err


def test_manage_py_agent_has_exactly_koruweb_agents_flags_defaults_and_help() -> None:
    from activity.management.commands.agent import Command

    def flags(parser: Any) -> dict[str, tuple[Any, ...]]:
        return {
            action.dest: (tuple(action.option_strings), action.default, action.help, action.nargs)
            for action in parser._actions
            if action.dest != "help"
        }

    django = flags(Command().create_parser("manage.py", "agent"))
    own = cli.agent_parser()
    assert own.description == Command.help
    assert flags(own).items() <= django.items()
