"""What a team reviewing a run in a real browser relies on: links to a row, comments, search.

A permalink (``/chats/<id>/#tool-<uuid>``) is what people paste to each other: it must land on
its row and show which one it is, even when the row is too old to be on the live page. A
comment is for the others: it must reach their open pages without a reload. Search is how a
past run is found again: a run's matches together, and a way to the rest of them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from playwright.sync_api import Locator, Page, expect

from activity.models import Role, ToolActivity
from activity.review.reads import LIVE_ROWS
from tests import frames
from tests.browser.helpers import (
    PHONE,
    Live,
    Team,
    member,
    open_chat,
    reload_marker,
    row_of,
    screenshot,
    sign_in,
    watch,
)
from tests.browser.runner import Runner
from tests.factories import run

pytestmark = [pytest.mark.django_db(transaction=True)]

HIGHLIGHTED = re.compile(r"(^|\s)highlight(\s|$)")
HIGHLIGHT_BACKGROUND = "rgb(255, 244, 214)"  # tr.highlight, tr:target: --wait-bg, light


def calls(runner: Runner, count: int) -> None:
    """A turn of ``count`` finished calls, ``call_1`` first."""
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        *(
            frames.tool_call(
                n + 2, f"call_{n + 1}", f"Read src/module_{n + 1}.py", kind="read",
                status="completed",
            )
            for n in range(count)
        ),
    )  # fmt: skip


def test_a_permalink_scrolls_to_its_row_and_highlights_it(page: Page, team: Team, runner: Runner):
    calls(runner, 60)  # a page much taller than the window
    target = row_of(runner, "call_45")
    sign_in(page, team.viewer)
    page.goto(f"/chats/{runner.chat_id}/#tool-{target.id}")

    row = page.locator(f"#tool-{target.id}")
    expect(row).to_have_class(HIGHLIGHTED)
    expect(row).to_have_css("background-color", HIGHLIGHT_BACKGROUND)
    expect(row).to_be_in_viewport()
    expect(page.locator("tr.highlight")).to_have_count(1)
    assert page.evaluate("() => window.scrollY") > 0


def test_a_permalink_to_a_row_no_longer_on_the_live_page_opens_the_turn_at_that_row(
    page: Page, team: Team, runner: Runner
):
    calls(runner, LIVE_ROWS + 5)  # the live page shows only the latest LIVE_ROWS calls
    old = row_of(runner, "call_2")
    sign_in(page, team.viewer)
    page.goto(f"/chats/{runner.chat_id}/#tool-{old.id}")

    expect(page).to_have_url(re.compile(rf"/chats/{runner.chat_id}/turns/[^/]+/\?page=1#tool-"))
    row = page.locator(f"#tool-{old.id}")
    expect(row).to_have_class(HIGHLIGHTED)
    expect(row).to_be_in_viewport()


def test_a_comment_posted_in_one_browser_appears_live_in_another_without_a_reload(
    page: Page, live: Live, new_page: Callable[..., Page], team: Team, runner: Runner
):
    calls(runner, 3)
    target = row_of(runner, "call_2")
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    page.goto(f"/chats/{runner.chat_id}/#tool-{target.id}")  # bob followed a permalink
    open_chat(page, live, runner.chat_id)
    bobs_document = reload_marker(page)

    alice = new_page()
    sign_in(alice, team.viewer)  # a viewer may comment: review is for every member
    open_chat(alice, watch(alice), runner.chat_id)
    form = alice.locator(f"#tool-{target.id} .comment-form")
    expect(form).to_be_hidden()  # a closed call carries no form
    alice.locator(f"#call-label-{target.id}").click()  # the call opens, with its form
    box = alice.locator(f"#comment-form-{target.id}")
    box.get_by_label("Comment on this call").fill("Why read <module_2> **twice**?\nSee the plan.")
    box.get_by_role("button", name="Add comment").click()

    for viewer in (page, alice):
        comment = viewer.locator(f"#comments-{target.id} .comment")
        expect(comment).to_have_count(1)
        expect(comment.locator("strong").first).to_have_text("alice")
        expect(comment).to_contain_text("Why read <module_2> twice?")  # text, not markup
        expect(comment.locator(".comment-text strong")).to_have_text("twice")  # Markdown
        expect(comment).to_be_visible()  # shown under the call, also while it is closed
    expect(page.locator(".comment")).to_have_count(1)  # on that row only
    expect(box.get_by_label("Comment on this call")).to_have_value("")  # sent, so cleared
    expect(page.locator(f"#tool-{target.id}")).to_have_css(  # bob still sees which row
        "background-color", HIGHLIGHT_BACKGROUND
    )
    assert bobs_document(), "bob's page was reloaded"


SEARCH_DESKTOP = {"viewport": {"width": 1440, "height": 900}}


def test_search_groups_a_runs_matches_highlights_them_filters_and_opens_the_rest_in_the_run(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    start = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix the greeting test")
    start["agent_name"] = "claude-agent-acp"
    labels = ["Run python3 test_greet.py"] * 4 + [
        f"Run python3 test_greet.py -k case_{n}" for n in range(6)
    ]
    runner.send(
        start,
        frames.tool_call(2, "read", "Read test_greet.py", kind="read", status="completed"),
        *(
            frames.tool_call(n + 3, f"run_{n}", label, kind="execute", status="completed")
            for n, label in enumerate(labels)
        ),
    )
    other = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Tidy the docs")
    other["agent_name"] = "codex-acp"
    docs = run(
        team.workspace,
        other,
        frames.tool_call(2, "notes", "Read test_greet notes", kind="read", status="completed"),
    )
    assert ToolActivity.objects.filter(chat_id=runner.chat_id).count() == 11  # sent, acked

    def search(options: dict, size: str) -> tuple[Page, Locator]:
        """Search as a person does, check the runner's run, and keep a screenshot."""
        page = new_page(**options)
        sign_in(page, team.viewer)
        page.goto("/search/")
        page.get_by_role("searchbox", name="Words in a call or a reply").fill("test_greet")
        page.get_by_role("searchbox", name="Words in a call or a reply").press("Enter")
        mine = page.locator(f"#run-{runner.chat_id}")
        expect(page.locator(".search-run")).to_have_count(2)
        expect(page.locator(f"#run-{docs.pk}")).to_contain_text("codex-acp")
        expect(mine.get_by_role("heading", name="Fix the greeting test")).to_be_visible()
        expect(mine.locator(".search-run-facts")).to_contain_text("claude-agent-acp")
        expect(mine.locator(".search-run-facts")).to_contain_text(team.workspace.name)
        expect(mine.locator(".search-line")).to_have_count(5)  # the first five of eight lines
        repeated = mine.locator(".search-line", has=page.locator(".times"))
        expect(repeated).to_have_count(1)
        expect(repeated.locator(".times")).to_contain_text("×4")
        expect(repeated.locator("mark")).to_have_text(["test_greet"])
        screenshot(page, f"search-{size}")
        return page, mine

    phone, _ = search(PHONE, "phone")
    wide = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    assert phone.evaluate(wide) <= 0  # nothing scrolls sideways on a phone

    page, mine = search(SEARCH_DESKTOP, "desktop")
    page.get_by_label("Kind of call").select_option("execute")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]kind=execute(&|$)"))
    expect(page.locator(".search-run")).to_have_count(1)  # the read in the docs run is out
    more = mine.get_by_role("link", name=re.compile(r"^\d+ more in this run$"))
    expect(more).to_have_text("2 more in this run")  # 10 calls: the line ×4 and 4 others
    screenshot(page, "search-filtered-desktop")
    more.click()
    expect(page).to_have_url(re.compile(rf"/chats/{runner.chat_id}/\?.*kind=execute"))
    expect(page.locator(".filter-said")).to_contain_text("10 of 11 calls match “test_greet”")
