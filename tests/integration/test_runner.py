"""The real runner and the real server, with the project's own ACP agents (tests/agents/)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer
from django.db.models import QuerySet
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from activity.core import groups
from activity.live.answers import send_answer
from activity.models import AgentToken, Chat, InferenceAttempt, Prompt, ToolActivity, Workspace
from tests import frames
from tests.liveserver import BASE_DIR, REDIS_URL, Server, child_env

pytestmark = pytest.mark.django_db(transaction=True)
AGENTS = BASE_DIR / "tests" / "agents"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def token() -> str:
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    return AgentToken.issue(workspace, "ci")[1]


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_runner_outlives_its_test() -> Iterator[None]:
    """A failed test leaves no runner reconnecting to a server that is gone."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(10)


class Run:
    """``python manage.py agent … -- AGENT`` in a child process."""

    def __init__(
        self, server: str, token: str, agent: list[str], *flags: str, stdin: str | None = None
    ) -> None:
        """``stdin``: the prompts, one a line, as a person types them (no ``--prompt``)."""
        command = [sys.executable, "manage.py", "agent", "--server", server, "--token", token]
        command += [*flags, "--", *agent]
        self.process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=child_env(KORUWEB_DEMO_FAST="1"),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        STARTED.append(self.process)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"/chats/([0-9a-f-]{36})/", line)
        # The page's address, printed once the server has the chat (none if it never does).
        self.chat_id = uuid.UUID(found.group(1)) if found else uuid.UUID(int=0)
        self.typist: threading.Thread | None = None
        if stdin is not None:  # written aside: a runner that never reads it blocks no test
            self.typist = threading.Thread(target=self.type, args=(stdin,), daemon=True)
            self.typist.start()

    def type(self, text: str) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ValueError):  # a runner that already stopped
            self.process.stdin.write(text)
            self.process.stdin.close()

    def finish(self, within: float = 30) -> tuple[int, str]:
        if self.typist is not None:
            self.typist.join(within)
            if self.typist.is_alive():
                self.process.kill()  # it never read its prompts; the write then fails
                self.typist.join()
            self.process.stdin = None  # closed by the typist
        try:
            _, err = self.process.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
            raise AssertionError(f"the runner did not finish within {within} s:\n{err}") from None
        return self.process.returncode, err


def sdk(script: str, server: Server, token: str, *flags: str) -> Run:
    agent = [sys.executable, str(AGENTS / "sdk_agent.py")]
    return Run(server.ws_url, token, agent, "--prompt", script, *flags)


def eventually[T](check: Callable[[], T | None], within: float = 15) -> T:
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("the expected state never came")
        time.sleep(0.05)


def answer(chat_id: uuid.UUID, request_id: str | int, outcome: dict[str, Any]) -> None:
    """Answer as the web does: through the channel layer to the runner's socket."""

    async def send() -> None:
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        try:
            await send_answer(chat_id, request_id, outcome, layer=layer)
        finally:
            await layer.close_pools()

    asyncio.run(send())


def open_prompt(chat_id: uuid.UUID) -> Prompt:
    return eventually(lambda: Prompt.objects.filter(chat_id=chat_id, closed_at=None).first())


def last_turn(chat_id: uuid.UUID) -> InferenceAttempt:
    turn = Chat.objects.get(pk=chat_id).current_attempt
    assert turn is not None
    return turn


def rows(chat_id: uuid.UUID) -> dict[str, ToolActivity]:
    return {r.tool_call_id: r for r in ToolActivity.objects.filter(chat_id=chat_id)}


