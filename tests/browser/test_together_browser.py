"""Reviewing together in a real browser: every call has a link that copies, comments read as
Markdown, and an ``@name`` reaches that member — the count on *Inbox* on the page they have
open, live, a line read out, the comment in their inbox until they open or dismiss it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Mention, Role
from tests import frames
from tests.browser.helpers import (
    DESKTOP,
    PHONE,
    Team,
    member,
    open_chat,
    row_of,
    screenshot,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

CLIPBOARD = {"permissions": ["clipboard-read", "clipboard-write"]}
HIGHLIGHTED = re.compile(r"(^|\s)highlight(\s|$)")


def calls(runner: Runner) -> None:
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), prompt="Tidy", title="Tidy the build"),
        frames.tool_call(2, "call_1", "Read Makefile", kind="read", status="completed"),
        frames.tool_call(3, "call_2", "Run make clean", kind="execute", status="completed"),
    )


def comment_on(page: Page, row_id: uuid.UUID, text: str) -> None:
    """Open the call, write the comment, send it: as a person does."""
    page.locator(f"#call-label-{row_id}").click()
    form = page.locator(f"#comment-form-{row_id}")
    form.get_by_label("Comment on this call").fill(text)
    form.get_by_role("button", name="Add comment").click()
    expect(form.get_by_label("Comment on this call")).to_have_value("")


def alice_comments(
    new_page: Callable[..., Page], team: Team, runner: Runner, row_id: uuid.UUID, text: str
) -> Page:
    """Alice, the team's viewer, opens the run in a browser of her own and comments."""
    alice = new_page(**DESKTOP)
    sign_in(alice, team.viewer)
    open_chat(alice, watch(alice), runner.chat_id)
    comment_on(alice, row_id, text)
    return alice


def inbox_count(page: Page) -> Any:
    return page.locator("#needs-count")


def test_a_mention_reaches_the_members_open_page_live_and_their_inbox_until_opened(
    page: Page, new_page: Callable[..., Page], team: Team, runner: Runner
):
    calls(runner)
    target = row_of(runner, "call_2")
    bob = member(team.workspace, "bob", Role.VIEWER)
    sign_in(page, bob)
    page.goto("/")  # bob is on the runs list, nothing waits for him
    expect(inbox_count(page)).to_be_hidden()

    alice = alice_comments(
        new_page, team, runner, target.id, "@bob is `make clean` **safe** here? cc @nobody"
    )

    comment = alice.locator(f"#comments-{target.id} .comment")
    expect(comment.locator(".mention")).to_have_text("@bob")  # a member: highlighted
    expect(comment.locator(".comment-text code")).to_have_text("make clean")  # Markdown
    expect(comment).to_contain_text("cc @nobody")  # anyone else: plain text
    expect(inbox_count(page)).to_have_text("1")  # on bob's open page, without a reload
    expect(page.locator("#needs-announcer")).to_have_text("alice mentioned you in Tidy the build")
    expect(page).to_have_title(re.compile(r"^\(1\) "))

    page.get_by_role("link", name=re.compile("^Inbox")).click()
    item = page.locator(".mention-item")
    expect(item).to_have_count(1)
    expect(item.locator(".where")).to_contain_text("alice mentioned you on Run make clean")
    expect(item.locator(".comment-text strong")).to_have_text("safe")
    screenshot(page, "inbox-mention-desktop")

    item.get_by_role("link", name="Run make clean").click()  # opens it: lands on the call
    expect(page).to_have_url(re.compile(rf"/chats/{runner.chat_id}/#tool-{target.id}$"))
    expect(page.locator(f"#tool-{target.id}")).to_have_class(HIGHLIGHTED)
    expect(inbox_count(page)).to_be_hidden()  # seen: no longer waiting
    page.goto("/inbox/")
    expect(page.locator(".mention-item")).to_have_count(0)
    expect(page.locator("#mentions .empty")).to_be_visible()


def test_a_mention_dismissed_on_one_page_leaves_the_inbox_open_on_another(
    page: Page, new_page: Callable[..., Page], team: Team, runner: Runner
):
    calls(runner)
    target = row_of(runner, "call_1")
    bob = member(team.workspace, "bob", Role.APPROVER)
    sign_in(page, bob)
    page.goto("/inbox/")  # bob's inbox is open while alice writes
    expect(page.locator(".mention-item")).to_have_count(0)

    alice_comments(new_page, team, runner, target.id, "@bob why read the Makefile?")
    item = page.locator(".mention-item")
    expect(item).to_have_count(1)  # the list follows, without a reload
    expect(page).to_have_title("(1) Inbox · koruweb")

    other_tab = page.context.new_page()
    other_tab.goto(f"/chats/{runner.chat_id}/")
    expect(inbox_count(other_tab)).to_have_text("1")
    item.get_by_role("button", name="Dismiss").click()
    expect(item).to_have_count(0)
    expect(inbox_count(other_tab)).to_be_hidden()  # bob's other tab hears it too
    assert Mention.objects.get(user=bob).seen_at is not None


