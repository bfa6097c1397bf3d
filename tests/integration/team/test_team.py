"""Team mode stays up (issue 15): two Daphne processes on PostgreSQL and Redis behind a proxy,
real runners and a real browser, and the faults a team meets — a process killed mid-burst,
sockets left idle, a runner killed, database sessions ended, Redis restarted.

What is checked is what people rely on: what the pages, the inbox and the run's export say, that
a page open through it all shows what a fresh one would without being reloaded, that the runner
hears the answers. The fixtures (conftest.py) start the team once for the module.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from playwright.sync_api import Page, expect
from websockets.exceptions import ConnectionClosed

from tests.browser.helpers import open_chat, reload_marker, watch
from tests.integration.team.helpers import (
    APPROVER,
    PASSWORD,
    SDK_AGENT,
    ChatPage,
    Typed,
    Viewer,
    Visitor,
    finished,
    kill_runner,
    raw,
    sdk,
    until,
)
from tests.integration.team.services import (
    GRACE,
    HEARTBEAT,
    REDIS_SOCKET_TIMEOUT,
    VAPID,
    Server,
    Team,
)
from tests.notify.pushservice import b64, running, vapid_claims

BURST = 2000  # raw_agent's updates after its permission: 20 calls, 100 updates each
BURST_CALLS = 20
PAGE_TIMEOUT = 20_000  # ms: a page converges within this, however loaded the machine


# --- what the tests share -----------------------------------------------------------------------


def log_in(page: Page) -> None:
    """Through the server's login page, as a person does."""
    page.goto("/accounts/login/?next=/")
    page.get_by_label("Username").fill(APPROVER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def signed_in(team: Team, page: Page, server: Server) -> Page:
    """``page`` with the session the team's visitor logged in with (through the proxy)."""
    session = team.visitor.cookie("sessionid")
    page.context.add_cookies([{"name": "sessionid", "value": session, "url": server.url}])
    return page


def watching(page: Page, chat_id: uuid.UUID) -> Any:
    """Open the chat page, live; returns the check that it was never reloaded since."""
    live = watch(page)
    open_chat(page, live, chat_id)
    return reload_marker(page)


def expect_page_equals_a_fresh_one(page: Page, team: Team, chat_id: uuid.UUID) -> None:
    """The open page shows what the server renders now: its version, every row in order with
    its status and approval, the replies."""
    server = page.url.split("/chats/")[0]
    fresh = team.visitor.chat(chat_id, server)
    export = team.visitor.export(chat_id, server)
    expect(page.locator("#live")).to_have_attribute(
        "data-version", str(fresh.version), timeout=PAGE_TIMEOUT
    )
    expect(page.locator("tr.tool")).to_have_count(len(export), timeout=PAGE_TIMEOUT)
    shown = page.locator("tr.tool").evaluate_all(
        """rows => rows.map(r => [r.id, [...r.classList].filter(
            c => c.startsWith("status-") || c.startsWith("approval-")).join(" ")])"""
    )
    assert shown == [
        [f"tool-{row['id']}", f"status-{row['status']} approval-{row['approval']}"]
        for row in export
    ]
    replies = page.locator("article.reply").evaluate_all(
        """replies => replies.map(r => [...r.querySelectorAll(".reply-part:not([hidden])")]
            .map(part => part.innerText.trim()).join("\\n"))"""
    )
    assert replies == fresh.replies


def expect_raw_run_whole(export: list[dict[str, Any]], chat: ChatPage, burst: int) -> None:
    """What tests/agents/raw_agent.py's turn leaves, allowed once, with nothing lost or doubled:
    its four odd calls, every burst call at its last step, one turn ended, one reply."""
    by_label = {row["agent_label"]: row for row in export}
    assert len(export) == 4 + BURST_CALLS, [row["agent_label"] for row in export]
    assert by_label["Orphan update"]["status"] == "completed"
    weird = by_label["Unknown kind and status"]
    assert (weird["tool_name"], weird["status"]) == ("teleport", "proposed")
    assert by_label[None]["tool_name"] == "execute"  # the untitled call
    assert by_label["Delete build/"]["approval"] == "approved"
    last_step = f"step {burst // BURST_CALLS - 1}"
    for n in range(BURST_CALLS):
        call = by_label[f"Burst call {n:02d}"]
        assert (call["status"], call["agent_output"]) == ("completed", last_step), call
    assert chat.turns == ["Finished"], chat
    assert chat.replies == ["Permission outcome: allow-once"], chat  # doubled by a frame twice


def at_once(visitor: Visitor, pages: list[str], base: str | None = None) -> list[tuple[str, int]]:
    """Each page loaded by a person of its own, all at the same time (through the proxy, or on
    ``base``): what each answered."""
    with ThreadPoolExecutor(len(pages)) as people:
        return list(people.map(lambda path: (path, visitor.get(path, base).status), pages))


def burst_under_way(team: Team, chat_id: uuid.UUID, server: Server) -> bool:
    """The burst's first calls are in (the four odd calls come before it)."""
    return len(team.visitor.export(chat_id, server.url)) > 4


# --- the tests ----------------------------------------------------------------------------------


def test_a_browser_on_b_watches_a_runner_on_a_live_and_answers_it(team, new_page):
    page = new_page(team.b.url)
    log_in(page)
    run = Typed(team.a.ws_url, team.token, SDK_AGENT)
    same_page = watching(page, run.chat_id)
    expect(page.locator("section.turn")).to_have_count(0)  # nobody has typed a prompt yet
    run.prompt("permission")

    asking = page.locator("tr.tool", has_text="Run echo hello")
    allow = asking.get_by_role("button", name="Allow once")
    expect(allow).to_be_visible(timeout=PAGE_TIMEOUT)
    allow.click()
    expect(asking).to_have_class(re.compile(r"\bstatus-completed\b"), timeout=PAGE_TIMEOUT)
    expect(asking).to_have_class(re.compile(r"\bapproval-approved\b"))
    expect(asking.locator(".decision")).to_contain_text(f"by {APPROVER}")  # who answered
    expect(page.locator("article.reply .markdown").last).to_have_text(
        "Permission outcome: allow-once", timeout=PAGE_TIMEOUT
    )
    finished(run)
    expect_page_equals_a_fresh_one(page, team, run.chat_id)
    assert same_page(), "the page was reloaded"


def test_a_server_killed_mid_burst_hands_its_runner_to_the_other_and_nothing_is_lost_or_doubled(
    team, new_page
):
    run = raw(team.proxy.ws_url, team.token, BURST)
    holder: Server = until(
        "the runner's socket is on one of the servers",
        lambda: next((s for s in team.servers if s.agent_sockets() > 0), None),
    )
    survivor = team.other(holder)
    page = signed_in(team, new_page(survivor.url), survivor)
    same_page = watching(page, run.chat_id)
    allow = page.get_by_role("button", name="Allow once")
    expect(allow).to_be_visible(timeout=PAGE_TIMEOUT)
    allow.click()  # on the survivor: the answer crosses to the runner's server
    until("the burst is under way", lambda: burst_under_way(team, run.chat_id, survivor), 20, 0.02)
    assert run.process.poll() is None, "the runner finished before its server was killed"
    holder.kill()  # mid-burst: some frames committed, some in flight, some not yet sent

    err = finished(run)
    assert "lost the server" in err, err
    assert survivor.agent_sockets(opened=True) > 0, "it came back through the proxy, to the other"
    chat = team.visitor.chat(run.chat_id, survivor.url)
    expect_raw_run_whole(team.visitor.export(run.chat_id, survivor.url), chat, BURST)
    expect_page_equals_a_fresh_one(page, team, run.chat_id)
    assert same_page(), "the page was reloaded"


def test_sockets_idle_longer_than_the_redis_timeouts_stay_up(team):
    run = sdk(team.a.ws_url, team.token, "permission")
    prompt: str = until(
        "the prompt is open", lambda: team.visitor.chat(run.chat_id, team.b.url).awaiting
    )[0]
    with Viewer(team.b.ws_url, team.b.url, team.visitor, run.chat_id) as viewer:
        viewer.drain()  # the catch-up: the page is now where the server is
        idle = 3.5 * REDIS_SOCKET_TIMEOUT
        deadline = time.monotonic() + idle
        try:
            while (left := deadline - time.monotonic()) > 0:
                viewer.receive(left)
        except ConnectionClosed as closed:
            raise AssertionError(f"the idle viewer's socket was closed: {closed}") from None
        version = viewer.version

        answered = team.visitor.answer(prompt, "o0", team.b.url)  # "Allow once"
        assert answered.status == 200, answered
        until("the viewer's next push", lambda: viewer.receive(1) and viewer.version > version)
    err = finished(run)
    assert "lost the server" not in err, err
    chat = team.visitor.chat(run.chat_id, team.b.url)
    assert chat.turns == ["Finished"] and chat.replies == ["Permission outcome: allow-once"]
    problems = [f"{s.name}: {line}" for s in team.servers for line in s.problems()]
    assert not problems, "\n".join(problems) + "\n" + team.logs()


def test_a_runner_killed_at_a_random_moment_shows_offline_then_its_turn_ends_runner_lost(team):
    run = sdk(team.proxy.ws_url, team.token, "permission")
    visitor = team.visitor
    prompt: str = until("the prompt is open", lambda: visitor.chat(run.chat_id).awaiting)[0]
    assert prompt in visitor.inbox()
    assert visitor.chat(run.chat_id).runner == "online"
    moment = random.uniform(0, 2 * HEARTBEAT)  # anywhere in the heartbeat's cycle
    time.sleep(moment)
    kill_runner(run)

    offline: ChatPage = until(
        f"the runner killed {moment:.2f} s into its prompt shown offline",
        lambda: (chat := visitor.chat(run.chat_id)).runner == "offline" and chat,
        within=GRACE + 2,  # a bound on the wait; what proves "within the grace period" is next
    )
    # Still running: shown offline before the grace period was over, not found by a sweep
    # after it (which would end the turn at the same moment).
    assert offline.turns == ["Running"], offline
    ended: ChatPage = until(
        "its turn ended after the grace period",
        lambda: (chat := visitor.chat(run.chat_id)).turns != ["Running"] and chat,
        within=GRACE + 10,
    )
    assert ended.turns == ["Runner lost"]
    assert ended.runner == "offline" and not ended.awaiting
    assert prompt not in visitor.inbox()
    (row,) = visitor.export(run.chat_id)
    assert row["approval"] == "cancelled" and row["live"] is None, row


def test_redis_restarted_mid_turn_loses_nothing_and_pages_and_answers_go_on(team, new_page):
    burst = 400
    run = raw(team.a.ws_url, team.token, burst)  # the runner on A, the page on B
    page = signed_in(team, new_page(team.b.url), team.b)
    same_page = watching(page, run.chat_id)
    allow = page.get_by_role("button", name="Allow once")
    expect(allow).to_be_visible(timeout=PAGE_TIMEOUT)

    team.redis.kill()  # every channel, group and queued message is gone with it
    team.redis.start()
    allow.click()  # on B, after the restart: it must reach the runner on A
    err = finished(run)
    chat = team.visitor.chat(run.chat_id, team.b.url)
    expect_raw_run_whole(team.visitor.export(run.chat_id, team.b.url), chat, burst)
    expect_page_equals_a_fresh_one(page, team, run.chat_id)
    assert same_page(), f"the page was reloaded\n{err}"


# The database's faults last: a server whose pooled connections were ended can stay slow for
# a while after (see the busy server's test), which would blur the tests that come after them.


def test_a_busy_server_answers_the_next_pages_after_its_database_sessions_end(team):
    """Eight people on B at once leave B's pool its eight connections; the database ends them
    all (a failover, an administrator); the people who come next, one after another, get their
    pages."""
    pages = ["/", "/inbox/", "/search/?q=echo", "/workspaces/"] * 2
    assert at_once(team.visitor, pages, team.b.url) == [(path, 200) for path in pages]
    assert team.database.terminate_sessions() > 0
    loads = [(path, team.visitor.get(path, team.b.url).status) for path in pages]
    assert loads == [(path, 200) for path in pages], team.logs()


def test_database_sessions_ended_mid_burst_lose_nothing_and_no_page_fails(team):
    visitor = team.visitor
    run = raw(team.proxy.ws_url, team.token, BURST)
    prompt: str = until("the prompt is open", lambda: visitor.chat(run.chat_id).awaiting)[0]
    pages = [
        f"/chats/{run.chat_id}/",
        f"/api/chats/{run.chat_id}/tool-activity",
        "/",
        "/inbox/",
        f"/chats/{run.chat_id}/transcript.md",
    ]
    loads: list[tuple[str, int]] = []
    with Viewer(team.b.ws_url, team.b.url, visitor, run.chat_id) as viewer:  # a page open on B
        assert visitor.answer(prompt, "o0").status == 200  # "Allow once"
        until("the burst is under way", lambda: burst_under_way(team, run.chat_id, team.a))
        assert run.process.poll() is None, "the runner finished before the database was touched"
        for _ in range(3):  # during the burst
            assert team.database.terminate_sessions() > 0
            loads += at_once(visitor, pages)
        finished(run)
        loads += at_once(visitor, pages)  # and after it

        final = visitor.chat(run.chat_id, team.b.url).version
        until(
            f"the open page at the run's last version, {final}",
            lambda: viewer.drain(0.2) >= final,
        )
    failed = [load for load in loads if load[1] != 200]
    assert not failed, f"{len(failed)} of {len(loads)} page loads failed: {failed}\n{team.logs()}"
    expect_raw_run_whole(visitor.export(run.chat_id), visitor.chat(run.chat_id), BURST)


def test_each_browser_is_told_of_each_prompt_once_whichever_process_sees_it(team):
    """Both processes run a notifier (each has a runner); each notification goes out once."""
    with contextlib.ExitStack() as stack:
        service = stack.enter_context(contextlib.contextmanager(running)())
        phone = service.subscription()
        keys = {"p256dh": phone.p256dh, "auth": phone.auth}
        subscription = {"endpoint": phone.endpoint, "keys": keys}
        made = team.visitor.post_json("/notifications/devices", {"subscription": subscription})
        assert made.status == 201, made
        runs = [raw(team.a.ws_url, team.token, 0), raw(team.b.ws_url, team.token, 0)]
        for run in runs:
            stack.callback(kill_runner, run)

        def said() -> list[dict[str, Any]]:
            return [phone.read(push) for push in service.to(phone)]

        until("both prompts pushed", lambda: len(said()) >= 2, within=30)
        prompts = [s for s in said() if not s.get("settled")]
        assert len({s["tag"] for s in prompts}) == 2 and all(s["body"] for s in prompts)
        public = b64(VAPID.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint))
        assert all(vapid_claims(push, public) for push in service.to(phone))
        for prompt in prompts:  # answered on the page: each notification is replaced, once
            reject = prompt["actions"][-1]["action"]  # the agent's own option id
            answer = team.visitor.request(prompt["url"], {"choice": reject})
            assert answer.status in (200, 302), answer
        until("both replacements pushed", lambda: len(said()) >= 4, within=30)
        tags = sorted((s["tag"], bool(s.get("settled"))) for s in said())
        assert tags == sorted({(s["tag"], b) for s in prompts for b in (False, True)})
