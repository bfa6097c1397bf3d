"""What the browser tests share: the people, the page's live socket, and what a user sees.

The fixtures that build on these live in conftest.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, WebSocket, expect

from activity.models import Chat, Membership, Role, ToolActivity, Workspace
from activity.review.reads import with_prompts
from activity.show.statuses import call_status
from tests.browser.runner import Runner

PASSWORD = "correct horse battery staple"
RECONNECT_TIMEOUT = 15  # s: the page's socket backs off 0.5 s, 1 s, 2 s … between tries


SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
# The two sizes people look at: ``new_page(**DESKTOP)``, ``new_page(**PHONE)``.
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}


def screenshot(page: Page, name: str) -> Path:
    """What the person sees now, kept as var/screenshots/<name>.png for a person to look at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
    page.screenshot(path=path, full_page=True)
    return path


@cache
def password_hash() -> str:
    return make_password(PASSWORD)  # hashed once: PBKDF2 is slow on purpose


def member(workspace: Workspace, username: str, role: Role) -> User:
    """A person who logs in with ``PASSWORD`` and has ``role`` in ``workspace``."""
    user = User.objects.create(username=username, password=password_hash())
    Membership.objects.create(workspace=workspace, user=user, role=role)
    return user


@dataclass
class Team:
    workspace: Workspace
    viewer: User
    token: str


def answers_heard(runner: Runner, within: float = 5) -> list[dict[str, Any]]:
    """What the server told the runner to answer the agent: every ``answer`` frame that came
    within ``within`` seconds (acks are taken as they pass). Empty if none came."""
    assert runner.socket is not None, "connect first"
    heard = [m for m in runner.received if m.get("type") == "answer"]
    runner.received = [m for m in runner.received if m.get("type") != "answer"]
    deadline = time.monotonic() + within
    while not heard and time.monotonic() < deadline:
        try:
            message = runner.socket.receive_json(timeout=max(0.05, deadline - time.monotonic()))
        except TimeoutError:
            break
        if message.get("type") == "ack":
            runner._acknowledged(message["seq"])
        elif message.get("type") == "answer":
            heard.append(message)
        else:
            runner.received.append(message)
    return heard


def answer_heard(runner: Runner, within: float = 5) -> dict[str, Any]:
    """The one answer the runner was sent."""
    heard = answers_heard(runner, within)
    assert len(heard) == 1, f"the runner was sent {len(heard)} answers: {heard}"
    return heard[0]


# --- the page's live socket ------------------------------------------------------------------


@dataclass
class Socket:
    ws: WebSocket
    received: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    closed: bool = False