def test_every_call_has_a_link_that_copies_its_permalink_by_mouse_and_by_keyboard(
    new_page: Callable[..., Page], team: Team, runner: Runner, server: Any
):
    calls(runner)
    first, second = row_of(runner, "call_1"), row_of(runner, "call_2")
    page = new_page(**DESKTOP, **CLIPBOARD)
    sign_in(page, team.viewer)
    open_chat(page, watch(page), runner.chat_id)

    link = page.locator(f"#tool-{first.id} .copy-link")
    expect(link).to_be_visible()
    expect(link).to_have_accessible_name("Copy link to this call")
    link.click()
    expect(link).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == f"{server.url}/tools/{first.id}/"
    assert page.url.endswith(f"/chats/{runner.chat_id}/")  # a copy, not a navigation

    page.locator(f"#tool-{second.id} .copy-link").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("navigator.clipboard.readText()") == f"{server.url}/tools/{second.id}/"

    reader = new_page(**DESKTOP)  # someone the link was pasted to
    sign_in(reader, team.viewer)
    reader.goto(f"{server.url}/tools/{second.id}/")
    expect(reader.locator(f"#tool-{second.id}")).to_have_class(HIGHLIGHTED)


def test_on_a_phone_a_call_keeps_its_link_on_its_line_and_its_comments_open_with_it(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    calls(runner)
    target = row_of(runner, "call_2")
    desk = new_page(**DESKTOP)
    sign_in(desk, team.viewer)
    open_chat(desk, watch(desk), runner.chat_id)
    comment_on(desk, target.id, "Looks fine.\n\n```sh\nmake clean && make\n```")
    screenshot(desk, "comments-chat-desktop")

    phone = new_page(**PHONE)
    sign_in(phone, member(team.workspace, "bob", Role.VIEWER))
    open_chat(phone, watch(phone), runner.chat_id)
    row = phone.locator(f"#tool-{target.id}")
    label, link = row.locator(f"#call-label-{target.id}"), row.locator(".copy-link")
    expect(link).to_be_visible()
    box, line = link.bounding_box(), label.bounding_box()
    assert box and line and abs(box["y"] - line["y"]) < line["height"]  # on the card's one line
    assert box["width"] >= 24 and box["height"] >= 24  # a target a thumb can hit (WCAG 2.5.8)
    expect(row.locator(".comment")).to_be_hidden()  # a closed card is one line
    label.tap()
    expect(row.locator(".comment pre")).to_contain_text("make clean && make")
    expect(row.get_by_label("Comment on this call")).to_be_visible()
    overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(phone, "comments-chat-phone")
    phone.goto("/inbox/")
    screenshot(phone, "inbox-phone")


def test_typing_at_offers_the_workspaces_members_and_the_keyboard_takes_one(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    calls(runner)
    target = row_of(runner, "call_1")
    for name in ("bob", "bella", "carol"):
        member(team.workspace, name, Role.VIEWER)
    page = new_page(**DESKTOP)
    sign_in(page, team.viewer)
    open_chat(page, watch(page), runner.chat_id)
    page.locator(f"#call-label-{target.id}").click()
    box = page.locator(f"#comment-form-{target.id}").get_by_label("Comment on this call")

    box.press_sequentially("Thanks @b")
    offered = page.get_by_role("listbox", name="Members to mention").get_by_role("option")
    expect(offered).to_have_text(["@bella", "@bob"])  # the members whose names start so
    box.press("ArrowDown")
    expect(offered.nth(1)).to_have_attribute("aria-selected", "true")
    box.press("Enter")  # takes it; the comment is not sent
    expect(box).to_have_value("Thanks @bob ")
    expect(offered).to_have_count(0)

    box.press_sequentially("and @zed")  # nobody of that name: nothing offered
    expect(offered).to_have_count(0)
    box.press_sequentially(" @c")
    expect(offered).to_have_text(["@carol"])
    expect(page.get_by_role("status").filter(has_text="to mention")).to_have_text(
        "1 member to mention: arrows to choose, Enter to take, Escape to close"
    )
    box.press("Home")  # the caret left the name: nothing to complete there
    expect(offered).to_have_count(0)
    box.press("End")
    expect(offered).to_have_text(["@carol"])
    box.press("Escape")
    expect(offered).to_have_count(0)
    expect(box).to_have_value("Thanks @bob and @zed @c")
