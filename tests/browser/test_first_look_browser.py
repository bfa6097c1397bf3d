"""What a person sees first: the login page says what koruweb is, and the runs list's column
headers read as words at a desk (1440×900) and fit a phone (390×844), in both colour schemes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.browser.helpers import PHONE, Team, screenshot, sign_in
from tests.long_runs import long_run

pytestmark = [pytest.mark.django_db(transaction=True)]

WIDE: dict[str, object] = {"viewport": {"width": 1440, "height": 900}}
ABOUT = "koruweb lets your team watch coding-agent runs live"

# Each header cell's text as the lines it is laid out in: one rect a line.
HEADER_LINES = """() => [...document.querySelectorAll("table.runs thead th")].map((th) => {
  const range = document.createRange();
  range.selectNodeContents(th);
  const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
  return [th.textContent.trim(), tops.size];
})"""
HEADERS = ("Agent", "Title", "Status", "Live", "Started", "Duration", "Calls")
SIDEWAYS = "() => document.documentElement.scrollWidth - window.innerWidth"


def test_the_login_page_says_what_koruweb_is_and_the_runs_headers_never_break_a_word(
    new_page: Callable[..., Page], team: Team
) -> None:
    for n, title in enumerate(
        (
            "Rename the settings module and move every import of it to the new path",
            "Fix the flaky websocket reconnect test under load on two cores",
            "Make the whole suite pass",
        )
    ):
        long_run(team.workspace, 3 + n, prompt=title)
    for size, options in (("desktop", WIDE), ("phone", PHONE)):
        page = new_page(**options)
        page.goto("/accounts/login/")
        about = page.locator("main p.about")
        expect(about).to_contain_text(ABOUT)
        expect(about).to_contain_text("answer their permission prompts and questions from the web")
        expect(about).to_contain_text("review past turns together")
        expect(page.get_by_label("Username")).to_be_visible()
        assert page.evaluate(SIDEWAYS) <= 0
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            screenshot(page, f"login-{scheme}-{size}")
        page.emulate_media(color_scheme="light")

        sign_in(page, team.viewer)
        page.goto("/")
        expect(page.locator("tr.run")).to_have_count(3)
        assert page.evaluate(SIDEWAYS) <= 0
        if size == "desktop":
            lines = dict(page.evaluate(HEADER_LINES))
            assert lines == dict.fromkeys(HEADERS, 1), lines
            screenshot(page, "runs-list-headers-desktop")
        else:  # a phone shows each run as a card, its fields named in place
            expect(page.locator("table.runs thead")).to_be_hidden()
