"""What opening history costs a person: a chat page, a turn page and a filtered page of a long
run, beside the same pages of a short one (issue 27, "history costs nothing").

    .venv/bin/python bench/history.py                 # or: make bench-history
    .venv/bin/python bench/history.py --calls 100,10000 --repeat 3

Builds, on a migrated SQLite file in a temp dir, one finished run per size in ``--calls`` (one
turn, made through the runner's frames: ``tests/long_runs.py``), serves it with Daphne (the
embedded mode, DEBUG off) and opens each page in Chromium (``/usr/bin/chromium``) as a logged-in
member, cold (a new browser context each time). For each page it prints the server's time (the
request to the last byte, outside the browser), the HTML's bytes, the DOM's elements once
loaded, the first contentful paint and the longest task (Chromium's ``longtask`` entries),
medians of ``--repeat`` loads, and each figure of the longest run over the shortest's against
the target (``HISTORY_TIMES``: at most 1.5×); the longest run's failed calls (a filtered page
showing as many calls) against the shortest run's chat page.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: import the repo, not bench/, as the top level
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from bench import data  # noqa: E402
from bench.probe import say  # noqa: E402
from bench.servers import Koruweb  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
HISTORY_TIMES = 1.5  # a page of the longest run costs at most this much its shortest's
# Every long task from the start, whenever the page loads (a PerformanceObserver made later
# sees the buffered ones too).
LONG_TASKS = """
window.__longest = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    window.__longest = Math.max(window.__longest, entry.duration);
}).observe({type: "longtask", buffered: true});
"""
FILTERED = "failed calls"  # the chat page filtered by status
FIGURES = ("server ms", "HTML KB", "DOM elements", "first paint ms", "longest task ms")


@dataclass
class Load:
    server_ms: float
    html_kb: float
    elements: float
    paint_ms: float
    longest_ms: float

    def figures(self) -> tuple[float, ...]:
        return (self.server_ms, self.html_kb, self.elements, self.paint_ms, self.longest_ms)


def build(sizes: list[int]) -> dict[int, tuple[str, str]]:
    """A finished one-turn run of each size: its chat id and its turn's id."""
    from activity.models import Workspace
    from tests.long_runs import long_run

    workspace = Workspace.objects.get(slug="bench")
    runs = {}
    for calls in sizes:
        chat = long_run(workspace, calls, fail_every=40)
        runs[calls] = (str(chat.pk), str(chat.attempts.get().pk))
    return runs


def server_ms(url: str, cookie: str) -> float:
    """The request to the last byte, outside the browser."""
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as answer:
        answer.read()
    return (time.perf_counter() - start) * 1000


def load(browser: object, url: str, cookie: str, base: str) -> Load:
    name, value = cookie.split("=", 1)
    context = browser.new_context()  # type: ignore[attr-defined]
    context.add_cookies([{"name": name, "value": value, "url": base}])
    context.add_init_script(LONG_TASKS)
    page = context.new_page()
    answer = page.goto(url, wait_until="load")
    html = answer.body()
    page.wait_for_timeout(300)  # the long tasks of the load's scripts reach the observer
    elements = page.evaluate("document.getElementsByTagName('*').length")
    paint = page.evaluate(
        "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN"
    )
    longest = page.evaluate("window.__longest")
    context.close()
    return Load(server_ms(url, cookie), len(html) / 1024, elements, paint, longest)


def median(loads: list[Load]) -> Load:
    columns = zip(*(one.figures() for one in loads), strict=True)
    return Load(*(statistics.median(column) for column in columns))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", default="100,10000", help="run sizes, shortest first (100,10000)")
    p.add_argument("--repeat", type=int, default=3, help="loads of each page; medians (3)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (SQLite, logs)")
    args = p.parse_args(argv)
    sizes = [int(n) for n in args.calls.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="koruweb-history-"))
    server = None
    try:
        fixtures = data.prepare(tmp, team=False)["default"]
        say(f"building runs of {args.calls} calls")
        runs = build(sizes)
        server = Koruweb(tmp / "koruweb.log", fixtures.env, "koruweb", "koruweb.asgi:application")
        server.start()
        from playwright.sync_api import sync_playwright

        pages = {
            "chat page": "/chats/{chat}/",
            "turn page": "/chats/{chat}/turns/{turn}/",
            FILTERED: "/chats/{chat}/?status=failed",
        }
        results: dict[tuple[str, int], Load] = {}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            for label, path in pages.items():
                for calls, (chat, turn) in runs.items():
                    url = server.url + path.format(chat=chat, turn=turn)
                    loads = [
                        load(browser, url, fixtures.cookie, server.url) for _ in range(args.repeat)
                    ]
                    results[(label, calls)] = median(loads)
                    shown = results[(label, calls)].figures()
                    figures = "  ".join(
                        f"{name} {value:,.1f}" for name, value in zip(FIGURES, shown, strict=True)
                    )
                    say(f"  {label:>12}, {calls:>6,} calls: {figures}")
            browser.close()
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    say("")
    say(report(results, sizes))
    return 0


def report(results: dict[tuple[str, int], Load], sizes: list[int]) -> str:
    short, long = sizes[0], sizes[-1]
    lines = [
        f"| page | figure | {short:,} calls | {long:,} calls | ratio | ≤ {HISTORY_TIMES:g}× |",
        "|---|---|---:|---:|---:|---|",
    ]
    for label in dict.fromkeys(label for label, _ in results):
        # A filtered page of the long run shows as many calls as the short run's chat page:
        # it should cost what that page does (the short run has too few failures to compare).
        against = "chat page" if label == FILTERED else label
        a, b = results[(against, short)].figures(), results[(label, long)].figures()
        said = label if against == label else f"{label} (against the chat page)"
        for name, x, y in zip(FIGURES, a, b, strict=True):
            times = y / x if x else (1.0 if y == x else float("inf"))
            met = "met" if times <= HISTORY_TIMES else "not met"
            lines.append(f"| {said} | {name} | {x:,.1f} | {y:,.1f} | {times:.2f}× | {met} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
