"""The servers under test, each a child process (``tests/liveserver.py``): Daphne serving
koruweb, team mode's two of them, and the bare baseline. Also what ``/proc`` says about a
process: its resident memory and the CPU time it has used.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from tests.liveserver import BASE_DIR, Child, Daphne

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

__all__ = [
    "Bare",
    "Child",
    "Koruweb",
    "Team",
    "cpu_by_pid",
    "cpu_seconds",
    "machine_busy_seconds",
    "rss_bytes",
    "store_pids",
]


class Koruweb(Daphne):
    """Daphne serving ``app`` on the benchmark's database (``bench/data.py``), DEBUG off."""

    verbosity = 0

    def __init__(self, log: Path, env: dict[str, str], name: str, app: str) -> None:
        # This checkout's code, whatever the venv's editable install points at.
        path = os.pathsep.join(filter(None, [str(BASE_DIR), os.environ.get("PYTHONPATH")]))
        super().__init__(
            log, {**os.environ, **env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}, app
        )
        self.name = name


class Team:
    """Team mode: two Daphne processes serving koruweb on one PostgreSQL database and one Redis
    (``env``, from ``bench/data.py``). The runner connects to the first, viewers to both."""

    def __init__(self, tmp: Path, env: dict[str, str], name: str) -> None:
        self.name = name
        app = "koruweb.asgi:application"
        self.processes = [Koruweb(tmp / f"team-{x}.log", env, f"{name} {x}", app) for x in "AB"]

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


class Bare(Child):
    """``bench/bare.py``: the transport's limit."""

    name = "bare websockets"

    def __init__(self, log: Path) -> None:
        super().__init__(log, {**os.environ, "PYTHONUNBUFFERED": "1"})

    def command(self) -> list[str]:
        return [sys.executable, str(BASE_DIR / "bench" / "bare.py"), str(self.port)]

    def ready(self) -> bool:
        return "ready" in self.output


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


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """``cpu_seconds`` of each process in ``pids`` that still exists."""
    times = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            times[pid] = cpu_seconds(pid)
    return times


def store_pids() -> list[int]:
    """PostgreSQL's and Redis's processes (every backend, the server's own): team mode's CPU."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if stat.read_text().split(" (", 1)[1].startswith(("postgres)", "redis-server)")):
                pids.append(int(stat.parent.name))
    return pids


def machine_busy_seconds() -> float:
    """CPU time every core of the machine has spent busy (not idle, not waiting on I/O)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / CLOCK_TICKS
