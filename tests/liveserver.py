"""A real server for integration tests, browser tests and bench/: ``daphne`` in a child process.

The child and the test process share the test database: the root conftest makes the SQLite
test database a file, which the child opens through ``DATABASE_URL``. With ``redis=True`` both
use the Redis channel layer, so the test process can reach the child's sockets through it.
"""

from __future__ import annotations

import abc
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.db import connections

BASE_DIR = Path(__file__).resolve().parents[1]


def _redis_url() -> str:
    """The test Redis; each pytest-xdist worker gets a database of its own (tokens' groups and
    the login limit are keyed by ids and names that the workers' databases share)."""
    url = urlsplit(os.environ.get("KORUWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url.geturl()
    db = int(url.path.strip("/") or 0) + 1 + int(worker[2:])
    return url._replace(path=f"/{db}").geturl()


REDIS_URL = _redis_url()
APP = "koruweb.asgi:application"


def database_url() -> str:
    """The URL of the test database this process uses, for a child process."""
    db = connections["default"].settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise RuntimeError(f"the test database is in memory ({name}); a child cannot open it")
        return f"sqlite:///{name}"
    if db["ENGINE"] == "django.db.backends.postgresql":
        auth = quote(db["USER"] or "", safe="")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"], safe="")
        host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        return f"postgres://{auth}@{host}/{db['NAME']}"
    raise RuntimeError(f"no live server on {db['ENGINE']}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "koruweb.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def _die_with_parent() -> None:
    """In the child: get SIGKILL if pytest itself dies, so no server outlives a run (Linux)."""
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Child(abc.ABC):
    """A server in a child process on a free port of 127.0.0.1, its output in ``log``."""

    name = "server"

    def __init__(self, log: Path, env: dict[str, str]) -> None:
        self.move(free_port())
        self.log = log
        self.spawned_at = 0
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The server's command line."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether the server answers yet."""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def move(self, port: int) -> None:
        """Listen on ``port`` from the next ``spawn`` on."""
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"

    def spawn(self) -> None:
        self.spawned_at = len(self.output)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def wait_ready(self, within: float = 20) -> None:
        """Until ``ready()``; raises with the server's output if it exits or never is. A free
        port another process took before the server bound it (``free_port`` only finds one
        free at the time) is replaced by another, a few times."""
        deadline = time.monotonic() + within
        moves = 3
        while self.process is not None:
            if self.process.poll() is not None:
                said = self.output[self.spawned_at :]
                if moves and "Address already in use" in said:
                    moves -= 1
                    self.move(free_port())
                    self.spawn()
                    continue
                code = self.process.returncode
                raise RuntimeError(f"the {self.name} exited ({code}):\n{self.output[-3000:]}")
            if self.ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} was not ready in {within} s:\n{self.output}")
            time.sleep(0.05)
        raise RuntimeError(f"the {self.name} was not started")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no close frames, no cleanup, as when a machine dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Daphne(Child):
    """``daphne <app>`` (koruweb's by default), ready once it serves the login page."""

    verbosity = 1  # daphne's default: it logs each request

    def __init__(self, log: Path, env: dict[str, str], app: str = APP) -> None:
        super().__init__(log, env)
        self.app = app

    def command(self) -> list[str]:
        daphne = Path(sys.executable).with_name("daphne")
        listen = ["-b", "127.0.0.1", "-p", str(self.port), "-v", str(self.verbosity)]
        return [str(daphne), *listen, "--websocket_timeout", "-1", self.app]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False


class Server(Daphne):
    """koruweb on the test database (and, with ``redis``, the Redis channel layer)."""

    def __init__(
        self,
        log: Path,
        *,
        redis: bool = False,
        grace: int | None = None,
        env: dict[str, str] | None = None,
        app: str = APP,
    ) -> None:
        """``env``: more settings for the child, e.g. ``{"WATCHING_HEARTBEAT_SECONDS": "1"}``;
        ``app``: another ASGI application than koruweb's (one that wraps it for a test)."""
        extra = {
            "DATABASE_URL": database_url(),
            "PYTHONPATH": str(BASE_DIR),
            # The child shares the test database: its notifier would claim the notices of
            # whichever test runs beside it and sign them with its own VAPID key. Off unless a
            # test asks for it (tests/browser/test_notifications_browser.py).
            "NOTIFY_POLL_MS": str(24 * 3600 * 1000),
        }
        if redis:
            extra["REDIS_URL"] = REDIS_URL
        if grace is not None:
            extra["RUNNER_GRACE_SECONDS"] = str(grace)
        super().__init__(log, child_env(**{**extra, **(env or {})}), app)
