"""Access revoked at once, in a real browser (issue 22): a person's open pages say why they
stopped — signed out in another tab, removed from the workspace by an admin — read out as a
status, and never connect again.

The tests wait for states, never for times. Screenshots go to ``var/screenshots/`` for a person
to look at.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from activity.models import Membership, Role
from tests.browser.helpers import (
    PASSWORD,
    PHONE,
    Live,
    Team,
    member,
    open_chat,
    screenshot,
    set_visibility,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

# Counts the sockets the page makes (htmx's and needs.js's): a reconnect would be one more.
COUNT_SOCKETS = """(() => {
  let made = 0;
  window.WebSocket = new Proxy(window.WebSocket, {
    construct(Real, args) { made += 1; return new Real(...args); },
  });
  Object.defineProperty(window, "socketsMade", { get: () => made });
})();"""


def sockets_made(page: Page) -> int:
    return int(page.evaluate("() => window.socketsMade"))


def test_logging_out_in_another_tab_says_signed_out_on_the_open_run_page_and_it_stops(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner
):
    page.add_init_script(COUNT_SOCKETS)
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)

    other_tab = page.context.new_page()
    other_tab.goto("/")
    other_tab.get_by_role("button", name="Log out").click()
    expect(other_tab).to_have_url(re.compile(r"/accounts/login/"))

    status = page.locator("#connection")
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_text("Signed out — sign in again to keep watching")
    made = sockets_made(page)
    set_visibility(page, hidden=True)  # away to another tab and back: htmx would connect again
    set_visibility(page, hidden=False)
    assert sockets_made(page) == made, "the page connected again after it was signed out"
    expect(page.locator("#access-notice")).to_have_count(0)  # said once, in the pill
    screenshot(page, "revoked-signed-out")

    path = f"/chats/{runner.chat_id}/"
    link = page.get_by_role("link", name="sign in again")
    expect(link).to_have_attribute("href", f"/accounts/login/?next={quote(path, safe='')}")
    link.click()  # … and signing in again brings the person back to the run, live
    page.get_by_label("Username").fill(team.viewer.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(re.escape(path) + "$"))
    expect(status).to_have_text("Live")
    assert page_errors == []


def test_a_member_removed_by_an_admin_is_told_on_the_open_run_page_and_the_runs_list(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    alice = new_page(**PHONE)
    alice.add_init_script(COUNT_SOCKETS)
    sign_in(alice, team.viewer)
    runs_tab = alice.context.new_page()
    runs_tab.goto("/")
    expect(runs_tab.locator(f"#chat-{runner.chat_id}")).to_be_visible()
    alices_live = watch(alice)
    open_chat(alice, alices_live, runner.chat_id)

    carol = new_page()
    sign_in(carol, member(team.workspace, "carol", Role.ADMIN))
    carol.goto(f"/workspaces/{team.workspace.slug}/")
    hers = Membership.objects.get(user=team.viewer, workspace=team.workspace)
    carol.locator(f"#member-{hers.pk}").get_by_role("button", name="Remove").click()
    expect(carol.get_by_role("status").filter(has_text="Removed alice")).to_be_visible()

    expect(alice.locator("#connection")).to_have_text("No longer a member of Acme")
    made = sockets_made(alice)
    set_visibility(alice, hidden=True)
    set_visibility(alice, hidden=False)
    assert sockets_made(alice) == made, "the page connected again after its member was removed"
    expect(alice.locator("#access-notice")).to_have_count(0)  # its own workspace: the pill says it
    screenshot(alice, "revoked-no-longer-a-member-phone")

    notice = runs_tab.locator("#access-notice")
    expect(notice).to_have_text("No longer a member of Acme")
    expect(runs_tab.locator("#needs-announcer")).to_have_text("No longer a member of Acme")
    expect(runs_tab.locator(f"#chat-{runner.chat_id}")).to_have_count(0)  # its run went too
    screenshot(runs_tab, "revoked-no-longer-a-member-runs")
