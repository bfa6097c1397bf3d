"""The review queue in a real browser (issue 30; docs/architecture.md#the-review-queue): an admin
assigns a run's review to an approver, whose open inbox shows it live and whose queue page lists
it; they open the run from the inbox, mark it reviewed, and it leaves both; the queue page on a
phone does not scroll sideways. Screenshots go to ``var/screenshots/``."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.live import presence
from activity.models import Chat, Role, Workspace
from tests import frames
from tests.browser.helpers import member, screenshot, sign_in
from tests.browser.test_hosts_browser import PHONE, sideways

pytestmark = [pytest.mark.django_db(transaction=True)]


def run_called(workspace: Workspace, title: str) -> uuid.UUID:
    chat_id = uuid.uuid4()
    presence.claim(workspace.pk, chat_id, "specific.test!r", 0, frames.secret_of(chat_id))
    Chat.objects.filter(pk=chat_id).update(title=title)
    return chat_id


def test_a_run_assigned_to_an_approver_waits_in_their_queue_and_inbox_until_they_review_it(
    page: Page, new_page: Any, acme: Workspace, page_errors: list[str]
) -> None:
    alice, bob = member(acme, "alice", Role.ADMIN), member(acme, "bob", Role.APPROVER)
    chat_id = run_called(acme, "Tidy the parser")
    bobs = new_page()
    sign_in(bobs, bob)
    bobs.goto("/inbox/")
    expect(bobs.locator("#assigned")).to_contain_text("No run waits for your review.")

    sign_in(page, alice)
    page.goto(f"/chats/{chat_id}/")
    page.get_by_text("Review this run").click()
    page.get_by_label("Ask").select_option(label="bob")
    screenshot(page, "review-queue-assign-form-desktop")
    page.get_by_role("button", name="Assign").click()
    expect(page.locator(".review-state")).to_contain_text("Needs review")
    expect(page.locator(".review-assignees")).to_contain_text("bob")
    expect(page.get_by_role("button", name="Unassign bob")).to_be_visible()
    screenshot(page, "review-queue-assigned-desktop")

    # Bob's inbox, open all along, hears of it (needs.js), and so does its count.
    assigned = bobs.locator("#assigned")
    expect(assigned).to_contain_text("alice asked you to review Tidy the parser")
    expect(bobs.locator("#needs-count")).to_have_text("1")
    screenshot(bobs, "review-queue-inbox-desktop")

    phone = new_page(**PHONE)
    sign_in(phone, bob)
    phone.goto("/reviews/")
    expect(phone.locator("#queue-mine-list")).to_contain_text("Tidy the parser")
    expect(phone.locator("#queue-progress-table")).to_contain_text("bob")
    assert sideways(phone) == 0
    screenshot(phone, "review-queue-phone")

    bobs.goto("/reviews/")
    expect(bobs.locator("#queue-mine-list")).to_contain_text("Tidy the parser")
    screenshot(bobs, "review-queue-desktop")
    bobs.goto("/inbox/")
    bobs.get_by_role("link", name="Tidy the parser").click()
    expect(bobs).to_have_url(re.compile(rf"/chats/{chat_id}/#review-title$"))
    bobs.get_by_text("Review this run").click()
    bobs.get_by_label("Good").check()
    bobs.get_by_label("Note").fill("Clear and tested.")
    bobs.get_by_role("button", name="Mark reviewed").click()
    expect(bobs.locator(".review-state")).to_contain_text("Reviewed: good by bob")

    bobs.goto("/reviews/")
    expect(bobs.locator("#queue-mine-list")).to_contain_text("No open review is assigned to you.")
    expect(bobs.locator("#queue-progress-table")).to_contain_text("bob")
    bobs.goto("/inbox/")
    expect(bobs.locator("#assigned")).to_contain_text("No run waits for your review.")
    expect(bobs.locator("#needs-count")).to_be_hidden()
    assert page_errors == []
