"""No push is too big, and a page always says whether it is live.

The server here runs with a small ``PUSH_MAX_BYTES``, so ordinary bursts are many times the
bound: they must reach the page in parts (or, for a fragment no push can carry, over HTTP) and
leave it equal to the chat's export, without a reload. A page whose server goes away says it is
reconnecting and stops claiming the runner is connected. Screenshots of each state, at desktop
and phone size, go to var/screenshots/.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import ToolActivity
from activity.show.statuses import Shown, call_status
from tests import frames
from tests.browser.helpers import (
    RECONNECT_TIMEOUT,
    Live,
    Team,
    log_in,
    open_chat,
    reload_marker,
    set_visibility,
    sign_in,
    watch,
)
from tests.browser.runner import Runner
from tests.liveserver import BASE_DIR, Server

pytestmark = [pytest.mark.django_db(transaction=True)]
BOUND = 4_000  # bytes: a burst of forty calls is ten times this
SHOTS = BASE_DIR / "var" / "screenshots"
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.fixture(scope="module", autouse=True)
def module_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The module's server, with pushes bounded to ``BOUND`` bytes."""
    running = Server(tmp_path_factory.mktemp("daphne") / "daphne.log")
    running.env["PUSH_MAX_BYTES"] = str(BOUND)
    try:
        running.spawn()
        yield running
    finally:
        running.stop()


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(SHOTS, f"{name}.png")))


def state(page: Page) -> Any:
    return page.get_by_role("status").filter(has=page.locator(".words"))


def expect_state(page: Page, name: str, words: str, timeout: float = 5_000) -> None:
    expect(page.locator("#connection")).to_have_attribute("data-state", name, timeout=timeout)
    expect(state(page)).to_have_text(words)
    expect(page.locator("#connection .pill")).to_be_visible()


def burst(first: int, count: int, tag: str) -> list[dict[str, Any]]:
    """``count`` calls, each with a label and input that make its row about a kilobyte."""
    return [
        frames.tool_call(
            first + n,
            f"{tag}_{n}",
            f"Read src/{tag}/module_{n:03}.py — and the tests that cover it",
            kind="read",
            status="pending",
            rawInput={"path": f"src/{tag}/module_{n:03}.py"},
        )
        for n in range(count)
    ]


def expect_screen_equals_export(page: Page, chat_id: uuid.UUID) -> None:
    """Every row of the chat's export (the contract's JSON), in order, with its status and
    label, is on the page, and nothing else."""
    answer = page.request.get(f"/api/chats/{chat_id}/tool-activity")
    assert answer.ok, answer.status
    rows = json.loads(answer.text())
    expect(page.locator("tr.tool")).to_have_count(len(rows))
    for row in rows:
        expect(page.locator(f"#tool-{row['id']} td.status .badge")).to_have_text(
            status_of(row).words
        )
    shown = page.locator("tr.tool").evaluate_all(
        """rows => rows.map(r => [r.id, r.querySelector('td.status .badge').classList[1],
                                  r.querySelector('summary').textContent.trim()])"""
    )
    assert shown == [[f"tool-{r['id']}", status_of(r).tone, r["agent_label"]] for r in rows]


def status_of(record: dict[str, Any]) -> Shown:
    """What the page says of an exported row's status (activity/show/statuses.py)."""
    fields = ("status", "approval", "error_code", "read_only", "started_at", "error_message")
    return call_status(ToolActivity(**{name: record[name] for name in fields}))


def big_messages(live: Live) -> list[dict[str, Any]]:
    """What the page's sockets received that came in parts."""
    received = [text for socket in live.sockets for text in socket.received]
    assert all(len(text.encode()) <= BOUND for text in received), "a push over the bound"
    return [push for push in map(json.loads, received) if "parts" in push]