def test_a_turn_of_the_sdk_agent_becomes_rows_a_plan_and_a_reply(server, token):
    run = sdk("basic", server, token, "--title", "Basic run")
    code, err = run.finish()
    assert code == 0, err
    chat = Chat.objects.get(pk=run.chat_id)
    assert chat.title == "Basic run" and chat.agent_name
    turn = chat.current_attempt
    assert turn is not None and turn.stop_reason == "end_turn" and turn.prompt == "basic"
    assert [e["status"] for e in turn.plan] == ["completed", "completed"]
    assert turn.reply.markdown == "Done: edited notes.txt."
    got = rows(chat.pk)
    assert list(got) == ["t1-read", "t1-edit"]
    read, edit = got["t1-read"], got["t1-edit"]
    assert read.status == "completed" and read.read_only and read.agent_output == "hello\n"
    assert edit.status == "completed" and edit.started_at is not None
    assert edit.agent_output is not None
    assert "-hello" in edit.agent_output and "+hello, world" in edit.agent_output
    assert edit.started_at is not None and edit.completed_at is not None
    assert edit.proposed_at <= edit.started_at <= edit.completed_at


@pytest.mark.parametrize(
    ("choice", "heard", "status", "approval"),
    [("o0", "allow-once", "completed", "approved"), ("o1", "reject", "failed", "denied")],
)
def test_a_permission_waits_for_the_web_and_the_agent_goes_on(
    server, token, choice, heard, status, approval
):
    run = sdk("permission", server, token)
    prompt = open_prompt(run.chat_id)
    # The runner's ids for the agent's options, in its order (activity/runner/ids.py).
    assert [(c["id"], c["label"]) for c in prompt.choices] == [
        ("o0", "Allow once"),
        ("o1", "Reject"),
    ]
    answer(run.chat_id, prompt.jsonrpc_id, {"outcome": "selected", "optionId": choice})
    code, err = run.finish()
    assert code == 0, err
    row = ToolActivity.objects.get(chat_id=run.chat_id)
    assert (row.status, row.approval) == (status, approval)
    if approval == "denied":
        assert row.error_code == "permission_denied"
    prompt.refresh_from_db()
    assert prompt.outcome == approval and prompt.closed_at is not None
    assert last_turn(run.chat_id).reply.markdown == f"Permission outcome: {heard}"


def test_a_question_is_answered_with_free_text_in_its_other_box(server, token):
    run = sdk("question", server, token)
    prompt = open_prompt(run.chat_id)
    assert prompt.kind == "question" and prompt.questions[0]["allow_other"]
    content = {"question_0": "Postgres", "question_0_custom": "with pgvector"}
    answer(run.chat_id, prompt.jsonrpc_id, {"action": "accept", "content": content})
    code, err = run.finish()
    assert code == 0, err
    row = ToolActivity.objects.get(chat_id=run.chat_id)
    assert row.tool_name == "AskUserQuestion" and row.status == "completed"
    assert row.agent_label == "Which database should I use?"
    assert row.agent_output == "Database: Postgres (with pgvector)"
    prompt.refresh_from_db()
    assert prompt.outcome == "approved"


def raw_expectations(chat_id: uuid.UUID) -> None:
    """What tests/agents/raw_agent.py's turn must leave, by the merge rules."""
    got = rows(chat_id)
    assert len(got) == 4 + 20
    orphan = got["r1-orphan"]
    assert not orphan.opened and orphan.status == "completed"
    assert orphan.agent_label == "Orphan update"
    weird = got["r1-weird"]
    assert (weird.agent_kind, weird.agent_status, weird.status) == (
        "teleport",
        "paused",
        "proposed",
    )
    assert weird.tool_name == "teleport"
    untitled = got["r1-untitled"]
    assert untitled.agent_label is None and untitled.tool_name == "execute"
    asked = got["r1-perm"]
    assert asked.approval == "approved" and not asked.opened
    for n in range(20):
        burst = got[f"r1-burst-{n:02d}"]
        assert burst.status == "completed" and burst.agent_output == "step 99"
        assert burst.agent_label == f"Burst call {n:02d}"
    assert last_turn(chat_id).stop_reason == "end_turn"
    assert last_turn(chat_id).reply.markdown == "Permission outcome: allow-once"


def raw_run(server: Server, token: str) -> Run:
    agent = [sys.executable, str(AGENTS / "raw_agent.py")]
    return Run(server.ws_url, token, agent, "--prompt", "go")


