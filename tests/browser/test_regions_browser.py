"""Every region of a live chat page follows the run, not only its rows: the filter bar's counts,
chips and jumps change as calls arrive and prompts come and go, and at the end each region is
what a fresh load draws (activity/show/dom.py, REGIONS). A page that has heard nothing for a while
asks for its version and catches up (README "Live updates")."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from activity.models import Chat
from activity.show import dom
from tests import frames
from tests.browser.helpers import (
    DESKTOP,
    Team,
    expect_screen_equals_database,
    open_chat,
    row_of,
    screenshot,
    sign_in,
    watch,
)
from tests.browser.runner import Runner
from tests.liveserver import Server

pytestmark = [pytest.mark.django_db(transaction=True)]

QUIET_MS = 300  # a page quiet this long asks for its version (PAGE_QUIET_MS)


@pytest.fixture(scope="module")
def module_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The module's server: pages ask for their version after ``QUIET_MS`` without a push, and
    the rooms' heartbeat, which would tell them too, is an hour away."""
    running = Server(tmp_path_factory.mktemp("daphne") / "daphne.log")
    running.env["PAGE_QUIET_MS"] = str(QUIET_MS)
    running.env["WATCHING_HEARTBEAT_SECONDS"] = "3600"
    try:
        running.spawn()
        yield running
    finally:
        running.stop()


# Each region as a person sees it, without what differs between two loads of the same version:
# relative times, and what only a page has (a form's CSRF token) or only a push (the link to a
# form's own page); htmx's marks, empty style attributes and the whitespace between elements.
REGIONS_DRAWN = """(ids) => ids.map((id) => {
  const region = document.getElementById(id).cloneNode(true);
  for (const el of [region, ...region.querySelectorAll("*")]) {
    el.removeAttribute("hx-swap-oob");
    el.removeAttribute("data-htmx-powered");
    if (el.getAttribute("style") === "") el.removeAttribute("style"); // left by a script: no look
  }
  const own = region.querySelectorAll('input[name="csrfmiddlewaretoken"], a.own-page');
  own.forEach((el) => el.remove());
  for (const time of region.querySelectorAll("time")) {
    time.textContent = time.getAttribute("datetime");
    time.removeAttribute("title");
    time.removeAttribute("data-local");
  }
  return [id, region.outerHTML.replace(/>\\s+</g, "><")];
})"""


def regions(page: Page) -> dict[str, str]:
    return dict(page.evaluate(REGIONS_DRAWN, list(dom.REGIONS)))


def at_database_version(page: Page, chat_id: uuid.UUID) -> None:
    version = Chat.objects.get(pk=chat_id).version
    expect(page.locator("#live")).to_have_attribute("data-version", str(version))


def test_a_live_page_keeps_its_filter_bar_and_every_region_as_a_fresh_load_draws_them(
    new_page: Callable[..., Page], team: Team, runner: Runner
) -> None:
    attempt = uuid.uuid4()
    page = new_page(**DESKTOP)
    live = watch(page)
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)
    bar = page.locator("#run-filter")
    chips = bar.locator("a.facet")
    waiting_link = page.get_by_role("link", name=re.compile("Jump to the waiting prompt"))
    expect(bar).to_be_hidden()  # a new run: no empty strip
    screenshot(page, "regions-new-run-desktop")

    runner.send(
        frames.turn_started(1, attempt, uuid.uuid4(), prompt="Make the build green"),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="in_progress"),
    )
    expect(chips).to_have_text(["running 1", "read 1"])
    runner.send(
        frames.tool_call(3, "call_2", "Run pytest", kind="execute", status="in_progress"),
        frames.tool_update(4, "call_2", status="failed"),
    )
    expect(chips).to_have_text(["failed 1", "running 1", "execute 1", "read 1"])
    failure = page.get_by_role("link", name=re.compile("Jump to the next failure"))
    expect(failure).to_have_attribute("href", f"#tool-{row_of(runner, 'call_2').id}")

    runner.send(
        frames.tool_update(5, "call_1", status="completed"),
        frames.tool_call(6, "asking", "Run rm -rf build", kind="execute"),
        frames.permission(7, 1, "asking", "Run rm -rf build"),
    )
    expect(chips.filter(has_text="waiting for a person")).to_have_text("waiting for a person 1")
    expect(waiting_link).to_be_visible()
    screenshot(page, "regions-waiting-desktop")

    runner.send(frames.outcome(8, 1, "allow-once"))  # answered in the runner's terminal
    expect(chips.filter(has_text="waiting for a person")).to_have_count(0)
    expect(waiting_link).to_have_count(0)
    runner.send(frames.tool_update(9, "asking", status="completed"), frames.turn_ended(10, attempt))
    expect(chips).to_have_text(["failed 1", "completed 2", "execute 2", "read 1"])
    at_database_version(page, runner.chat_id)
    screenshot(page, "regions-ended-desktop")

    fresh = new_page(**DESKTOP)
    sign_in(fresh, team.viewer)
    fresh.goto(f"/chats/{runner.chat_id}/")
    at_database_version(fresh, runner.chat_id)
    fresh.wait_for_load_state("load")  # times.js has said every time its way
    drawn, loaded = regions(page), regions(fresh)
    for region in dom.REGIONS:
        assert drawn[region] == loaded[region], f"#{region} is not what a fresh load draws"


