"""One chat on one server under a steady load, and the search for the highest rate it absorbs.

A ``Level`` is one chat on one target: an agent socket and N viewer sockets (``bench/clients.py``).
``probe`` sends updates at a steady rate for a while and measures, for every update and every
viewer, the time from the agent sending it to the first push that shows it (or a newer state of
its row). ``absorbed`` finds the highest rate at which no viewer is more than 100 ms behind at
p99. Each probe is redone while other processes load the machine: on 2 cores, any other work
moves the figures.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
import uuid
from dataclasses import dataclass, field

from bench.clients import Agent, Viewer, Workload
from bench.servers import Child, Team, cpu_by_pid, machine_busy_seconds, store_pids
from tests import frames

LIMIT = 0.100  # no viewer more than 100 ms behind at p99
SATURATED = 0.9  # the load's share of a core past which a figure measures the load (load_bound)
NOISE = 0.25  # a probe during which other processes used more than this share of a core is redone


@dataclass
class Target:
    name: str
    server: Child | Team
    koruweb: bool
    token: str = ""
    cookie: str = ""
    database: str = "default"  # its alias in this process (bench/data.py)

    @property
    def processes(self) -> list[Child]:
        """The server's processes: the agent connects to the first, viewer n to the nth in turn."""
        return list(self.server.processes) if isinstance(self.server, Team) else [self.server]

    def agent_url(self, k: int = 0) -> str:
        """The runner socket of chat ``k``: on the first process, or (many chats in team mode)
        on each process in turn, as runners reach a team's processes behind its proxy."""
        ws_url = self.processes[k % len(self.processes)].ws_url
        return f"{ws_url}/ws/agent/" if self.koruweb else f"{ws_url}/agent"

    def viewer_url(self, chat_id: uuid.UUID, n: int) -> tuple[str, str]:
        """Viewer n's socket URL and the Origin its page would send."""
        ws_url = self.processes[n % len(self.processes)].ws_url
        path = f"/ws/chats/{chat_id}/" if self.koruweb else f"/view/{chat_id}"
        return ws_url + path, ws_url.replace("ws://", "http://")

    def store_pids(self) -> list[int]:
        """PostgreSQL's and Redis's processes, whose CPU team mode uses; none otherwise."""
        return store_pids() if isinstance(self.server, Team) else []


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
    server_cpu: float  # share of one core over the probe (team mode: both processes)
    client_cpu: float
    store_cpu: float  # team mode: PostgreSQL's and Redis's processes
    other_cpu: float  # what every other process on the machine used meanwhile
    pushes: float  # pushes per viewer per second
    resyncs: int  # times a viewer saw a gap and asked again

    @property
    def ok(self) -> bool:
        return self.missed == 0 and self.worst_p99 <= LIMIT and self.achieved >= 0.95 * self.rate

    @property
    def load_bound(self) -> bool:
        """The load (one agent, the viewers: this process) used nearly a whole core: the figure
        says how fast the load reads, not how fast the server pushes, and is not a valid one."""
        return self.client_cpu >= SATURATED

    def pct(self, q: float) -> float:
        return quantile(self.latencies, q)

    def line(self) -> str:
        stores = f"pg+redis {self.store_cpu:4.0%} " if self.store_cpu else ""
        return (
            f"{self.rate:8.0f}/s offered {self.achieved:8.0f}/s sent  "
            f"p50 {ms(self.pct(0.5))} p99 {ms(self.pct(0.99))} worst p99 {ms(self.worst_p99)}  "
            f"missed {self.missed}  cpu: server {self.server_cpu:4.0%} load {self.client_cpu:4.0%} "
            f"{stores}others {self.other_cpu:4.0%}  pushes/viewer/s {self.pushes:5.0f}  "
            f"resyncs {self.resyncs}  "
            f"{'ok' if self.ok else 'FAIL'}"
            f"{'  INVALID: the load used a whole core' if self.load_bound else ''}"
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


async def open_level(target: Target, n: int, window: int, k: int = 0) -> Level:
    chat_id = uuid.uuid4()
    agent = await Agent.open(target.agent_url(k), chat_id, target.token or None, window)
    if target.koruweb:  # a turn for the rows, before any viewer looks
        await agent.send(frames.turn_started(agent.seq + 1, uuid.uuid4(), uuid.uuid4()))
        await agent.settle()
    viewers = await open_viewers(target, chat_id, n)
    return Level(target, chat_id, agent, viewers)


async def open_viewers(target: Target, chat_id: uuid.UUID, n: int) -> list[Viewer]:
    viewers: list[Viewer] = []
    for start in range(0, n, 25):  # in batches: a page load is not a thundering herd
        urls = [target.viewer_url(chat_id, i) for i in range(start, min(n, start + 25))]
        batch = [Viewer.open(url, target.cookie or None, origin) for url, origin in urls]
        viewers += await asyncio.gather(*batch)
    await asyncio.wait_for(asyncio.gather(*(v.synced.wait() for v in viewers)), 30)
    return viewers


async def close_level(level: Level) -> None:
    await asyncio.gather(*(v.close() for v in level.viewers))
    await level.agent.close()


async def probe(level: Level | list[Level], rate: float, seconds: float) -> Probe:
    """A steady ``rate`` for ``seconds`` (to several chats: ``rate`` in all, the chats in turn).
    This process collects no garbage meanwhile: a pause of the load's own would count as every
    viewer's latency."""
    gc.collect()
    gc.disable()
    try:
        return await _probe(level if isinstance(level, list) else [level], rate, seconds)
    finally:
        gc.enable()


async def _probe(levels: list[Level], rate: float, seconds: float) -> Probe:
    target = levels[0].target
    viewers = [viewer for level in levels for viewer in level.viewers]
    pids = [process.pid for process in target.processes]
    for viewer in viewers:
        viewer.seen.clear()
    pushes0 = sum(v.pushes for v in viewers)
    resyncs0 = sum(v.resyncs for v in viewers)
    total = max(2, int(rate * seconds))
    sent: list[dict[str, list[tuple[int, float]]]] = [{} for _ in levels]
    server0, store0 = cpu_by_pid(pids), cpu_by_pid(target.store_pids())
    load0, busy0 = _own_cpu(), machine_busy_seconds()
    start = time.perf_counter()
    last = start
    n = 0
    while n < total:
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while n < due:
            k = n % len(levels)
            level = levels[k]
            frame, call = level.workload.frame(level.agent.seq + 1)
            last = await level.agent.send(frame)
            sent[k].setdefault(call, []).append((frame["seq"], last))
            level.last_seq[call] = frame["seq"]
            n += 1
    achieved = total / (last - start + 1 / rate)
    await asyncio.gather(*(drain(level, sent[k]) for k, level in enumerate(levels)))
    wall = time.perf_counter() - start
    server_cpu, client_cpu = _used(server0, pids) / wall, (_own_cpu() - load0) / wall
    store_cpu = _used(store0, target.store_pids()) / wall
    ours = server_cpu + client_cpu + store_cpu
    other_cpu = max(0.0, (machine_busy_seconds() - busy0) / wall - ours)
    await asyncio.gather(*(level.agent.settle() for level in levels))
    latencies: list[float] = []
    p99s: list[float] = []
    missed = 0
    for k, level in enumerate(levels):
        updates = sum(len(u) for u in sent[k].values())
        for viewer in level.viewers:
            own = viewer_latencies(viewer, sent[k])
            missed += updates - len(own)
            latencies += own
            p99s.append(quantile(own, 0.99) if len(own) == updates else float("inf"))
    pushes = (sum(v.pushes for v in viewers) - pushes0) / len(viewers) / wall
    return Probe(
        rate,
        achieved,
        latencies,
        max(p99s),
        missed,
        server_cpu,
        client_cpu,
        store_cpu,
        other_cpu,
        pushes,
        sum(v.resyncs for v in viewers) - resyncs0,
    )


# ``bench/live.py --smoke`` (a test that the bench measures, in ``make test``): no waiting for a
# quiet machine and no second try, since the figures are only checked to exist, never timed.
QUIET = True


async def quiet_probe(
    level: Level | list[Level], rate: float, seconds: float, tries: int = 3
) -> Probe:
    """A probe, redone (up to ``tries`` times) while other processes load the machine."""
    tries = tries if QUIET else 1
    for attempt in range(tries):
        if QUIET:
            await quiet_machine()
        result = await probe(level, rate, seconds)
        noisy = result.other_cpu > NOISE and attempt + 1 < tries
        mark = "  (others busy: again)" if noisy else ""
        levels = level if isinstance(level, list) else [level]
        chats = f"{len(levels)} chats × " if len(levels) > 1 else ""
        name, viewers = levels[0].target.name, len(levels[0].viewers)
        say(f"  {name:>24} {chats}{viewers:3d} viewers {result.line()}{mark}")
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


def _used(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds ``pids`` used since ``before`` (one started since: all of its time)."""
    return sum(t - before.get(pid, 0.0) for pid, t in cpu_by_pid(pids).items())


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


async def absorbed(
    level: Level | list[Level], seconds: float, start: float, top: float, steps: int
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
