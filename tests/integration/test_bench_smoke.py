"""The bench cannot break silently (bench/README.md): a few seconds of ``bench/live.py --smoke``
against koruweb and the bare websockets baseline, 3 viewers at 50 and 200 updates/s. It fails
if any update never reaches a viewer's screen or any latency cannot be computed (a viewer that
no longer recognises the page's rows counts every update as missed), or the idle viewers
cannot all connect (a limit the bench's servers do not lift). It times nothing."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings


def test_the_bench_sees_every_update_reach_every_viewer_on_koruweb_and_on_the_baseline():
    done = subprocess.run(
        [sys.executable, "bench/live.py", "--smoke"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert said.rstrip().endswith("measured") or "\nmeasured\n" in said, said
    assert "inf ms" not in said and "missed 0" in said, said
    for target in ("koruweb", "bare websockets", "channels floor"):
        assert f"{target} screens equal the source: yes" in said, said
    # 60 idle viewers of one member, past the default sockets per person: every server took them
    assert "memory per idle viewer (60 viewers): koruweb " in said, said


def test_a_figure_the_load_itself_bounded_is_marked_invalid():
    from bench.probe import Probe
    from bench.report import latencies, rate_of

    def probe(load: float) -> Probe:
        return Probe(200, 200, [0.004, 0.005], 0.005, 0, 0.3, load, 0.0, 0.0, 200, 0)

    bound, fine = probe(0.97), probe(0.2)
    assert bound.load_bound and "INVALID: the load used a whole core" in bound.line()
    assert not fine.load_bound and "INVALID" not in fine.line()
    assert latencies([bound, fine]).endswith("invalid: the load used a core in 1 of 2")
    assert "invalid" not in latencies([fine]) and rate_of(bound).endswith(
        "(invalid: the load used a core)"
    )
