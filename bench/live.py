"""The live path under load, against the transport's limit (issue 7).

    .venv/bin/python bench/live.py            # or: make bench
    .venv/bin/python bench/live.py --help     # shorter runs, fewer targets, other viewer counts

Drives the whole pipeline — agent socket → ingest → merge → SQLite → render → viewer sockets —
on a real Daphne child process (a migrated SQLite file in a temp dir), and, in the same run, a
bare ``websockets`` server (``bench/bare.py``) fanning the same updates out to as many viewers.
The load (one agent, N viewers) runs in this process; each server runs in its own.

Prints, for each viewer count, the agent updates/s each absorbs while no viewer's p99 latency
is over 100 ms, and the ratio; latency p50/p99 at a steady 50 and 200 updates/s with 50
viewers (also against koruweb with ``PUSH_WINDOW_MS=0``: one push per update); the server's
memory per idle viewer; and whether every viewer's screen equals the database at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: import the repo, not bench/, as the top level
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

from bench import data  # noqa: E402
from bench.clients import Agent, Viewer, Workload  # noqa: E402
from bench.servers import (  # noqa: E402
    Bare,
    Child,
    Daphne,
    cpu_seconds,
    machine_busy_seconds,
    rss_bytes,
)
from tests import frames  # noqa: E402

LIMIT = 0.100  # no viewer more than 100 ms behind at p99
NOISE = 0.25  # a probe during which other processes used more than this share of a core is redone


@dataclass
class Target:
    name: str
    server: Child
    ws_url: str
    koruweb: bool
    token: str = ""
    cookie: str = ""

    def agent_url(self) -> str:
        return f"{self.ws_url}/ws/agent/" if self.koruweb else f"{self.ws_url}/agent"

    def viewer_url(self, chat_id: uuid.UUID) -> str:
        if self.koruweb:
            return f"{self.ws_url}/ws/chats/{chat_id}/"
        return f"{self.ws_url}/view/{chat_id}"

    @property
    def origin(self) -> str:
        return self.ws_url.replace("ws://", "http://")


@dataclass
class Level:
    """One chat on one target: its agent, its viewers and the calls sent so far."""

    target: Target
    chat_id: uuid.UUID
    agent: Agent
    viewers: list[Viewer]
    workload: Workload = field(default_factory=Workload)
    last_seq: dict[str, int] = field(default_factory=dict)  # call → its latest update's seq


@dataclass
class Probe:
    rate: float
    achieved: float
    latencies: list[float]
    worst_p99: float  # the p99 of the viewer furthest behind
    missed: int  # (update, viewer) pairs never shown
    server_cpu: float  # share of one core over the probe
    client_cpu: float
    other_cpu: float  # what every other process on the machine used meanwhile
    pushes: float  # pushes per viewer per second

    @property
    def ok(self) -> bool:
        return self.missed == 0 and self.worst_p99 <= LIMIT and self.achieved >= 0.95 * self.rate

    def pct(self, q: float) -> float:
        return quantile(self.latencies, q)

    def line(self) -> str:
        return (
            f"{self.rate:8.0f}/s offered {self.achieved:8.0f}/s sent  "
            f"p50 {ms(self.pct(0.5))} p99 {ms(self.pct(0.99))} worst p99 {ms(self.worst_p99)}  "
            f"missed {self.missed}  cpu: server {self.server_cpu:4.0%} load {self.client_cpu:4.0%} "
            f"others {self.other_cpu:4.0%}  pushes/viewer/s {self.pushes:5.0f}  "
            f"{'ok' if self.ok else 'FAIL'}"
        )


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("inf")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms" if seconds != float("inf") else "    inf ms"


def say(text: str) -> None:
    print(text, flush=True)


# --- connections -----------------------------------------------------------------------------


async def open_level(target: Target, n: int, window: int) -> Level:
    chat_id = uuid.uuid4()
    agent = await Agent.open(target.agent_url(), chat_id, target.token or None, window)
    if target.koruweb:  # a turn for the rows, before any viewer looks
        await agent.send(frames.turn_started(agent.seq + 1, uuid.uuid4(), uuid.uuid4()))
        await agent.settle()
    viewers = await open_viewers(target, chat_id, n)
    return Level(target, chat_id, agent, viewers)


async def open_viewers(target: Target, chat_id: uuid.UUID, n: int) -> list[Viewer]:
    viewers: list[Viewer] = []
    for start in range(0, n, 25):  # in batches: a page load is not a thundering herd
        batch = [
            Viewer.open(target.viewer_url(chat_id), target.cookie or None, target.origin)
            for _ in range(start, min(n, start + 25))
        ]
        viewers += await asyncio.gather(*batch)
    await asyncio.wait_for(asyncio.gather(*(v.synced.wait() for v in viewers)), 30)
    return viewers


async def close_level(level: Level) -> None:
    await asyncio.gather(*(v.close() for v in level.viewers))
    await level.agent.close()


# --- one probe: a steady rate for a while ----------------------------------------------------


async def probe(level: Level, rate: float, seconds: float) -> Probe:
    agent, viewers, pid = level.agent, level.viewers, level.target.server.pid
    for viewer in viewers:
        viewer.seen.clear()
    pushes0 = sum(v.pushes for v in viewers)
    total = max(2, int(rate * seconds))
    sent: dict[str, list[tuple[int, float]]] = {}
    cpu0, load0, busy0 = cpu_seconds(pid), _own_cpu(), machine_busy_seconds()
    start = time.perf_counter()
    last = start
    n = 0
    while n < total:
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while n < due:
            frame, call = level.workload.frame(agent.seq + 1)
            last = await agent.send(frame)
            sent.setdefault(call, []).append((frame["seq"], last))
            level.last_seq[call] = frame["seq"]
            n += 1
    achieved = total / (last - start + 1 / rate)
    await drain(level, sent)
    wall = time.perf_counter() - start
    server_cpu, client_cpu = (cpu_seconds(pid) - cpu0) / wall, (_own_cpu() - load0) / wall
    other_cpu = max(0.0, (machine_busy_seconds() - busy0) / wall - server_cpu - client_cpu)
    await agent.settle()
    latencies: list[float] = []
    p99s: list[float] = []
    missed = 0
    for viewer in viewers:
        own = viewer_latencies(viewer, sent)
        missed += total - len(own)
        latencies += own
        p99s.append(quantile(own, 0.99) if len(own) == total else float("inf"))
    pushes = (sum(v.pushes for v in viewers) - pushes0) / len(viewers) / wall
    return Probe(
        rate, achieved, latencies, max(p99s), missed, server_cpu, client_cpu, other_cpu, pushes
    )


async def quiet_probe(level: Level, rate: float, seconds: float, tries: int = 3) -> Probe:
    """A probe, redone (up to ``tries`` times) while other processes load the machine."""
    for attempt in range(tries):
        await quiet_machine()
        result = await probe(level, rate, seconds)
        noisy = result.other_cpu > NOISE and attempt + 1 < tries
        mark = "  (others busy: again)" if noisy else ""
        say(f"  {level.target.name:>24} {len(level.viewers):3d} viewers {result.line()}{mark}")
        await asyncio.sleep(0.5)
        if not noisy:
            break
    return result


async def quiet_machine(within: float = 120) -> None:
    """Wait (up to ``within`` seconds) until other processes leave the cores alone."""
    start = time.perf_counter()
    while True:
        busy0, own0, wall0 = machine_busy_seconds(), _own_cpu(), time.perf_counter()
        await asyncio.sleep(0.5)
        wall = time.perf_counter() - wall0
        others = (machine_busy_seconds() - busy0 - (_own_cpu() - own0)) / wall
        waited = time.perf_counter() - start
        if others <= NOISE / 2 or waited > within:
            if waited > 1:
                say(f"  (waited {waited:.0f} s for other processes to leave the cores alone)")
            return
        await asyncio.sleep(1)


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


async def drain(level: Level, sent: dict[str, list[tuple[int, float]]], within: float = 3) -> None:
    """Wait until every viewer shows every call's latest update (or ``within`` seconds)."""
    final = {call: updates[-1][0] for call, updates in sent.items()}
    deadline = time.perf_counter() + within
    while time.perf_counter() < deadline:
        if all(v.best.get(c, 0) >= s for v in level.viewers for c, s in final.items()):
            return
        await asyncio.sleep(0.01)