def test_a_burst_far_over_the_push_bound_reaches_a_page_asleep_during_it_in_parts(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(frames.turn_started(1, attempt, reply), *burst(2, 2, "first"))
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    expect_state(page, "live", "Live")
    shot(page, "live-desktop")

    set_visibility(page, hidden=True)  # asleep: hx-ws closes the socket of a hidden tab
    live.disconnected()
    runner.send(
        *burst(4, 40, "asleep"),
        frames.tool_update(44, "first_0", status="completed"),
        frames.tool_update(45, "first_1", status="failed"),
    )
    set_visibility(page, hidden=False)
    live.connected()
    expect_screen_equals_export(page, runner.chat_id)
    expect_state(page, "live", "Live")
    caught_up = big_messages(live)
    assert len(caught_up) >= 10 and caught_up[-1]["part"] == caught_up[-1]["parts"]

    runner.send(*burst(46, 40, "awake"))  # and while it watches
    expect_screen_equals_export(page, runner.chat_id)
    assert len(big_messages(live)) >= 20
    expect_state(page, "live", "Live")
    assert same_document(), "the page was reloaded"
    assert page_errors == []


def test_a_reply_no_push_can_carry_is_fetched_over_http_without_reloading_the_page(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(frames.turn_started(1, attempt, reply), *burst(2, 3, "calls"))
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    details = page.locator("tr.tool details").first
    details.locator("> summary").click()  # what the person opened stays open

    held: list[Any] = []
    page.route(f"**/chats/{runner.chat_id}/", lambda route: held.append(route))
    long_reply = "All three modules read; here is what each does. " * 200  # ~10 kB
    runner.send(frames.say(5, long_reply), frames.tool_update(6, "calls_1", status="completed"))
    expect_state(page, "updating", "Updating… loading a large change")
    shot(page, "updating-desktop")
    desktop = page.viewport_size
    assert desktop is not None
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "updating-phone")
    page.set_viewport_size(desktop)
    assert len(held) == 1  # the page fetches its regions itself
    held[0].continue_()
    page.unroute(f"**/chats/{runner.chat_id}/")

    expect_state(page, "live", "Live")
    expect(page.locator(f"#reply-{reply} .markdown")).to_have_text(long_reply.strip())
    expect_screen_equals_export(page, runner.chat_id)
    expect(details).to_have_attribute("open", "")
    runner.send(frames.tool_update(7, "calls_2", status="completed"))  # live again
    expect_screen_equals_export(page, runner.chat_id)
    assert same_document(), "the whole page was reloaded"
    assert page_errors == []


def test_a_page_whose_server_goes_away_says_it_is_reconnecting_and_not_that_the_runner_is_there(
    page: Page, new_page: Any, live: Live, team: Team, runner: Runner, server: Server
):
    runner.send(frames.turn_started(1, uuid.uuid4(), uuid.uuid4()), *burst(2, 3, "calls"))
    phone = new_page(**PHONE)
    phone_live = watch(phone)
    sign_in(phone, team.viewer)
    open_chat(phone, phone_live, runner.chat_id)
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    for screen in (page, phone):
        expect_state(screen, "live", "Live")
        expect(screen.locator("#chat-head [data-runner]")).to_have_text("runner connected")
    shot(phone, "live-phone")

    server.kill()
    runner.close()
    for screen, name in ((page, "desktop"), (phone, "phone")):
        expect_state(screen, "reconnecting", "Connection lost, reconnecting…")
        expect(screen.locator("#chat-head [data-runner]")).to_be_hidden()
        unknown = screen.get_by_text("runner: unknown while this page is not connected")
        expect(unknown).to_be_visible()
        shot(screen, f"reconnecting-{name}")

    server.start()
    runner.connect()
    for screen in (page, phone):
        expect_state(screen, "live", "Live", timeout=RECONNECT_TIMEOUT * 1_000)
        expect(screen.locator("#chat-head [data-runner]")).to_have_text("runner connected")
        expect(screen.locator("#chat-head [data-runner]")).to_be_visible()
