"""The figures of a run, as the table ``bench/README.md`` shows them."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bench.probe import Probe

KORUWEB = "koruweb"
BARE = "bare websockets"
ONE_PUSH = "koruweb, one push per change"  # bench/onepush.py
TEAM = "koruweb, team mode"  # two processes, PostgreSQL + Redis
FLOOR = "channels floor"  # bench/floor.py: Daphne + Channels relaying, nothing of koruweb
BASELINES = (BARE, FLOOR)


@dataclass
class CatchUp:
    """A viewer back after ``away`` seconds at ``rate`` updates/s: what it was sent."""

    away: float
    rate: float
    rows_changed: int  # calls that changed while it was away
    bytes: int  # the pushes it received until it showed the chat's version
    whole: int  # what a fresh page (from version 0) received for the same chat
    reloads: int  # it was told to fetch its page (it missed more calls than a page shows)

    def line(self) -> str:
        how = "fetching its page" if self.reloads else "in pushes"
        return (
            f"back after {self.away:g} s at {self.rate:g}/s, {self.rows_changed:,} rows "
            f"changed: {kib(self.bytes)} ({how}); a new page of the chat: {kib(self.whole)}"
        )


@dataclass
class Report:
    absorbed: dict[tuple[str, int], Probe | None] = field(default_factory=dict)
    steady: dict[tuple[str, int], list[Probe]] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    many: dict[str, list[Probe]] = field(default_factory=dict)  # many chats at once
    many_absorbed: dict[str, Probe | None] = field(default_factory=dict)
    catch_up: dict[str, CatchUp] = field(default_factory=dict)  # a viewer back after a while
    screens: dict[tuple[str, int], list[str]] = field(default_factory=dict)


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
        modes = [m for m in (KORUWEB, TEAM) if any(name == m for name, _ in report.absorbed)]
        lines += [
            "| viewers | "
            + " | ".join(f"{m} updates/s" for m in modes)
            + f" | {BARE} updates/s | "
            + " | ".join(f"{m} / bare" for m in modes)
            + " |",
            "|---:|" + "---:|" * (2 * len(modes) + 1),
        ]
        for n in args.viewers:
            bare = report.absorbed.get((BARE, n))
            mine = [report.absorbed.get((m, n)) for m in modes]
            lines.append(row(str(n), mine, bare))
        n = max(args.viewers)
        if (ONE_PUSH, n) in report.absorbed:
            one = [report.absorbed[(ONE_PUSH, n)]] + [None] * (len(modes) - 1)
            lines.append(row(f"{n} ({ONE_PUSH})", one, report.absorbed.get((BARE, n))))
        lines.append("")
    if report.steady:
        lines += [
            f"| {args.steady_viewers} viewers, median of {args.repeat} | "
            + " | ".join(f"{name} p50 / p99 (worst viewer p99)" for name in names(report))
            + " |",
            "|---|" + "---:|" * len(names(report)),
        ]
        for rate in (50, 200):
            cells = []
            for name in names(report):
                cells.append(latencies(report.steady.get((name, rate), [])))
            lines.append(f"| {rate} updates/s | " + " | ".join(cells) + " |")
        lines.append("")
    if report.many:
        lines += [
            f"| {args.chats} chats × {args.chat_viewers} viewers, {args.chat_rate:g} updates/s "
            f"each, median of {args.repeat} | p50 / p99 (worst viewer p99) | server CPU |"
            + (" absorbed updates/s in all |" if report.many_absorbed else ""),
            "|---|---:|---:|" + ("---:|" if report.many_absorbed else ""),
        ]
        for name, probes in report.many.items():
            cpu = statistics.median(p.server_cpu + p.store_cpu for p in probes)
            cells = [latencies(probes), f"{cpu:.0%}"]
            if report.many_absorbed:
                cells.append(rate_of(report.many_absorbed.get(name)))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    for name, back in report.catch_up.items():
        lines.append(f"catch-up, {name}: {back.line()}")
    if report.memory:
        lines.append(
            f"memory per idle viewer ({args.idle} viewers): "
            + ", ".join(f"{name} {kib(value)}" for name, value in report.memory.items())
        )
    lines += ["", *targets(args, report), ""]
    for (name, n), problems in sorted(report.screens.items()):
        verdict = "equal" if not problems else "DIFFERENT: " + "; ".join(problems[:5])
        lines.append(f"screens vs source, {name}, {n} viewers: {verdict}")
    return "\n".join(lines)


def row(label: str, mine: list[Probe | None], bare: Probe | None) -> str:
    """A viewer count's rates (each mode's, the baseline's) and each mode's ratio to it."""
    rates = [rate_of(p) for p in mine] + [rate_of(bare)]
    ratios = [f"{ratio(p, bare)} of the baseline" for p in mine]
    return f"| {label} | " + " | ".join(rates + ratios) + " |"


def latencies(probes: list[Probe]) -> str:
    if not probes:
        return "—"
    p50 = statistics.median(p.pct(0.5) for p in probes) * 1000
    p99 = statistics.median(p.pct(0.99) for p in probes) * 1000
    worst = statistics.median(p.worst_p99 for p in probes) * 1000
    bound = [p for p in probes if p.load_bound]
    mark = f" invalid: the load used a core in {len(bound)} of {len(probes)}" if bound else ""
    return f"{p50:.1f} / {p99:.1f} ms ({worst:.1f}){mark}"


def names(report: Report) -> list[str]:
    return list(dict.fromkeys(name for name, _ in report.steady))


def rate_of(p: Probe | None) -> str:
    if p is None:
        return "—"
    return f"{p.achieved:,.0f}" + (" (invalid: the load used a core)" if p.load_bound else "")


def ratio(mine: Probe | None, bare: Probe | None) -> str:
    if mine is None or bare is None:
        return "—"
    return f"{mine.achieved / bare.achieved:.0%}"


def kib(value: float | None) -> str:
    return "—" if value is None else f"{value / 1024:.1f} KiB"


# The targets (issue 27), each a ratio to a baseline measured in the same run.
P99_TIMES_BARE = 5.0  # a viewer's p99 at 50 and 200 updates/s
CPU_TIMES_BARE = 3.0  # server CPU per update at 200 updates/s
MEMORY_TIMES_BARE = 1.5  # memory per idle viewer ...
MEMORY_TIMES_FLOOR = 1.2  # ... or, where the stack's own floor is higher, this over the floor


def targets(args: argparse.Namespace, report: Report) -> list[str]:
    """Each target koruweb (and team mode) is held to, its figure, the baseline's and whether
    it is met; a target whose figures this run did not measure is left out."""
    lines = ["| target | measured | baseline | ratio | |", "|---|---:|---:|---:|---|"]
    for mode in (KORUWEB, TEAM):
        for rate in (50, 200):
            mine, bare = report.steady.get((mode, rate)), report.steady.get((BARE, rate))
            if mine and bare:
                a, b = p99(mine), p99(bare)
                lines.append(
                    verdict(
                        f"{mode}: p99 at {rate} updates/s, {args.steady_viewers} viewers ≤ "
                        f"{P99_TIMES_BARE:g}× bare",
                        f"{a * 1000:.1f} ms",
                        f"{b * 1000:.1f} ms",
                        a / b,
                        P99_TIMES_BARE,
                        mine + bare,
                    )
                )
        mine, bare = report.steady.get((mode, 200)), report.steady.get((BARE, 200))
        if mine and bare:
            a, b = cpu_per_update(mine), cpu_per_update(bare)
            floor = report.steady.get((FLOOR, 200))
            said = f" (floor {cpu_per_update(floor) * 1e6:.0f} µs)" if floor else ""
            lines.append(
                verdict(
                    f"{mode}: server CPU per update at 200 updates/s ≤ {CPU_TIMES_BARE:g}× bare",
                    f"{a * 1e6:.0f} µs",
                    f"{b * 1e6:.0f} µs{said}",
                    a / b,
                    CPU_TIMES_BARE,
                    mine + bare,
                )
            )
        mine, bare = report.many.get(mode), report.many.get(BARE)
        if mine and bare:
            a, b = p99(mine), p99(bare)
            lines.append(
                verdict(
                    f"{mode}: many chats, every viewer's p99 ≤ {P99_TIMES_BARE:g}× bare",
                    f"{a * 1000:.1f} ms",
                    f"{b * 1000:.1f} ms",
                    a / b,
                    P99_TIMES_BARE,
                    mine + bare,
                )
            )
        mine_rate, bare_rate = report.many_absorbed.get(mode), report.many_absorbed.get(BARE)
        if mine_rate and bare_rate:
            lines.append(
                f"| {mode}: many chats, absorbed updates/s in all (reported, no target) | "
                f"{rate_of(mine_rate)} | {rate_of(bare_rate)} | {ratio(mine_rate, bare_rate)} | |"
            )
        memory, bare_memory = report.memory.get(mode), report.memory.get(BARE)
        floor_memory = report.memory.get(FLOOR)
        if memory is not None and bare_memory:
            times = memory / bare_memory
            met = times <= MEMORY_TIMES_BARE
            target = f"≤ {MEMORY_TIMES_BARE:g}× bare"
            if floor_memory:
                target += f" or ≤ {MEMORY_TIMES_FLOOR:g}× the floor ({kib(floor_memory)})"
                met = met or memory / floor_memory <= MEMORY_TIMES_FLOOR
            lines.append(
                f"| {mode}: memory per idle viewer {target} | {kib(memory)} | "
                f"{kib(bare_memory)} | {times:.2f}× | {'met' if met else 'not met'} |"
            )
    return lines if len(lines) > 2 else []


def verdict(
    target: str, mine: str, base: str, times: float, most: float, probes: list[Probe]
) -> str:
    met = "met" if times <= most else "not met"
    if any(p.load_bound for p in probes):
        met += " (invalid: the load used a core)"
    return f"| {target} | {mine} | {base} | {times:.1f}× | {met} |"


def p99(probes: list[Probe]) -> float:
    return statistics.median(p.pct(0.99) for p in probes)


def cpu_per_update(probes: list[Probe]) -> float:
    """Server CPU seconds per update sent (team mode: both processes, with PostgreSQL and Redis)."""
    return statistics.median((p.server_cpu + p.store_cpu) / p.achieved for p in probes)
