"""Finding calls in a long run (activity/filters.py): a filter by status, kind and text that
lives in the URL, its counts, and where "jump to the next failure / the waiting prompt" lead."""

from __future__ import annotations

import pytest

from activity.models import Prompt, ToolActivity
from activity.reads import LIVE_ROWS
from tests.long_runs import long_run

pytestmark = pytest.mark.django_db


def rows(page: str) -> int:
    return page.count('<tr id="tool-')


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
    assert rows(page) == 500
    assert "status=failed&amp;q=file&amp;page=2" in page
    assert "Show all calls" in page and "500 of 1,200 calls" not in page
    kept = ToolActivity.objects.filter(chat=chat, status="failed", agent_label__contains="file")
    assert f"{kept.count()} of 1,200 calls match" in page
    second = as_approver.get(f"{url}?status=failed&q=file&page=2").content.decode()
    assert 0 < rows(second) < 500


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
    # the newest 300 calls hold failures 749 … 999 and the waiting prompt
    shown = ToolActivity.objects.get(chat=chat, tool_call_id="call-749")
    assert f'id="jump-failure" class="jump" href="#tool-{shown.pk}"' in page
    assert f'id="jump-prompt" class="jump waiting" href="#prompt-{prompt.pk}"' in page
    old = long_run(acme, 1000, fail_every=0, waiting=False)
    ToolActivity.objects.filter(chat=old, tool_call_id="call-3").update(status="failed")
    page = as_approver.get(f"/chats/{old.pk}/").content.decode()
    assert 'id="jump-failure" class="jump" href="?status=failed"' in page  # not on this page
    assert "jump-prompt" not in page
