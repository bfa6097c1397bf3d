"""Who is watching a run, in a real browser: a person on the run's page sees another appear
when they open it and go when they close their last tab, live, while the page stays on the
database's version chain; the runs list counts the people.

The tests wait for states, never for times. Screenshots at a desktop's size and a phone's go to
``var/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from activity.models import Role
from tests import frames
from tests.browser.helpers import (
    Live,
    Team,
    expect_screen_equals_database,
    member,
    open_chat,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}


def screenshot(page: Page, name: str) -> Path:
    """What the person sees now, kept as var/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
    page.screenshot(path=path, full_page=True)
    return path


def watchers(page: Page) -> Any:
    return page.locator("#watching .watcher-name")


def on_the_run(new_page: Callable[..., Page], team: Team, runner: Runner, name: str,
               **options: Any) -> Page:  # fmt: skip
    """Another person of the team, in a browser of their own, on the run's page, live."""
    person = member(team.workspace, name, Role.VIEWER)
    page = new_page(**options)
    live = watch(page)
    sign_in(page, person)
    open_chat(page, live, runner.chat_id)
    return page


def test_a_person_watching_sees_another_appear_when_they_open_the_run_and_go_when_they_close_it(
    page: Page, page_errors: list[str], live: Live, new_page: Callable[..., Page], team: Team,
    runner: Runner,
):  # fmt: skip
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)
    expect(watchers(page)).to_have_text(["alice"])
    # The list is no live region: nothing is read out as the page loads; who comes and goes is.
    expect(page.locator("#watching")).not_to_have_attribute("aria-live", re.compile(".*"))
    expect(page.locator("#watching-said")).to_have_text("")

    bobs = on_the_run(new_page, team, runner, "bob")
    expect(watchers(page)).to_have_text(["alice", "bob"])
    expect(page.locator("#watching-said")).to_have_text("bob started watching.")
    expect(bobs.locator("#watching-said")).to_have_text("")  # bob's own arrival is no news to him
    expect(watchers(bobs)).to_have_text(["alice", "bob"])
    # The list comes beside the version chain: the page still follows the run, live.
    attempt = uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, uuid.uuid4(), prompt="Make the build green"),
        frames.tool_call(2, "call_1", "Run the tests", kind="execute", status="pending"),
    )
    expect_screen_equals_database(page, runner.chat_id)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    second_tab = bobs.context.new_page()  # one person, however many tabs
    second_live = watch(second_tab)
    open_chat(second_tab, second_live, runner.chat_id)
    expect(watchers(second_tab)).to_have_text(["alice", "bob"])
    runs = page.context.new_page()  # alice's runs list counts alice and bob
    runs.goto("/")
    expect(runs.locator(f"#chat-{runner.chat_id} .watching-count")).to_have_text("2 watching")
    screenshot(page, "watching-desktop")
    screenshot(runs, "watching-desktop-runs")
    runs.close()

    second_tab.close()
    bobs.close()  # bob's last tab: he goes from every list
    expect(watchers(page)).to_have_text(["alice"])
    expect(page.locator("#watching-said")).to_have_text("bob stopped watching.")
    expect_screen_equals_database(page, runner.chat_id)
    assert page_errors == []


def test_on_a_phone_the_list_fits_the_screen(
    page: Page, live: Live, new_page: Callable[..., Page], team: Team, runner: Runner
):
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)
    phone = on_the_run(new_page, team, runner, "dominique-from-the-night-shift", **PHONE)
    errors: list[str] = []
    phone.on("pageerror", lambda error: errors.append(str(error)))
    expect(watchers(phone)).to_have_text(["alice", "dominique-from-the-night-shift"])
    expect(watchers(page)).to_have_text(["alice", "dominique-from-the-night-shift"])
    sideways = phone.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert sideways == 0
    screenshot(phone, "watching-phone")
    phone.close()
    expect(watchers(page)).to_have_text(["alice"])
    assert errors == []
