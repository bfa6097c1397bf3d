"""The servers under test, each a child process: Daphne serving koruweb, and the bare baseline.

Also what ``/proc`` says about a process: its resident memory and the CPU time it has used.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    """A server in a child process, listening on 127.0.0.1:``port``."""

    name = "server"

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self, within: float = 30) -> None:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + within
        while not self.ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


class Daphne(Child):
    """``daphne koruweb.asgi:application`` on the benchmark's database, DEBUG off."""

    def __init__(self, log: Path, env: dict[str, str], name: str = "koruweb") -> None:
        super().__init__(log)
        self.extra = env
        self.name = name
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        daphne = Path(sys.executable).with_name("daphne")
        return [
            str(daphne),
            *("-b", "127.0.0.1", "-p", str(self.port), "-v", "0"),
            *("--websocket_timeout", "-1", "koruweb.asgi:application"),
        ]

    def env(self) -> dict[str, str]:
        # This checkout's code, whatever the venv's editable install points at.
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        return {**os.environ, **self.extra, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False


class Bare(Child):
    """``bench/bare.py``: the transport's limit."""

    name = "bare websockets"

    def __init__(self, log: Path) -> None:
        super().__init__(log)
        self.ws_url = f"ws://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, str(ROOT / "bench" / "bare.py"), str(self.port)]

    def ready(self) -> bool:
        return "ready" in (self.log.read_text() if self.log.exists() else "")


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU time every core of the machine has spent busy (not idle, not waiting on I/O)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / CLOCK_TICKS