@dataclass
class Live:
    """A page's sockets to ``path`` (the chat's by default), as the browser opened them."""

    page: Page
    path: str = "/ws/chats/"
    sockets: list[Socket] = field(default_factory=list)

    def watch(self, ws: WebSocket) -> None:
        if self.path not in ws.url:
            return
        socket = Socket(ws)
        ws.on("framereceived", lambda payload: socket.received.append(str(payload)))
        ws.on("framesent", lambda payload: socket.sent.append(str(payload)))
        ws.on("close", lambda _: setattr(socket, "closed", True))
        self.sockets.append(socket)

    def until(self, what: str, ready: Callable[[], bool], timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting until {what}; sockets: {self.sockets}")
            self.page.wait_for_timeout(25)  # lets Playwright deliver its events

    def connected(self, timeout: float = 10) -> None:
        """Until an open socket has said something: the chat's answered the page's resync,
        the inbox's sent its first list; either way the server put it in its groups."""
        self.until(
            "the page's socket is live",
            lambda: (
                bool(self.sockets)
                and not self.sockets[-1].closed
                and bool(self.sockets[-1].received)
            ),
            timeout,
        )

    def disconnected(self) -> None:
        # The sockets the page talks on now: not those of a page navigated away from (their
        # close may never be reported), nor reconnect attempts that come and go.
        talking = [s for s in self.sockets if s.sent and not s.closed]
        self.until("the page's socket closed", lambda: all(s.closed for s in talking))


def watch(page: Page, path: str = "/ws/chats/") -> Live:
    """Watch ``page``'s sockets to ``path`` from now on."""
    watcher = Live(page, path)
    page.on("websocket", watcher.watch)
    return watcher


# --- what a person does and sees -------------------------------------------------------------


def log_in(page: Page, user: User, then: str = "/") -> None:
    """Through the real login page, then on to ``then``."""
    page.goto(f"/accounts/login/?next={then}")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def sign_in(page: Page, user: User) -> None:
    """Logged in without the login page, whose password check costs a second a person: a
    session as Django's test client makes one, its cookie in this browser. The child server
    shares the database and the secret key, so it is a session like any other."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": cookie,
                "domain": "127.0.0.1",
                "path": "/",
            }
        ]
    )


def open_chat(page: Page, live: Live, chat_id: uuid.UUID) -> None:
    """Open the chat page and wait until it is live: socket open, its resync answered."""
    if not page.url.split("#")[0].endswith(f"/chats/{chat_id}/"):
        page.goto(f"/chats/{chat_id}/")
    # A live page asks at once, on its socket, for what changed since it was rendered.
    live.until("the page asked", lambda: bool(live.sockets and live.sockets[-1].sent))
    live.connected()


def badge(page: Page, row: ToolActivity) -> Any:
    return page.locator(f"#tool-{row.id} td.status .badge")


def row_of(runner: Runner, call_id: str) -> ToolActivity:
    return ToolActivity.objects.get(chat_id=runner.chat_id, tool_call_id=call_id)


def expect_screen_equals_database(page: Page, chat_id: uuid.UUID, timeout: float = 5_000) -> None:
    """Every tool row the database has, in order, with its status; nothing else; same version."""
    chat = Chat.objects.get(pk=chat_id)
    rows = with_prompts(list(ToolActivity.objects.filter(chat_id=chat_id).order_by("position")))
    expect(page.locator("#live")).to_have_attribute(
        "data-version", str(chat.version), timeout=timeout
    )
    expect(page.locator("tr.tool")).to_have_count(len(rows), timeout=timeout)
    mine = page.locator(".answering").get_attribute("data-can-answer") == "true"
    for row in rows:
        said = call_status(row).said(mine)
        expect(badge(page, row)).to_have_text(said, timeout=timeout, use_inner_text=True)
    shown = page.locator("tr.tool").evaluate_all(
        "rows => rows.map(r => [r.id, r.querySelector('td.status .badge').innerText.trim()])"
    )
    assert shown == [[f"tool-{r.id}", call_status(r).said(mine)] for r in rows]


def reload_marker(page: Page) -> Callable[[], bool]:
    """Marks the document; the returned check is false once the page was reloaded."""
    page.evaluate("() => { document.body.dataset.sameDocument = 'yes' }")
    return lambda: page.evaluate("() => document.body.dataset.sameDocument === 'yes'")


def set_visibility(page: Page, hidden: bool) -> None:
    """What switching to another tab and back does to a page (headless pages stay visible)."""
    page.evaluate(
        """(hidden) => {
          Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
          Object.defineProperty(document, "visibilityState",
            {configurable: true, get: () => hidden ? "hidden" : "visible"});
          document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


# A page's sockets, so a test can drop one as a network would (init script: before htmx).
TRACK_SOCKETS = """(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.__sockets.push(this); }
  };
})()"""
# A page that seems hidden waits until it is shown to connect again (hx-ws's
# pauseOnBackground): set_visibility(page, hidden=False) brings it back.
DROP = """() => {
  Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
  return window.__sockets
    .filter((s) => s.url.includes("/ws/chats/") && s.readyState === WebSocket.OPEN)
    .map((s) => s.close()).length;
}"""