def viewer_latencies(viewer: Viewer, sent: dict[str, list[tuple[int, float]]]) -> list[float]:
    """For each update sent: when this viewer first saw its row at that update or later."""
    out: list[float] = []
    done: dict[str, int] = {}
    for when, call, seq in viewer.seen:
        updates = sent.get(call)
        if updates is None:
            continue
        i = done.get(call, 0)
        while i < len(updates) and updates[i][0] <= seq:
            out.append(when - updates[i][1])
            i += 1
        done[call] = i
    return out


# --- what each section measures --------------------------------------------------------------


async def absorbed(
    level: Level, seconds: float, start: float, top: float, steps: int
) -> Probe | None:
    """The highest steady rate at which every viewer's p99 stays within 100 ms."""
    best: Probe | None = None
    low, high = 0.0, 0.0
    rate = start
    while rate <= top:  # double while it holds
        result = await quiet_probe(level, rate, seconds)
        if not result.ok:
            high = rate
            break
        best, low = result, rate
        rate *= 2
    if high == 0:
        return best
    if best is None:  # not even the first rate: halve until one holds
        while best is None and rate > 5:
            rate /= 2
            result = await quiet_probe(level, rate, seconds)
            if result.ok:
                best, low = result, rate
            else:
                high = rate
    for _ in range(steps if best is not None else 0):  # then bisect
        rate = (low + high) / 2
        result = await quiet_probe(level, rate, seconds)
        if result.ok:
            best, low = result, rate
        else:
            high = rate
    return best


