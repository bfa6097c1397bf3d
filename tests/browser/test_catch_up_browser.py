"""A page back after a while: what it missed, at the cost of what it shows.

A page whose socket was down while the agent made more calls than a run's page shows (a laptop
asleep, a train tunnel) is not sent every call it missed: it fetches its page, as a fresh load
draws it (the run's latest calls), and is live again from there (activity/push/pushes.py,
``render_push``; static/koruweb/live/live.js, ``reload``).
"""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Page, expect

from activity.models import Chat
from activity.review.reads import LIVE_ROWS
from tests import frames
from tests.browser.helpers import (
    DROP,
    TRACK_SOCKETS,
    Live,
    Team,
    open_chat,
    row_of,
    screenshot,
    set_visibility,
    sign_in,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]


def read(seq: int, n: int) -> dict:
    return frames.tool_call(seq, f"call_{n}", f"Read src/module_{n}.py", kind="read")


def test_a_page_back_after_more_calls_than_it_shows_fetches_its_page_and_is_live_again(
    page: Page, live: Live, team: Team, runner: Runner
):
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()), *(read(n + 1, n) for n in (1, 2))
    )
    page.context.add_init_script(TRACK_SOCKETS)
    sign_in(page, team.viewer)
    open_chat(page, live, runner.chat_id)
    expect(page.locator("tr.tool")).to_have_count(2)
    asked = len(live.sockets)

    assert page.evaluate(DROP) == 1  # the socket goes down; the page waits to be shown again
    missed = LIVE_ROWS + 20
    runner.send(*(read(n + 1, n) for n in range(3, 3 + missed)))
    set_visibility(page, hidden=False)

    version = Chat.objects.get(pk=runner.chat_id).version
    expect(page.locator("#live")).to_have_attribute("data-version", str(version), timeout=15_000)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    rows = page.locator("tr.tool")
    expect(rows).to_have_count(LIVE_ROWS)  # the page a fresh load draws, not every call missed
    newest = row_of(runner, f"call_{2 + missed}")
    expect(page.locator(f"#tool-{newest.id}")).to_be_visible()
    expect(page.locator(f"#tool-{row_of(runner, 'call_1').id}")).to_have_count(0)
    expect(page.get_by_text(f"{missed + 2 - LIVE_ROWS} earlier calls")).to_be_visible()
    # it asked on its new socket and was told to fetch the page, not sent the calls
    back = live.sockets[asked:]
    heard = [text for socket in back for text in socket.received]
    assert any('"reload": true' in text for text in heard), heard
    assert not any(f"call_{2 + missed}" in text or "module_" in text for text in heard)
    screenshot(page, "catch-up-after-away")
