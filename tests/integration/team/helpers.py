"""What the team tests see and do, as people and runners do: pages, exports and answers over
HTTP, a page's live socket, runners started and killed. Nothing here reads the team's database
through the ORM: this process is on a test database of its own (conftest.py)."""

from __future__ import annotations

import contextlib
import html
import json
import os
import queue
import re
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.integration.test_runner import AGENTS, Run

PASSWORD = "correct horse battery staple"
APPROVER = "alice"  # approver of workspace acme in the team's database (services.seed)
SDK_AGENT = [sys.executable, str(AGENTS / "sdk_agent.py")]


# --- runners ------------------------------------------------------------------------------------


def sdk(server_ws_url: str, token: str, *prompts: str) -> Run:
    """``manage.py agent`` with tests/agents/sdk_agent.py, one turn a prompt (its script)."""
    flags = [flag for prompt in prompts for flag in ("--prompt", prompt)]
    return Run(server_ws_url, token, SDK_AGENT, *flags)


class Typed(Run):
    """``manage.py agent`` reading its prompts from standard input, as a person types them:
    nothing until the test calls ``prompt``; the runner is on its server (its chat made) before."""

    def __init__(self, server_ws_url: str, token: str, agent: list[str]) -> None:
        self.typed: queue.Queue[str] = queue.Queue()
        super().__init__(server_ws_url, token, agent, stdin="")

    def prompt(self, *lines: str) -> None:
        """Type these prompts, one a line, then end the input (Ctrl-D)."""
        self.typed.put("".join(f"{line}\n" for line in lines))

    def type(self, text: str) -> None:  # the typist thread: waits for ``prompt``
        try:
            text = self.typed.get(timeout=120)
        except queue.Empty:
            text = ""
        super().type(text)


def raw(server_ws_url: str, token: str, burst: int) -> Run:
    """``manage.py agent`` with tests/agents/raw_agent.py: a permission, then ``burst`` updates."""
    agent = [sys.executable, str(AGENTS / "raw_agent.py"), "--burst", str(burst)]
    return Run(server_ws_url, token, agent, "--prompt", "go")


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux), e.g. a runner's agent."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
    except OSError:
        pass
    return found


def kill_runner(run: Run) -> None:
    """SIGKILL of the runner and its agent together, as when their machine dies."""
    agents = children(run.process.pid)
    run.process.send_signal(signal.SIGKILL)
    for agent in agents:
        with contextlib.suppress(ProcessLookupError):  # it died with the runner
            os.kill(agent, signal.SIGKILL)
    run.process.wait(10)


def finished(run: Run, within: float = 60) -> str:
    """The runner's standard error once it has exited 0 (every turn ended, every frame kept)."""
    code, err = run.finish(within)
    assert code == 0, f"the runner exited {code}:\n{err}"
    return err


# --- waiting ------------------------------------------------------------------------------------


def until(what: str, check: Callable[[], Any], within: float = 20, every: float = 0.1) -> Any:
    """``check()``'s first truthy value; fails saying ``what`` never came, and what was seen."""
    deadline = time.monotonic() + within
    seen: Any = None
    while True:
        seen = check()
        if seen:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: never came within {within} s (last seen: {seen!r})")
        time.sleep(every)


# --- a person over HTTP -------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    text: str


@dataclass
class ChatPage:
    """What a chat page says, read from its HTML as a person reads it."""

    version: int
    runner: str  # "online" or "offline"
    turns: list[str]  # per turn, its status as the page says it: "Running", "Finished", …
    awaiting: list[str]  # the ids of the prompts with an answer form
    replies: list[str]  # per reply, its text

    @classmethod
    def parse(cls, text: str) -> ChatPage:
        version = re.search(r'id="live"[^>]*data-version="(\d+)"', text)
        runner = re.search(r'data-runner="(online|offline)"', text)
        assert version and runner, f"not a chat page:\n{text[:2000]}"
        head = r'<p class="turn-status">\s*<span class="badge [\w-]+"[^>]*>([^<]*)</span>'
        turns = re.findall(head, text)
        awaiting = re.findall(r'<form class="answer" method="post" action="/prompts/([^/]+)/', text)
        replies = [  # a reply's text parts, between its calls (parts.html, reply)
            "\n".join(
                words
                for part in re.findall(
                    r'<div class="markdown reply-part"[^>]*>(.*?)</div>', body, re.S
                )
                if (words := html.unescape(re.sub(r"<[^>]+>", "", part)).strip())
            )
            for body in re.findall(r'<article class="reply"[^>]*>(.*?)</article>', text, re.S)
        ]
        return cls(int(version.group(1)), runner.group(1), turns, awaiting, replies)