async def settled_screens(level: Level) -> list[str]:
    """Wait for every viewer to reach the chat's version, then compare screens with the DB."""
    chat_version = await asyncio.to_thread(data.chat_version, level.chat_id)
    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline:
        if all(v.shown >= chat_version for v in level.viewers):
            break
        await asyncio.sleep(0.05)
    behind = [n for n, v in enumerate(level.viewers) if v.shown < chat_version]
    problems = [f"viewer {n} shows version {level.viewers[n].shown}" for n in behind]
    screens = [v.rows for v in level.viewers]
    return problems + await asyncio.to_thread(data.screens_match, level.chat_id, screens)


def bare_screens(level: Level) -> list[str]:
    return [
        f"viewer {n} is behind"
        for n, v in enumerate(level.viewers)
        if any(v.best.get(c, 0) < s for c, s in level.last_seq.items())
    ]


async def idle_memory(target: Target, k: int) -> float:
    """(RSS with ``k`` idle viewers − RSS with none) / k, in bytes."""
    level = await open_level(target, 1, 256)
    for _ in range(20):
        frame, call = level.workload.frame(level.agent.seq + 1)
        await level.agent.send(frame)
    await level.agent.settle()
    await asyncio.sleep(0.5)
    await asyncio.gather(*(v.close() for v in level.viewers))
    await asyncio.sleep(1)
    before = await rss(target)
    viewers = await open_viewers(target, level.chat_id, k)
    await asyncio.sleep(1)
    after = await rss(target)
    await asyncio.gather(*(v.close() for v in viewers))
    await level.agent.close()
    return (after - before) / k


async def rss(target: Target) -> float:
    samples = []
    for _ in range(5):
        samples.append(rss_bytes(target.server.pid))
        await asyncio.sleep(0.1)
    return statistics.median(samples)


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Report:
    absorbed: dict[tuple[str, int], Probe | None] = field(default_factory=dict)
    steady: dict[tuple[str, int], Probe] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    screens: dict[tuple[str, int], list[str]] = field(default_factory=dict)


async def run(args: argparse.Namespace, targets: list[Target]) -> Report:
    report = Report()
    if args.idle:
        say(f"memory per idle viewer ({args.idle} viewers)")
        for target in targets:
            if target.name != "koruweb, one push/update":
                report.memory[target.name] = await idle_memory(target, args.idle)
                say(f"  {target.name:>24} {report.memory[target.name] / 1024:6.1f} KiB")
    if args.steady:
        say(f"latency at steady rates, {args.steady_viewers} viewers, {args.steady} s each")
        for rate in (50, 200):
            for target in targets:
                level = await open_level(target, args.steady_viewers, args.window)
                result = await quiet_probe(level, rate, args.steady)
                report.steady[(target.name, rate)] = result
                await check(level, report)
                await close_level(level)
                await asyncio.sleep(0.5)
    if args.seconds:
        say(f"absorbed updates/s with every viewer's p99 ≤ 100 ms, {args.seconds} s per probe")
        for n in args.viewers:
            for target in targets:
                if target.name == "koruweb, one push/update" and n != max(args.viewers):
                    continue
                level = await open_level(target, n, args.window)
                report.absorbed[(target.name, n)] = await absorbed(
                    level, args.seconds, args.start, args.top, args.steps
                )
                await check(level, report)
                await close_level(level)
    return report