def test_a_quiet_page_that_lost_a_push_asks_for_its_version_and_catches_up(
    new_page: Callable[..., Page], team: Team, runner: Runner
) -> None:
    runner.send(frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    page = new_page(**DESKTOP)
    live = watch(page)
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)
    # A push lost on the way (docs/gotchas.md#channel-layers-drop-messages-silently): the
    # page drops the next one that changes something. No push follows it, and no heartbeat
    # tells the page the version (module_server).
    page.evaluate(
        """() => {
          const live = document.getElementById("live");
          const drop = (event) => {
            if (!JSON.parse(event.detail.message.data).content) return;
            event.detail.cancelled = true;
            event.preventDefault();
            live.removeEventListener("htmx:ws:before:message:incoming", drop);
            document.body.dataset.dropped = live.dataset.version;
          };
          live.addEventListener("htmx:ws:before:message:incoming", drop);
        }"""
    )
    runner.send(frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"))
    expect(page.locator("body")).to_have_attribute("data-dropped", re.compile(r"^\d+$"))

    # Only the page's own question, {"since": V}, can bring what it missed now.
    expect_screen_equals_database(page, runner.chat_id)
    expect(page.locator("#run-filter a.facet").last).to_have_text("read 1")


def test_a_filtered_page_stays_filtered_and_true_to_its_filter_as_the_run_goes_on(
    new_page: Callable[..., Page], team: Team, runner: Runner
) -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, first, uuid.uuid4()),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="in_progress"),
        frames.tool_call(3, "call_2", "Run pytest", kind="execute", status="in_progress"),
        frames.tool_update(4, "call_2", status="failed"),
    )
    url = f"/chats/{runner.chat_id}/?status=failed"
    page = new_page(**DESKTOP)
    live = watch(page)
    sign_in(page, team.viewer)
    page.goto(url)
    live.until("the page asked", lambda: bool(live.sockets and live.sockets[-1].sent))
    live.connected()
    said = page.locator(".filter-said")
    expect(said).to_contain_text("1 of 2 calls match")

    # Pushes are drawn once for everyone, unfiltered: this page fetches its own regions.
    runner.send(
        frames.tool_call(5, "call_3", "Run the linter", kind="execute", status="in_progress"),
        frames.tool_update(6, "call_3", status="failed"),
        frames.tool_update(7, "call_1", status="completed"),
    )
    expect(said).to_contain_text("2 of 3 calls match")
    expect(page.locator("tr.tool")).to_have_count(2)
    runner.send(frames.turn_ended(8, first))
    runner.send(frames.turn_started(9, second, uuid.uuid4(), prompt="Now the docs"))
    expect(page.locator(f"#turn-{second} .no-match")).to_have_text(
        "No call in this turn matches the filter."
    )
    expect(page.get_by_label("Status")).to_have_value("failed")
    assert page.url.endswith("?status=failed")
    at_database_version(page, runner.chat_id)
    screenshot(page, "regions-filtered-desktop")

    fresh = new_page(**DESKTOP)
    sign_in(fresh, team.viewer)
    fresh.goto(url)
    at_database_version(fresh, runner.chat_id)
    fresh.wait_for_load_state("load")
    drawn, loaded = regions(page), regions(fresh)
    for region in dom.REGIONS:
        assert drawn[region] == loaded[region], f"#{region} is not what a fresh load draws"