def test_the_raw_agents_quirks_and_a_two_thousand_update_burst_land_as_the_rules_say(server, token):
    run = raw_run(server, token)
    prompt = open_prompt(run.chat_id)
    answer(run.chat_id, prompt.jsonrpc_id, {"outcome": "selected", "optionId": "o0"})
    code, err = run.finish()
    assert code == 0, err
    raw_expectations(run.chat_id)


def test_a_server_killed_mid_turn_loses_nothing_and_doubles_nothing(server, token):
    run = raw_run(server, token)
    prompt = open_prompt(run.chat_id)
    answer(run.chat_id, prompt.jsonrpc_id, {"outcome": "selected", "optionId": "o0"})
    eventually(lambda: ToolActivity.objects.filter(chat_id=run.chat_id).count() > 4, within=10)
    server.kill()  # mid-burst: some frames committed, some in flight, some not yet sent
    time.sleep(0.5)
    server.start()
    code, err = run.finish()
    assert code == 0, err
    raw_expectations(run.chat_id)


def test_ctrl_c_cancels_the_running_turn(server, token):
    run = sdk("slow", server, token)
    eventually(lambda: ToolActivity.objects.filter(chat_id=run.chat_id).exists())
    run.process.send_signal(signal.SIGINT)
    code, err = run.finish()
    assert code == 0, err
    assert last_turn(run.chat_id).stop_reason == "cancelled"
    row = ToolActivity.objects.get(chat_id=run.chat_id)
    assert row.status in {"cancelled", "failed"} and row.error_code == "cancelled"


def equals(found: QuerySet[Any], count: int) -> bool:
    return found.count() == count


def test_ctrl_c_in_a_later_turn_cancels_that_turn_and_the_runner_goes_on(server, token):
    """Each turn's first Ctrl-C cancels it: one pressed in an earlier turn does not make the
    next one quit the runner."""
    agent = [sys.executable, str(AGENTS / "sdk_agent.py")]
    run = Run(server.ws_url, token, agent, stdin="slow\nslow\n")
    ended = InferenceAttempt.objects.filter(chat_id=run.chat_id, ended_at__isnull=False)
    rows = ToolActivity.objects.filter(chat_id=run.chat_id)
    for count in (1, 2):
        eventually(partial(equals, rows, count))  # that turn's slow call is running
        run.process.send_signal(signal.SIGINT)
        eventually(partial(equals, ended, count))
    code, err = run.finish()
    assert code == 0, err
    stops = InferenceAttempt.objects.filter(chat_id=run.chat_id).order_by("created_version")
    assert [turn.stop_reason for turn in stops] == ["cancelled", "cancelled"]


def test_a_bad_token_is_one_clear_line_and_exit_code_2(server):
    run = sdk("basic", server, "koru_not-a-token")
    code, err = run.finish()
    assert code == 2 and "refused the agent token" in err


def test_an_unreachable_server_is_one_clear_line_and_exit_code_1(token):
    agent = [sys.executable, str(AGENTS / "sdk_agent.py")]
    run = Run("ws://127.0.0.1:9", token, agent, "--prompt", "basic", "--connect-timeout", "1")
    code, err = run.finish()
    assert code == 1 and "unreachable after 1 s" in err


def test_an_agent_command_that_does_not_exist_is_exit_code_3(server, token):
    run = Run(server.ws_url, token, ["/nonexistent/agent"], "--prompt", "hi")
    code, err = run.finish()
    assert code == 3 and "'/nonexistent/agent' was not found" in err


def test_an_agent_that_exits_mid_turn_is_exit_code_4_and_its_calls_fail(server, token):
    run = sdk("exit", server, token)
    code, err = run.finish()
    assert code == 4 and "exited with code 3 during a turn" in err
    assert last_turn(run.chat_id).stop_reason == "agent_exited"
    row = ToolActivity.objects.get(chat_id=run.chat_id)
    assert (row.status, row.error_code) == ("failed", "agent_exited")