async def check(level: Level, report: Report) -> None:
    await level.agent.settle()
    if level.target.koruweb:
        problems = await settled_screens(level)
    else:
        await asyncio.sleep(1)
        problems = bare_screens(level)
    key = (level.target.name, len(level.viewers))
    report.screens[key] = report.screens.get(key, []) + problems
    errors = level.agent.errors
    if errors:
        report.screens[key].append(f"{len(errors)} frames refused, first: {errors[0]}")
    verdict = problems or "yes"
    say(f"  {level.target.name:>24} screens equal the source: {verdict}")


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def summary(args: argparse.Namespace, report: Report) -> str:
    lines = [f"machine: {machine()}", ""]
    if report.absorbed:
        lines += [
            "| viewers | koruweb updates/s | bare websockets updates/s | koruweb / bare |",
            "|---:|---:|---:|---:|",
        ]
        for n in args.viewers:
            mine = report.absorbed.get(("koruweb", n))
            bare = report.absorbed.get(("bare websockets", n))
            lines.append(
                f"| {n} | {rate_of(mine)} | {rate_of(bare)} | {ratio(mine, bare)} of the baseline |"
            )
        one = report.absorbed.get(("koruweb, one push/update", max(args.viewers)))
        if one is not None or ("koruweb, one push/update", max(args.viewers)) in report.absorbed:
            bare = report.absorbed.get(("bare websockets", max(args.viewers)))
            lines.append(
                f"| {max(args.viewers)} (one push per update) | {rate_of(one)} | "
                f"{rate_of(bare)} | {ratio(one, bare)} of the baseline |"
            )
        lines.append("")
    if report.steady:
        lines += [
            f"| {args.steady_viewers} viewers | "
            + " | ".join(f"{name} p50 / p99 (worst viewer p99)" for name in names(report))
            + " |",
            "|---|" + "---:|" * len(names(report)),
        ]
        for rate in (50, 200):
            cells = []
            for name in names(report):
                p = report.steady.get((name, rate))
                cells.append(
                    "—"
                    if p is None
                    else f"{p.pct(0.5) * 1000:.1f} / {p.pct(0.99) * 1000:.1f} ms "
                    f"({p.worst_p99 * 1000:.1f})"
                )
            lines.append(f"| {rate} updates/s | " + " | ".join(cells) + " |")
        lines.append("")
    if report.memory:
        lines.append(
            f"memory per idle viewer ({args.idle} viewers): koruweb "
            f"{kib(report.memory.get('koruweb'))}, "
            f"bare websockets {kib(report.memory.get('bare websockets'))}"
        )
    for (name, n), problems in sorted(report.screens.items()):
        verdict = "equal" if not problems else "DIFFERENT: " + "; ".join(problems[:5])
        lines.append(f"screens vs source, {name}, {n} viewers: {verdict}")
    return "\n".join(lines)


def names(report: Report) -> list[str]:
    return list(dict.fromkeys(name for name, _ in report.steady))


def rate_of(p: Probe | None) -> str:
    return "—" if p is None else f"{p.achieved:,.0f}"


def ratio(mine: Probe | None, bare: Probe | None) -> str:
    if mine is None or bare is None:
        return "—"
    return f"{mine.achieved / bare.achieved:.0%}"


def kib(value: float | None) -> str:
    return "—" if value is None else f"{value / 1024:.1f} KiB"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--viewers", default="1,10,50", help="viewer counts (default 1,10,50)")
    p.add_argument("--seconds", type=float, default=3, help="per rate probe; 0 skips (3)")
    p.add_argument("--start", type=float, default=200, help="first rate probed (200/s)")
    p.add_argument("--top", type=float, default=25600, help="highest rate probed (25600/s)")
    p.add_argument("--steps", type=int, default=4, help="bisection steps (4)")
    p.add_argument("--steady", type=float, default=10, help="s at 50 and 200/s; 0 skips (10)")
    p.add_argument("--steady-viewers", type=int, default=50, help="viewers then (50)")
    p.add_argument("--idle", type=int, default=200, help="idle viewers for memory; 0 skips (200)")
    p.add_argument("--window", type=int, default=256, help="the agent's unacked frames (256)")
    p.add_argument(
        "--targets",
        default="koruweb,bare,onepush",
        help="koruweb, bare (the baseline), onepush (PUSH_WINDOW_MS=0)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temp dir (database, logs)")
    args = p.parse_args(argv)
    args.viewers = [int(n) for n in args.viewers.split(",")]
    args.targets = args.targets.split(",")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    tmp = Path(tempfile.mkdtemp(prefix="koruweb-bench-"))
    fixtures = data.prepare(tmp)
    targets: list[Target] = []
    if "koruweb" in args.targets:
        server = Daphne(tmp / "koruweb.log", fixtures.env)
        targets.append(Target("koruweb", server, server.ws_url, True, fixtures.token))
    if "bare" in args.targets:
        bare = Bare(tmp / "bare.log")
        targets.append(Target("bare websockets", bare, bare.ws_url, False))
    if "onepush" in args.targets:
        env = {**fixtures.env, "PUSH_WINDOW_MS": "0"}
        server = Daphne(tmp / "onepush.log", env, "koruweb, one push/update")
        targets.append(Target(server.name, server, server.ws_url, True, fixtures.token))
    for target in targets:
        target.cookie = fixtures.cookie if target.koruweb else ""
    say(f"machine: {machine()}; temp dir {tmp}")
    try:
        for target in targets:
            target.server.start()
            say(f"  {target.name}: pid {target.server.pid}, {target.ws_url}")
        report = asyncio.run(run(args, targets))
    finally:
        for target in targets:
            target.server.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    say("")
    say(summary(args, report))
    failed = any(report.screens.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
