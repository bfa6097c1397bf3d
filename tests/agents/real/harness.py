"""Run a real agent through the README's command line, against the fake model API.

``RealRun`` is ``python manage.py agent --server … --token … [flags] -- AGENT`` (or another
``runner``: ``koruweb agent``, as README.md writes it) in a child
process of its own process group (as a terminal starts it), with the agent's command taken from
``tests/agents/real/node_modules/.bin`` and an isolated home: a temporary ``HOME``, the vendor's
config there, telemetry and update checks off, the fake's URL as the model API, and no
credential from the developer's environment.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.liveserver import BASE_DIR, child_env

REAL = Path(__file__).resolve().parent
BIN = REAL / "node_modules" / ".bin"
# OpenCode's own binary package: it declares no bin (its opencode-ai wrapper, which would, lists
# platform packages that were never published, and npm ci cannot lock it: package.json).
OPENCODE_BIN = REAL / "node_modules" / "opencode-linux-x64" / "bin"
BIN_DIRS = (BIN, OPENCODE_BIN)
# Whatever the developer has set that could reach a real model or change an agent's behaviour.
SCRUBBED = re.compile(
    r"^(ANTHROPIC_|CLAUDE|OPENAI_|CODEX_|GEMINI_|GOOGLE_|VERTEX|AWS_|AZURE_|HTTPS?_PROXY|"
    r"ALL_PROXY|NO_PROXY|XDG_|NODE_OPTIONS|NPM_CONFIG_|COPILOT_|GH_TOKEN|GITHUB_TOKEN|OPENCODE)",
    re.IGNORECASE,
)


# ``koruweb agent`` as the venv installed it (``[project.scripts]``), beside this interpreter.
KORUWEB_AGENT = [str(Path(sys.executable).with_name("koruweb")), "agent"]


def isolated_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The runner's environment: koruweb's test settings, no real credentials, a fresh home."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in child_env().items() if not SCRUBBED.match(k)}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "PATH": os.pathsep.join([*map(str, BIN_DIRS), env.get("PATH", "")]),
            "NO_PROXY": "127.0.0.1,localhost",
            "DO_NOT_TRACK": "1",
            "CI": "1",
        }
    )
    env.update(extra)
    return env


class RealRun:
    """The runner with a real agent, its output collected as it comes."""

    def __init__(
        self,
        server: str,
        token: str,
        agent: list[str],
        env: dict[str, str],
        *flags: str,
        stdin: bool = False,
        runner: list[str] | None = None,
    ) -> None:
        """``runner``: the runner's command line up to its flags (``manage.py agent`` by
        default; ``KORUWEB_AGENT``: ``koruweb agent``)."""
        command = [*(runner or [sys.executable, "manage.py", "agent"])]
        command += ["--server", server, "--token", token, *flags, "--", *agent]
        self.command = command
        self.marker = uuid.uuid4().hex  # in the environment of the runner and all it starts
        self.process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env={**env, "KORUWEB_TEST_RUN": self.marker},
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        self.err: list[str] = []
        assert self.process.stderr is not None and self.process.stdout is not None
        self._reader = threading.Thread(target=self._read_err, daemon=True)
        self._reader.start()
        line = self.process.stdout.readline()
        found = re.search(r"/chats/([0-9a-f-]{36})/", line)
        # The page's address, printed once the server has the chat (none if it never does).
        self.chat_id = uuid.UUID(found.group(1)) if found else uuid.UUID(int=0)

    def _read_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.err.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def send(self, prompt: str) -> None:
        """Type a prompt on the runner's standard input."""
        assert self.process.stdin is not None
        self.process.stdin.write(prompt.replace("\n", " ") + "\n")
        self.process.stdin.flush()

    def close_input(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()

    def ctrl_c(self) -> None:
        """What a terminal's Ctrl-C does: SIGINT to the foreground process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def finish(self, within: float = 60) -> tuple[int, str]:
        self.close_input()
        try:
            self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the runner did not finish within {within} s:\n{self.stderr[-4000:]}"
            ) from None
        self._reader.join(5)
        return self.process.returncode, self.stderr

    def kill(self) -> None:
        """The runner, the agent and everything they started, even what outlived the runner."""
        for pid in _marked(self.marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(10)
        self._reader.join(5)


def _marked(marker: str) -> list[int]:
    """The processes whose environment holds ``KORUWEB_TEST_RUN=marker``."""
    needle = f"KORUWEB_TEST_RUN={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def eventually[T](check: Callable[[], T | None], within: float = 30, what: str = "") -> T:
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"the expected state never came{': ' + what if what else ''}")
        time.sleep(0.05)


class WebUser:
    """A person in a browser-less session on the live server: logs in, answers prompts."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base = base_url.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.post("/accounts/login/", {"username": username, "password": password})

    def csrf(self) -> str:
        token = next((c.value for c in self.jar if c.name == "csrftoken"), None)
        if token is None:
            self.get("/accounts/login/")
            token = next(c.value for c in self.jar if c.name == "csrftoken")
        return token or ""

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as reply:
            return str(reply.read().decode())

    def post(self, path: str, data: dict[str, str]) -> tuple[int, str]:
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": self.csrf()}).encode()
        request = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + path, "HX-Request": "true"}
        )
        try:
            with self.opener.open(request, timeout=10) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def answer(self, prompt_id: uuid.UUID, **fields: str) -> str:
        """Answer a prompt as its page's form does (``choice=<option id>``, or a question's
        fields); raises unless the answer was taken."""
        status, text = self.post(f"/prompts/{prompt_id}/answer", fields)
        assert status == 200 and "sent" in text, f"the answer was refused ({status}): {text}"
        return text

    def choose(self, prompt: Any, intent: str) -> str:
        """Answer a permission prompt with its option of ``intent`` (``allow_once``, …): the
        server knows the runner's ids for the agent's options, never the agent's own
        (activity/runner/ids.py)."""
        return self.answer(
            prompt.pk, choice=next(c["id"] for c in prompt.choices if c["intent"] == intent)
        )