class Visitor:
    """A person's HTTP client (cookies kept) on any of the team's addresses."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def url(self, path: str, base: str | None = None) -> str:
        return path if "://" in path else (base or self.base) + path

    def request(
        self, path: str, data: dict[str, str] | None = None, base: str | None = None
    ) -> Answer:
        body = None if data is None else urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(self.url(path, base), data=body)
        if data is not None:
            request.add_header("X-CSRFToken", self.cookie("csrftoken"))
        return self.open(request)

    def post_json(self, path: str, payload: Any, base: str | None = None) -> Answer:
        request = urllib.request.Request(self.url(path, base), data=json.dumps(payload).encode())
        request.add_header("Content-Type", "application/json")
        request.add_header("X-CSRFToken", self.cookie("csrftoken"))
        return self.open(request)

    def open(self, request: urllib.request.Request) -> Answer:
        try:
            with self.opener.open(request, timeout=20) as answer:
                return Answer(answer.status, answer.read().decode())
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.read().decode(errors="replace"))

    def get(self, path: str, base: str | None = None) -> Answer:
        return self.request(path, base=base)

    def cookie(self, name: str) -> str:
        return next((c.value or "" for c in self.jar if c.name == name), "")

    def log_in(self, username: str = APPROVER, password: str = PASSWORD) -> None:
        """Through the login page, as a person does."""
        form = self.get("/accounts/login/")
        assert form.status == 200, form
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, form.text[:2000]
        fields = {"username": username, "password": password, "csrfmiddlewaretoken": token[1]}
        answer = self.request("/accounts/login/", fields)
        assert answer.status == 200 and "Log out" in answer.text, answer.text[:2000]

    def chat(self, chat_id: uuid.UUID, base: str | None = None) -> ChatPage:
        answer = self.get(f"/chats/{chat_id}/", base)
        assert answer.status == 200, f"the chat page answered {answer.status}:\n{answer.text}"
        return ChatPage.parse(answer.text)

    def export(self, chat_id: uuid.UUID, base: str | None = None) -> list[dict[str, Any]]:
        """The run's contract JSON (``GET /api/chats/<id>/tool-activity``), in page order."""
        answer = self.get(f"/api/chats/{chat_id}/tool-activity", base)
        assert answer.status == 200, f"the export answered {answer.status}:\n{answer.text}"
        rows: list[dict[str, Any]] = json.loads(answer.text)
        return rows

    def inbox(self, base: str | None = None) -> list[str]:
        """The ids of the prompts waiting in the inbox."""
        answer = self.get("/inbox/", base)
        assert answer.status == 200, f"the inbox answered {answer.status}:\n{answer.text}"
        return re.findall(r'data-prompt-id="([^"]+)"', answer.text)

    def answer(self, prompt_id: str, choice: str, base: str | None = None) -> Answer:
        """Answer a permission prompt with its form (the page's button, without JavaScript)."""
        return self.request(f"/prompts/{prompt_id}/answer", {"choice": choice}, base)


# --- a page's live socket, without a browser ----------------------------------------------------


class Viewer:
    """A chat page's socket (``/ws/chats/<id>/``) as live.js drives it: it says which version it
    shows and applies every push that starts there. Its session is ``visitor``'s cookie. Open
    while in a ``with`` block."""

    def __init__(self, ws_url: str, origin: str, visitor: Visitor, chat_id: uuid.UUID) -> None:
        self.version = visitor.chat(chat_id, origin).version
        headers = {"Cookie": f"sessionid={visitor.cookie('sessionid')}", "Origin": origin}
        self.connection = connect(
            f"{ws_url}/ws/chats/{chat_id}/", additional_headers=headers, open_timeout=10
        )
        self.pushes: list[dict[str, Any]] = []

    def __enter__(self) -> Viewer:
        self.socket: ClientConnection = self.connection.__enter__()
        self.socket.send(json.dumps({"since": self.version}))
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.__exit__(None, None, None)

    def receive(self, within: float) -> dict[str, Any] | None:
        """The next push (None if none came within ``within`` s); a closed socket raises
        ``websockets.exceptions.ConnectionClosed``."""
        try:
            push: dict[str, Any] = json.loads(self.socket.recv(within))
        except TimeoutError:
            return None
        self.pushes.append(push)
        if push.get("from") == self.version:
            if push.get("part", 1) == push.get("parts", 1):  # a whole change, or its last part
                self.version = push["to"]
        elif push.get("to", 0) > self.version:
            self.socket.send(json.dumps({"since": self.version}))  # a gap: ask, as a page does
        return push

    def drain(self, within: float = 0.5) -> int:
        """Take what has come, until the socket is quiet for ``within`` s; the version now."""
        while self.receive(within) is not None:
            pass
        return self.version
