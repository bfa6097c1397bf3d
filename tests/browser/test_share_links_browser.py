"""Share links in a real browser (issue 30): an admin makes a link on the run's page; opened in a
fresh browser without an account it shows the run live — the waiting prompt visible, not
answerable — and none of what it hides; revoking it on the workspace's page cuts the open page
off at once, and a link that expires cuts its page off too. Screenshots go to
``var/screenshots/``."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from activity.models import Role, ShareLink
from tests import frames
from tests.browser.helpers import DESKTOP, PHONE, Live, Team, member, open_chat, screenshot, sign_in
from tests.browser.runner import Runner
from tests.browser.test_accessibility_browser import blocking, outline_faults
from tests.browser.test_hosts_browser import sideways
from tests.liveserver import Server

pytestmark = [pytest.mark.django_db(transaction=True)]
GONE = "This link no longer works: it was revoked, it expired, or its run was deleted"


def asking(runner: Runner) -> None:
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Tidy the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
    )


def make_link(page: Page, hours: str = "a day") -> str:
    """On the run's page: Follow · export · share, then a link; its address."""
    page.locator(".run-menu summary").click()
    page.get_by_label("Share read-only, for").select_option(label=hours)
    page.get_by_role("button", name="Make a link").click()
    url = page.locator("#share-url").inner_text().strip()
    assert "/s/" in url
    return url


def visitor(browser: Any, server: Server, **options: Any) -> Page:
    """Someone without an account, in a browser of their own (axe may inject its script)."""
    context = browser.new_context(base_url=server.url, bypass_csp=True, **options)
    page: Page = context.new_page()
    return page


def test_a_share_link_shows_the_run_live_without_an_account_and_revoking_it_cuts_the_page_off(
    page: Page, browser: Any, server: Server, live: Live, team: Team, runner: Runner
) -> None:
    carol = member(team.workspace, "carol", Role.ADMIN)
    asking(runner)
    sign_in(page, carol)
    open_chat(page, live, runner.chat_id)
    url = make_link(page)
    screenshot(page, "share-made-desktop")

    outside = visitor(browser, server, **DESKTOP)
    try:
        outside.goto(url)
        expect(outside.locator("#connection")).to_have_attribute("data-state", "live")
        expect(outside.locator(".badge .if-not-yours")).to_be_visible()  # not "for you"
        expect(outside.locator(".prompt-box.awaiting")).to_contain_text(
            "Waiting for the team's answer"
        )
        for hidden in ("form.answer", ".comment-form", "#compose", ".watching", ".copy-link"):
            expect(outside.locator(hidden)).to_have_count(0)
        runner.send(frames.say(4, "Cleaning up now."))
        expect(outside.locator(".reply")).to_contain_text("Cleaning up now.")  # live
        body = outside.locator("body").inner_text()
        assert "carol" not in body and "alice" not in body
        problems = []
        for scheme in ("light", "dark"):
            outside.emulate_media(color_scheme=scheme)
            screenshot(outside, f"shared-desktop-{scheme}")
            problems += blocking(outside) + outline_faults(outside)
        assert problems == []
        page.goto(f"/chats/{runner.chat_id}/")  # the team's page does not list the visitor
        expect(page.locator("#watching [data-name]")).to_have_count(1)  # carol only

        page.goto("/workspaces/acme/")
        row = page.locator("#share-links tbody tr").first
        expect(row).to_contain_text("carol")
        expect(row).not_to_contain_text("never")  # it was opened
        row.get_by_role("button", name="Revoke").click()
        expect(page.locator("#share-links")).to_contain_text("No live share link")
        status = outside.locator("#connection")
        expect(status).to_have_attribute("data-state", "ended")
        expect(status).to_have_text(GONE)
        screenshot(outside, "shared-revoked-desktop")
        outside.reload()
        expect(outside.get_by_role("heading", name="This link does not work")).to_be_visible()
        expect(outside.locator("body")).not_to_contain_text("Tidy the build")
    finally:
        outside.context.close()


def test_a_link_that_expires_cuts_off_the_phone_open_on_it(
    page: Page, browser: Any, server: Server, live: Live, team: Team, runner: Runner
) -> None:
    asking(runner)
    sign_in(page, member(team.workspace, "carol", Role.ADMIN))
    open_chat(page, live, runner.chat_id)
    url = make_link(page, "an hour")
    phone = visitor(browser, server, **PHONE)
    try:
        phone.goto(url)
        expect(phone.locator("#connection")).to_have_attribute("data-state", "live")
        expect(phone.locator(".prompt-box.awaiting")).to_be_visible()
        assert sideways(phone) == 0
        screenshot(phone, "shared-phone")
        ShareLink.objects.update(expires_at=timezone.now() + timedelta(seconds=1))
        phone.reload()  # its socket now ends when the link does
        expect(phone.locator("#connection")).to_have_attribute("data-state", "live")
        expect(phone.locator("#connection")).to_have_text(GONE, timeout=10_000)
    finally:
        phone.context.close()
