"""Long runs and their figures in a real browser, at a desk and on a phone: a filter kept in
the URL, jumps that move the focus, a 10,000-call timeline with a labelled axis and zoom, times
in the viewer's own zone with the moment in a tooltip, and usage as a person reads it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.browser.helpers import DESKTOP, PHONE, SCREENSHOTS, Team, screenshot, sign_in
from tests.long_runs import long_run

pytestmark = [pytest.mark.django_db(transaction=True)]

SIZES = (("desktop", DESKTOP), ("phone", PHONE))
ZONE = {"timezone_id": "Pacific/Auckland", "locale": "en-NZ"}  # UTC+13 on the runs' date


def focused_row(page: Page) -> str:
    found: str = page.evaluate(
        "() => (document.activeElement.closest('tr.tool') || document.activeElement).className"
    )
    return found


def fits(page: Page, *selectors: str) -> None:
    """Neither the filter bar nor the timeline makes the page scroll sideways."""
    for selector in selectors:
        right = page.evaluate(
            "(s) => document.querySelector(s).getBoundingClientRect().right - window.innerWidth",
            selector,
        )
        assert right <= 0, f"{selector} sticks out {right}px"


def test_a_filtered_run_stays_filtered_and_the_jumps_move_the_focus(
    new_page: Callable[..., Page], team: Team
) -> None:
    chat = long_run(team.workspace, 400, waiting=True, cost=1.234)
    for size, options in SIZES:
        page = new_page(**options, **ZONE)
        sign_in(page, team.viewer)
        page.goto(f"/chats/{chat.pk}/")
        head = page.locator("#chat-head")
        expect(head).to_contain_text("12.3k / 200k tokens · 6% · $1.23")
        expect(head).to_contain_text("demo-agent v1.0")

        page.get_by_label("Status").select_option("failed")
        expect(page).to_have_url(re.compile(r"\?status=failed$"))
        expect(page.locator("tr.tool")).to_have_count(8)
        expect(page.locator(".filter-said")).to_have_text(re.compile("8 of 401 calls match"))
        page.reload()  # the filter is the URL's
        expect(page.locator("tr.tool")).to_have_count(8)
        expect(page.get_by_label("Status")).to_have_value("failed")
        page.get_by_label("Find", exact=True).fill("file_99")
        page.get_by_label("Find", exact=True).press("Enter")
        expect(page).to_have_url(re.compile(r"\?q=file_99&status=failed$"))
        expect(page.locator("tr.tool")).to_have_count(1)
        page.goto(f"/chats/{chat.pk}/?kind=edit&status=failed")
        if size == "desktop":
            screenshot(page, f"long-chat-filtered-{size}")

        page.goto(f"/chats/{chat.pk}/")
        page.keyboard.press("f")
        assert "status-failed" in focused_row(page)
        first = page.evaluate("() => document.activeElement.closest('tr.tool').id")
        page.keyboard.press("f")
        second = page.evaluate("() => document.activeElement.closest('tr.tool').id")
        assert second != first and "status-failed" in focused_row(page)
        page.get_by_role("link", name=re.compile("Jump to the waiting prompt")).click()
        expect(page.locator(".prompt-box.awaiting")).to_be_focused()

        # Times: "… ago", the moment in the viewer's zone in the tooltip.
        started = page.locator(".turn-figures time").first
        expect(started).to_have_attribute("data-local", "true")
        expect(started).to_have_attribute("title", re.compile(r"GMT\+13|NZDT"))
        expect(started).not_to_contain_text("UTC")
        fits(page, "#run-filter", ".tools")
        if size == "phone":
            page.goto(f"/chats/{chat.pk}/?status=failed")
            screenshot(page, f"long-chat-filtered-{size}")
            fits(page, "#run-filter", ".tools")


def plot_marks(page: Page) -> Any:
    return page.locator(".tl-plot rect.run")


PAINTED = """(name) => {
  const lane = [...document.querySelectorAll("#timeline .tl-row")]
    .find((row) => row.querySelector(".tl-name").firstChild?.textContent.trim() === name);
  const red = getComputedStyle(document.querySelector(".legend .key.run.failed")).backgroundColor;
  const painted = { all: 0, red: 0, slots: 0, redSlots: 0, withFailures: 0 };
  for (const link of lane.querySelectorAll(".tl-plot a")) {
    const [whole, part] = link.querySelectorAll("rect.run");
    painted.slots += 1;
    if (getComputedStyle(whole).fill === red) painted.redSlots += 1;
    if (part) painted.withFailures += 1;
    for (const rect of [whole, part].filter(Boolean)) {
      const area = rect.width.baseVal.value * rect.height.baseVal.value;
      painted.all += area;
      if (getComputedStyle(rect).fill === red) painted.red += area;
    }
  }
  return painted;
}"""


def a_tenth_failed_is_drawn_as_a_tenth(page: Page) -> None:
    """The search lane, a tenth of whose calls failed, is mostly the colour of calls that ran:
    a thin red part in the slots with a failure, no slot all red; its name, the slots' names
    and the legend say the shares in words. Shown in both schemes."""
    figure = page.locator("#timeline")
    search = page.evaluate(PAINTED, "search")
    assert search["redSlots"] == 0 and search["withFailures"] >= search["slots"] // 2
    assert 0.05 < search["red"] / search["all"] < 0.25, search
    read = page.evaluate(PAINTED, "read")
    assert read["red"] == 0 and read["withFailures"] == 0
    lane = figure.get_by_role("group", name=re.compile(r"^search: 2,500 calls, 250 failed \(10%\)"))
    expect(lane).to_be_visible()
    expect(figure.locator(".tl-name", has_text="search")).to_contain_text("10% failed")
    slot = lane.get_by_role("link", name=re.compile(r"^\d of \d\d calls failed, from ")).first
    expect(slot).to_be_attached()
    expect(figure.locator(".legend")).to_contain_text(
        "red at the bottom of a slot: the share of its calls that failed (all red: all failed)"
    )
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        figure.screenshot(path=SCREENSHOTS / f"timeline-proportions-{scheme}.png")
        assert Axe().run(page, context="#timeline").response["violations"] == []
    page.emulate_media(color_scheme="light")


def test_a_ten_thousand_call_timeline_has_a_labelled_axis_visible_marks_and_zoom(
    new_page: Callable[..., Page], team: Team
) -> None:
    chat = long_run(team.workspace, 10_000, cost=0.42, fail_every=40)  # a tenth of the searches
    url = f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/"
    for size, options in SIZES:
        page = new_page(**options, **ZONE)
        sign_in(page, team.viewer)
        page.goto(url)
        figure = page.locator("#timeline")
        ticks = figure.locator(".tl-axis .tick")
        expect(ticks).to_have_count(7)
        expect(ticks.nth(2)).to_have_text("1 h")
        expect(ticks.nth(2).locator("span")).to_be_visible()
        assert plot_marks(page).count() > 100
        box = plot_marks(page).first.bounding_box()
        assert box is not None and box["width"] >= 1 and box["height"] >= 4
        expect(figure.locator(".tl-row:not(.tl-axis-row) .tl-name").first).to_contain_text(
            "waiting for a person"
        )
        expect(page.locator(".turn-figures")).to_contain_text("waited 20.0 s for a person")
        expect(page.locator(".turn-figures")).to_contain_text("$0.42")
        screenshot(page, f"long-turn-timeline-{size}")
        fits(page, "#run-filter", "#timeline")
        if size == "desktop":
            a_tenth_failed_is_drawn_as_a_tenth(page)

        figure.get_by_role("link", name="First 1 min").click()
        expect(page).to_have_url(re.compile(r"from=0&to=60000"))
        expect(ticks.first).to_have_text("0")
        expect(ticks.nth(1)).to_have_text("10 s")
        marks = plot_marks(page)
        assert 55 <= marks.count() <= 70  # one mark a call now
        if size == "desktop":  # dragging across a lane zooms further in
            page.wait_for_load_state("load")  # timeline.js (deferred) listens from here
            lane = figure.locator(".tl-plot").nth(1).bounding_box()
            assert lane is not None
            y = lane["y"] + lane["height"] / 2
            page.mouse.move(lane["x"] + lane["width"] * 0.5, y)
            page.mouse.down()
            page.mouse.move(lane["x"] + lane["width"] * 0.75, y, steps=5)
            page.mouse.up()
            expect(page).to_have_url(re.compile(r"from=3\d{4}&to=4\d{4}"))
            expect(figure.get_by_role("link", name="Zoom out")).to_be_visible()
            screenshot(page, f"long-turn-zoomed-{size}")