def test_a_mode_the_agent_does_not_have_is_refused_before_the_first_turn_with_exit_code_5(
    server, token
):
    run = sdk("basic", server, token, "--mode", "yolo")
    code, err = run.finish()
    assert code == 5, err
    assert "the agent has no mode 'yolo'; its modes: default (Default), auto (Auto)" in err
    assert "Traceback" not in err
    assert not InferenceAttempt.objects.filter(chat_id=run.chat_id).exists()


def socket(
    sockets: contextlib.ExitStack, server: Server, token: str, hello: dict[str, Any]
) -> ClientConnection:
    """A runner's raw socket to ``server``, after its hello."""
    opened = sockets.enter_context(
        connect(
            server.ws_url + "/ws/agent/", additional_headers={"Authorization": f"Bearer {token}"}
        )
    )
    opened.send(json.dumps(hello))
    return opened


def test_a_chat_and_its_secret_answers_belong_to_the_runner_on_whatever_process(
    server, token, tmp_path
):
    other = Server(tmp_path / "other.log", redis=True)  # a second process: Redis, one database
    other.start()
    with other_stopped(other), contextlib.ExitStack() as sockets:
        intruder_token = AgentToken.issue(Workspace.objects.get(slug="acme"), "intruder")[1]
        chat_id = uuid.uuid4()
        owner = socket(sockets, server, token, frames.hello(chat_id))
        assert json.loads(owner.recv(10)) == {"type": "ack", "seq": 0}

        intruder = socket(sockets, other, intruder_token, frames.hello(chat_id, secret="x" * 43))
        assert "its secret differs" in json.loads(intruder.recv(10))["error"]
        with pytest.raises(ConnectionClosed) as closed:
            intruder.recv(10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403

        # The runner fails over to the other process while its old socket still looks up.
        moved = socket(sockets, other, token, frames.hello(chat_id))
        assert json.loads(moved.recv(10)) == {"type": "ack", "seq": 0}
        secret = {"action": "accept", "content": {"api_key": "sk-the-secret"}}
        answer(chat_id, 7, secret)
        assert json.loads(moved.recv(10)) == {"type": "answer", "request_id": 7, "outcome": secret}
        with pytest.raises(TimeoutError):
            owner.recv(1)  # the old socket no longer gets the chat's answers
        assert Chat.objects.get(pk=chat_id).runner_connected


@contextlib.contextmanager
def other_stopped(other: Server) -> Iterator[None]:
    try:
        yield
    finally:
        other.stop()


def test_a_runner_whose_chat_is_taken_from_it_is_one_clear_line_and_exit_code_2(server, token):
    run = sdk("slow", server, token)
    eventually(lambda: ToolActivity.objects.filter(chat_id=run.chat_id).exists())
    server.kill()
    Chat.objects.filter(pk=run.chat_id).update(runner_secret_hash="0" * 64)
    server.start()
    code, err = run.finish()
    assert code == 2, err
    said = "the server did not accept the hello: this chat belongs to another runner"
    assert f"koruweb: {said} (its secret differs)" in err.splitlines()


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
    return found


def test_a_runner_whose_token_is_revoked_mid_turn_stops_its_agent_and_exits_2_at_once(
    server, token
):
    run = sdk("permission", server, token)
    open_prompt(run.chat_id)  # the agent waits for a person: only the revocation can end this
    agents = children(run.process.pid)
    assert agents, "the runner has its agent running"
    revoked = AgentToken.objects.get()
    revoked.revoked_at = revoked.created_at
    revoked.save()

    async def revoke() -> None:  # as the token page does, from another process
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        try:
            await layer.group_send(groups.token(revoked.pk), {"type": "token.revoked"})
        finally:
            await layer.close_pools()

    asyncio.run(revoke())
    code, err = run.finish(within=15)
    assert code == 2, err
    assert "koruweb: the server refused the agent token" in err.splitlines()
    assert "Traceback" not in err, "the agent was stopped cleanly, not mid-request"
    assert not any(Path(f"/proc/{pid}").exists() for pid in agents), "its agent was stopped"
