"""Finding calls in a long run (activity/review/filters.py): a filter by status, kind and text that
lives in the URL, its counts, where "jump to the next failure / the waiting prompt" lead, and
the filter bar a live page is pushed, equal to a fresh page's at the same version."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from activity.models import Chat, Prompt, ToolActivity, Workspace
from activity.push import pushes
from activity.review.reads import LIVE_ROWS
from activity.web.review import TURN_PAGE_ROWS
from tests import frames
from tests.factories import apply, run
from tests.long_runs import long_run

pytestmark = pytest.mark.django_db


def rows(page: str) -> int:
    return page.count('<tr id="tool-')


def filter_bar(html: str) -> str:
    """The filter bar in a page or a push, as it stands on the page (a push's swap word aside)."""
    found = re.search(r'<section id="run-filter".*?</section>', html, re.S)
    assert found, "no filter bar"
    return found.group().replace(' hx-swap-oob="outerMorph"', "")


class Watched:
    """A chat page open at one version, and the pushes that move it on."""

    def __init__(self, client: Client, chat: Chat) -> None:
        self.client, self.chat_id = client, chat.pk
        self.version = Chat.objects.get(pk=chat.pk).version

    def fresh(self) -> str:
        """The filter bar of the chat page loaded now."""
        return filter_bar(self.client.get(f"/chats/{self.chat_id}/").content.decode())

    def pushed(self) -> str:
        """The filter bar in the push that brings the page to the chat's version now."""
        (text,) = pushes.render_push(self.chat_id, self.version)
        push = json.loads(text)
        self.version = push["to"]
        return filter_bar(push["content"])


def facet(words: str, count: int) -> str:
    return f'{words} <span class="n">{count}</span></a>'


def test_a_filter_in_the_url_narrows_the_chat_page_and_counts_what_it_kept(acme, as_approver):
    chat = long_run(acme, 400)  # every 50th failed: 8 failures
    page = as_approver.get(f"/chats/{chat.pk}/?status=failed").content.decode()
    assert rows(page) == 8
    assert "8 of 400 calls match" in page
    assert '<option value="failed" selected>failed (8)</option>' in page
    assert 'href="?">Show all calls</a>' in page
    page = as_approver.get(f"/chats/{chat.pk}/?status=failed&kind=edit").content.decode()
    assert rows(page) == 4  # calls 49, 149, 249 and 349 (the kinds go read, edit, ...)
    assert "4 of 400 calls match" in page
    page = as_approver.get(f"/chats/{chat.pk}/?q=pytest&kind=read").content.decode()
    expected = ToolActivity.objects.filter(
        chat=chat, agent_kind="read", agent_label__icontains="pytest"
    ).count()
    assert rows(page) == expected > 0
    unfiltered = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert rows(unfiltered) == LIVE_ROWS and "Show all calls" not in unfiltered


def test_a_filtered_turn_page_keeps_the_filter_in_its_page_links(acme, as_approver):
    chat = long_run(acme, 1200, fail_every=2)  # 600 failed, more than a turn page holds
    url = f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/"
    page = as_approver.get(f"{url}?status=failed&q=file").content.decode()
    assert rows(page) == TURN_PAGE_ROWS
    assert "status=failed&amp;q=file&amp;page=2" in page
    assert "Show all calls" in page and f"{TURN_PAGE_ROWS} of 1,200 calls" not in page
    kept = ToolActivity.objects.filter(chat=chat, status="failed", agent_label__contains="file")
    assert f"{kept.count()} of 1,200 calls match" in page
    second = as_approver.get(f"{url}?status=failed&q=file&page=2").content.decode()
    assert 0 < rows(second) <= TURN_PAGE_ROWS


def test_a_bad_filter_says_why_shows_every_call_and_changes_nothing(acme, as_approver):
    chat = long_run(acme, 20)
    before = ToolActivity.objects.filter(chat=chat).count()
    response = as_approver.get(f"/chats/{chat.pk}/?status=exploded&q=" + "x" * 500)
    assert response.status_code == 200
    page = response.content.decode()
    assert rows(page) == 20
    assert (
        "This filter cannot apply: no such status; the text to find is at most 200 characters."
        in page
    )
    turn = f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/?from=abc&to=-5"
    assert as_approver.get(turn).status_code == 200
    assert ToolActivity.objects.filter(chat=chat).count() == before


def test_the_jumps_lead_to_the_failure_and_the_waiting_prompt_on_the_page_or_by_filter(
    acme, as_approver
):
    chat = long_run(acme, 1000, waiting=True)
    prompt = Prompt.objects.get(chat=chat, closed_at__isnull=True)
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    # the newest LIVE_ROWS calls (100) hold the waiting prompt and failures 949 and 999
    shown = ToolActivity.objects.get(chat=chat, tool_call_id="call-949")
    assert f'id="jump-failure" class="jump" href="#tool-{shown.pk}"' in page
    assert f'id="jump-prompt" class="jump waiting" href="#prompt-{prompt.pk}"' in page
    old = long_run(acme, 1000, fail_every=0, waiting=False)
    ToolActivity.objects.filter(chat=old, tool_call_id="call-3").update(status="failed")
    page = as_approver.get(f"/chats/{old.pk}/").content.decode()
    assert 'id="jump-failure" class="jump" href="?status=failed"' in page  # not on this page
    assert "jump-prompt" not in page


def test_a_new_run_has_an_empty_filter_bar_and_the_push_after_its_calls_draws_a_fresh_pages(
    acme: Workspace, as_approver: Client
) -> None:
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    page = Watched(as_approver, chat)
    assert page.fresh() == (
        '<section id="run-filter" class="run-filter" aria-label="Find calls in this run">'
        "</section>"  # empty: hidden until the first call (long.css)
    )
    apply(
        chat.pk,
        frames.tool_call(2, "c1", "Read a.py", kind="read", status="in_progress"),
        frames.tool_call(3, "c2", "Run pytest", kind="execute", status="in_progress"),
        frames.tool_update(4, "c2", status="failed"),
    )
    pushed = page.pushed()
    assert pushed == page.fresh()
    failed = ToolActivity.objects.get(chat=chat, tool_call_id="c2")
    for chip in (facet("failed", 1), facet("running", 1), facet("read", 1), facet("execute", 1)):
        assert chip in pushed
    assert f'id="jump-failure" class="jump" href="#tool-{failed.pk}"' in pushed

    apply(chat.pk, frames.tool_update(5, "c1", status="completed"))
    pushed = page.pushed()
    assert pushed == page.fresh()
    assert facet("completed", 1) in pushed and "running" not in pushed


def test_pushes_bring_and_take_away_waiting_for_a_person_and_its_jump_as_prompts_come_and_go(
    acme: Workspace, as_approver: Client
) -> None:
    attempt = uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, attempt, uuid.uuid4()),
        frames.tool_call(2, "ask-1", "Run rm -rf build", kind="execute"),
        frames.permission(3, 1, "ask-1", "Run rm -rf build"),
    )
    page = Watched(as_approver, chat)
    first = Prompt.objects.get(chat=chat, request_id="n:1")
    assert facet("waiting for a person", 1) in page.fresh()
    assert f'href="#prompt-{first.pk}" data-key="w">Jump to the waiting prompt' in page.fresh()

    apply(chat.pk, frames.outcome(4, 1, "allow-once"))  # answered
    pushed = page.pushed()
    assert pushed == page.fresh()
    assert "waiting for a person" not in pushed and "jump-prompt" not in pushed

    apply(
        chat.pk,
        frames.tool_call(5, "ask-2", "Run git push --force", kind="execute"),
        frames.permission(6, 2, "ask-2", "Run git push --force"),
    )
    pushed = page.pushed()
    assert pushed == page.fresh()
    second = Prompt.objects.get(chat=chat, request_id="n:2")
    assert facet("waiting for a person", 1) in pushed and f"#prompt-{second.pk}" in pushed

    apply(chat.pk, frames.turn_ended(7, attempt))  # it ends with the prompt unanswered
    pushed = page.pushed()
    assert pushed == page.fresh()
    assert "waiting for a person" not in pushed and "jump-prompt" not in pushed


def test_a_push_with_the_filter_bar_of_a_long_run_takes_as_many_queries_as_a_short_runs(
    acme: Workspace,
) -> None:
    def pushed(chat: Chat) -> tuple[str, int]:
        since = chat.version - 1  # the page before the run's one batch: rows and prompts changed
        with CaptureQueriesContext(connection) as captured:
            html, _ = pushes.render_changes(chat.pk, since)
        return html, len(captured)

    (short, short_queries), (long, long_queries) = (
        pushed(long_run(acme, calls, waiting=True, fail_every=every))
        for calls, every in ((3, 3), (1000, 50))  # both with failures: their jump is looked up
    )
    assert facet("waiting for a person", 1) in filter_bar(short)
    assert facet("failed", 1) in filter_bar(short)
    assert facet("failed", 20) in filter_bar(long)
    assert long_queries == short_queries
