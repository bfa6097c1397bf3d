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


@dataclass
class Report:
    absorbed: dict[tuple[str, int], Probe | None] = field(default_factory=dict)
    steady: dict[tuple[str, int], list[Probe]] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
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
        lines += [
            "| viewers | koruweb updates/s | bare websockets updates/s | koruweb / bare |",
            "|---:|---:|---:|---:|",
        ]
        for n in args.viewers:
            mine = report.absorbed.get((KORUWEB, n))
            bare = report.absorbed.get((BARE, n))
            lines.append(
                f"| {n} | {rate_of(mine)} | {rate_of(bare)} | {ratio(mine, bare)} of the baseline |"
            )
        one = report.absorbed.get((ONE_PUSH, max(args.viewers)))
        if one is not None or (ONE_PUSH, max(args.viewers)) in report.absorbed:
            bare = report.absorbed.get((BARE, max(args.viewers)))
            lines.append(
                f"| {max(args.viewers)} ({ONE_PUSH}) | {rate_of(one)} | "
                f"{rate_of(bare)} | {ratio(one, bare)} of the baseline |"
            )
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
    if report.memory:
        lines.append(
            f"memory per idle viewer ({args.idle} viewers): koruweb "
            f"{kib(report.memory.get(KORUWEB))}, "
            f"bare websockets {kib(report.memory.get(BARE))}"
        )
    for (name, n), problems in sorted(report.screens.items()):
        verdict = "equal" if not problems else "DIFFERENT: " + "; ".join(problems[:5])
        lines.append(f"screens vs source, {name}, {n} viewers: {verdict}")
    return "\n".join(lines)


def latencies(probes: list[Probe]) -> str:
    if not probes:
        return "—"
    p50 = statistics.median(p.pct(0.5) for p in probes) * 1000
    p99 = statistics.median(p.pct(0.99) for p in probes) * 1000
    worst = statistics.median(p.worst_p99 for p in probes) * 1000
    return f"{p50:.1f} / {p99:.1f} ms ({worst:.1f})"


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
