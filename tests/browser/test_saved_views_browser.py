"""Saved views in a real browser (issue 30): a filter of the runs list saved and shared with the
workspace appears on another member's runs list and opens the same filter; a private one does
not. Screenshots go to ``var/screenshots/``."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Role, Workspace
from tests.browser.helpers import member, screenshot, sign_in
from tests.browser.test_hosts_browser import PHONE, sideways

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_shared_saved_view_appears_for_another_member_and_opens_its_filter(
    page: Page, new_page: Any, acme: Workspace, page_errors: list[str]
) -> None:
    alice = member(acme, "alice", Role.APPROVER)
    sign_in(page, alice)
    page.goto("/?failures=on&status=running")
    page.get_by_text("Save this view").click()
    page.get_by_label("Name").fill("Failing now")
    page.get_by_label("Who sees it").select_option(label="everyone in Acme")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("link", name="Failing now")).to_be_visible()
    assert "status=running" in page.url and "failures=on" in page.url
    page.get_by_text("Save this view").click()
    page.get_by_label("Name").fill("Just mine")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("link", name="Just mine")).to_be_visible()
    screenshot(page, "saved-views-desktop")
    assert page_errors == []

    phone = new_page(**PHONE)
    sign_in(phone, member(acme, "bob", Role.VIEWER))
    phone.goto("/")
    expect(phone.get_by_role("link", name="Just mine")).to_have_count(0)
    shared = phone.get_by_role("link", name="Failing now")
    expect(shared).to_be_visible()
    expect(phone.locator(".saved-list")).to_contain_text("by alice")
    assert sideways(phone) == 0
    screenshot(phone, "saved-views-phone")
    shared.click()
    expect(phone.locator("select[name=status]")).to_have_value("running")
    expect(phone.locator("input[name=failures]")).to_be_checked()


def test_a_run_is_reviewed_from_its_page_and_the_runs_list_finds_it_by_its_outcome(
    page: Page, new_page: Any, acme: Workspace, page_errors: list[str]
) -> None:
    import uuid

    from activity.live import presence
    from tests import frames

    chat_id = uuid.uuid4()
    presence.claim(acme.pk, chat_id, "specific.test!r", 0, frames.secret_of(chat_id))
    sign_in(page, member(acme, "alice", Role.APPROVER))
    page.goto(f"/chats/{chat_id}/")
    page.get_by_text("Review this run").click()
    page.get_by_role("button", name="Ask for a review").click()
    expect(page.locator(".review-state")).to_contain_text("Needs review")
    page.get_by_text("Review this run").click()
    page.get_by_label("Needs changes").check()
    page.get_by_label("Note").fill("The tests are missing.")
    page.get_by_role("button", name="Mark reviewed").click()
    expect(page.locator(".review-state")).to_contain_text("Reviewed: needs changes by alice")
    expect(page.locator(".review-note")).to_have_text("The tests are missing.")
    screenshot(page, "review-desktop")
    page.goto("/")
    page.get_by_label("Review").select_option(label="reviewed: needs changes")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(f"a[href='/chats/{chat_id}/']").first).to_be_visible()
    assert page_errors == []
    phone = new_page(**PHONE)
    sign_in(phone, member(acme, "bob", Role.VIEWER))
    phone.goto(f"/chats/{chat_id}/")
    expect(phone.locator(".review-state")).to_contain_text("Reviewed: needs changes")
    expect(phone.get_by_text("Review this run")).to_have_count(0)  # a viewer reads it only
    assert sideways(phone) == 0
    screenshot(phone, "review-phone")
