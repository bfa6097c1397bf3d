"""The runner installs alone (issue 24): README.md's lines build the wheel in a checkout and
install it in a fresh virtualenv without the ``server`` extra; there Django cannot be imported,
and ``koruweb agent`` streams a turn of the demo agent to a live server.

pip never reaches an index here: the runner's dependencies (and setuptools, to build) are kept
as wheels in a cache filled once per machine and set of pins (``wheel_cache``), and each pip
runs with ``PIP_NO_INDEX`` and ``PIP_FIND_LINKS`` pointing at it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from activity.models import AgentToken, Chat, ToolActivity, Workspace
from tests.liveserver import BASE_DIR, Server

pytestmark = pytest.mark.django_db(transaction=True)
README = BASE_DIR / "README.md"
SOURCES = ["pyproject.toml", "README.md", "activity", "koruweb"]  # what the wheel is built from
PIP_SECONDS = 300  # filling the cache downloads; everything after it is local


def requirements() -> list[str]:
    """What building the wheel and installing it without extras need, as pyproject.toml pins it."""
    project = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())
    return [*project["build-system"]["requires"], *project["project"]["dependencies"]]


def wheel_cache() -> Path:
    """A directory of wheels of ``requirements()`` for this interpreter, downloaded once and
    kept under ``~/.cache/koruweb/wheels/`` (``$XDG_CACHE_HOME``), keyed by the pins and the
    Python version: later runs are offline."""
    needs = requirements()
    key = json.dumps([needs, sys.implementation.cache_tag, sys.platform, os.uname().machine])
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = home / "koruweb" / "wheels"
    cache = root / hashlib.sha256(key.encode()).hexdigest()[:16]
    if cache.is_dir():
        return cache
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=root, prefix=".filling-"))
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
    done = subprocess.run(
        [*pip, "--dest", str(partial), *needs],
        capture_output=True,
        text=True,
        timeout=PIP_SECONDS,
    )
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        pytest.fail(f"could not fill the wheel cache (is the package index reachable?):\n{done}")
    try:
        partial.rename(cache)  # whole or not at all; another run may have filled it meanwhile
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return cache


def readme_line(start: str) -> str:
    """The line of README.md's ``sh`` blocks that starts with ``start``, as written."""
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    found = [line for line in lines if line.startswith(start)]
    assert len(found) == 1, f"README.md shows {len(found)} lines starting {start!r}"
    return found[0]


class Venv:
    """A fresh virtualenv of this interpreter: its own pip, no Django, nothing of the checkout."""

    def __init__(self, path: Path, cache: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
        self.path = path
        self.bin = path / "bin"
        outside = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PIP_", "PYTHON", "DJANGO_", "VIRTUAL_ENV"))
        }
        self.env = {
            **outside,
            "PATH": f"{self.bin}{os.pathsep}{outside.get('PATH', '')}",
            "VIRTUAL_ENV": str(path),
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(cache),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }

    def sh(self, line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """``line`` as a shell runs it in this virtualenv (its ``python3`` and ``pip`` first)."""
        return subprocess.run(
            line,
            shell=True,
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=PIP_SECONDS,
        )


@pytest.fixture(scope="module")
def runner_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    """The README's two install lines, run as written: the wheel built in a checkout (a copy of
    this one's sources, so the build leaves nothing in the working tree), installed in a
    fresh virtualenv."""
    cache = wheel_cache()
    base = tmp_path_factory.mktemp("wheel")
    checkout = base / "koruweb"
    checkout.mkdir()
    for name in SOURCES:
        source = BASE_DIR / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(source, checkout / name, ignore=ignore)
        else:
            shutil.copy2(source, checkout / name)
    venv = Venv(base / "venv", cache)
    for start in ("python3 -m pip wheel", "pip install dist/"):
        done = venv.sh(readme_line(start), cwd=checkout)
        assert done.returncode == 0, f"{start}…:\n{done.stdout}\n{done.stderr}"
    yield venv


def test_the_runner_installs_from_its_wheel_without_django(runner_venv: Venv, tmp_path: Path):
    python = str(runner_venv.bin / "python")
    django = subprocess.run(
        [python, "-c", "import django"], cwd=tmp_path, capture_output=True, text=True
    )
    assert django.returncode != 0 and "No module named 'django'" in django.stderr
    where = subprocess.run(
        [python, "-P", "-c", "import activity.runner.cli as cli; print(cli.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(runner_venv.path))  # the wheel's, not the checkout's
    version = subprocess.run(
        [str(runner_venv.bin / "koruweb"), "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("koruweb "), version


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log")
    try:
        running.start()
        yield running
    finally:
        running.stop()


def test_koruweb_agent_from_the_wheel_streams_a_turn_of_the_demo_agent_to_the_server(
    runner_venv: Venv, server: Server, tmp_path: Path
):
    token = AgentToken.issue(Workspace.objects.create(slug="acme", name="Acme"), "laptop")[1]
    agent = [str(runner_venv.bin / "python"), "-m", "activity.runner.demo_agent"]
    flags = ["--server", server.ws_url, "--token", token, "--mode", "auto", "--prompt", "Fix it"]
    run = subprocess.run(
        [str(runner_venv.bin / "koruweb"), "agent", *flags, "--", *agent],
        cwd=tmp_path,
        env={**runner_venv.env, "KORUWEB_DEMO_FAST": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr  # every frame is on the server
    found = re.search(r"/chats/([0-9a-f-]{36})/", run.stdout)
    assert found, run.stdout
    chat = Chat.objects.get(pk=found[1])
    turn = chat.current_attempt
    assert turn is not None and turn.prompt == "Fix it" and turn.stop_reason == "end_turn"
    assert turn.reply.markdown
    assert ToolActivity.objects.filter(chat=chat).count() >= 3
