"""Runs that outlive their runner, end to end with real processes over Redis: a host's run is
stopped from its page (the agent's session closed, the runner gone) and resumed there (the same
agent session goes on in the same run); a laptop's run of an agent that can only
``session/load`` is resumed without its replay shown twice (docs/protocol.md#resuming-a-run).
The agent is tests/agents/sdk_agent.py, its sessions kept on disk."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from activity.models import Chat, InferenceAttempt, Prompt, Role, ToolActivity, Workspace
from activity.models.accounts import AgentToken, HostRun, HostRunStatus, TokenKind
from tests.integration.test_hosts import (
    SDK_AGENT,
    STARTED,
    HostProcess,
    Web,
    online_host,
    person,
)
from tests.integration.test_runner import answer, eventually
from tests.liveserver import BASE_DIR, Server, child_env

pytestmark = pytest.mark.django_db(transaction=True)
AGENT = [sys.executable, str(BASE_DIR / "tests" / "agents" / "sdk_agent.py")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        while STARTED:
            process = STARTED.pop()
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


def ended(chat_id: uuid.UUID, turns: int) -> list[InferenceAttempt]:
    """The chat's turns, once ``turns`` of them have ended."""

    def found() -> list[InferenceAttempt] | None:
        listed = list(InferenceAttempt.objects.filter(chat_id=chat_id))
        done = [turn for turn in listed if turn.ended_at is not None]
        return listed if len(done) >= turns else None

    return eventually(found, 30)


def call_ids(chat_id: uuid.UUID) -> list[str]:
    return sorted(
        ToolActivity.objects.filter(chat_id=chat_id).values_list("tool_call_id", flat=True)
    )


def test_a_host_run_is_stopped_from_its_page_and_resumed_on_its_host(
    server: Server, acme: Workspace, tmp_path: Path
) -> None:
    sessions, root = tmp_path / "sessions", tmp_path / "root"
    (root / "project").mkdir(parents=True)
    token = AgentToken.issue(acme, "build-box", TokenKind.HOST)[1]
    words = [sys.executable, "manage.py", "agent", "host", "--server", server.ws_url]
    words += ["--root", str(root), "--name", "build-box", "--agent", SDK_AGENT]
    running = HostProcess(
        words, KORUWEB_TOKEN=token, SDK_AGENT_CAN="resume,close", SDK_AGENT_SESSIONS=str(sessions)
    )
    host = online_host()
    alice_user: User = person(acme, "alice", Role.APPROVER)
    alice = Web(server, alice_user)
    start = {"host": str(host.pk), "agent": "sdk", "root": str(root), "path": "project"}
    alice.post("/runs/new/start", f"/runs/new?host={host.pk}", {**start, "prompt": "basic"})
    run = eventually(lambda: HostRun.objects.filter(status=HostRunStatus.STARTED).first(), 30)
    assert run.chat_id is not None and (run.root, run.path) == (str(root), "project")
    chat_id = run.chat_id
    ended(chat_id, 1)
    chat = eventually(lambda: Chat.objects.filter(pk=chat_id).exclude(agent_session_id="").first())
    assert chat.agent_resumes and chat.agent_closes

    page = f"/chats/{chat_id}/"
    status, _, _ = alice.post(f"/chats/{chat_id}/stop", page, {})
    assert status == 302
    stopped = eventually(lambda: HostRun.objects.filter(pk=run.pk, status="exited").first(), 30)
    assert stopped.code == 0  # the runner ended the run and exited by itself
    assert (sessions / f"{chat.agent_session_id}.closed").exists()  # session/close
    chat = eventually(lambda: Chat.objects.filter(pk=chat_id, runner_connected=False).first())
    assert chat.stopped_by == alice_user and chat.stopped_at is not None

    status, _, _ = alice.post(f"/chats/{chat_id}/resume", page, {})
    assert status == 302
    again = eventually(lambda: HostRun.objects.filter(resumes=True, status="started").first(), 30)
    assert again.chat_id == chat_id and again.pk != run.pk
    eventually(lambda: Chat.objects.filter(pk=chat_id, runner_connected=True).first(), 30)
    alice.post(f"/chats/{chat_id}/messages", page, {"text": "basic"})
    first, second = ended(chat_id, 2)
    assert (first.prompt, second.prompt) == ("basic", "basic")
    # the agent's own session went on: its second turn's calls are numbered t2
    assert call_ids(chat_id) == ["t1-edit", "t1-read", "t2-edit", "t2-read"]
    chat.refresh_from_db()
    assert chat.resumed_by == alice_user and chat.resumed_via == "host build-box"
    code, err = running.stop()
    assert code in (0, 130), err


def test_a_laptop_run_of_an_agent_that_only_loads_is_resumed_without_its_replay_twice(
    server: Server, acme: Workspace, tmp_path: Path
) -> None:
    token = AgentToken.issue(acme, "laptop")[1]
    project = tmp_path / "project"
    project.mkdir()
    env = child_env(
        SDK_AGENT_CAN="load",
        SDK_AGENT_SESSIONS=str(tmp_path / "sessions"),
        KORUWEB_STATE_DIR=str(tmp_path / "state"),
    )

    def runner(*flags: str) -> tuple[int, str, str]:
        command = [sys.executable, "manage.py", "agent", "--server", server.ws_url]
        command += ["--token", token, *flags, "--prompt", "basic", "--", *AGENT]
        done = subprocess.run(
            command, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
        )
        return done.returncode, done.stdout, done.stderr

    code, out, err = runner("--cwd", str(project))
    assert code == 0, err
    chat_id = uuid.UUID(out.strip().rstrip("/").rsplit("/", 1)[1])
    [first] = ended(chat_id, 1)

    code, out, err = runner("--resume", str(chat_id))
    assert code == 0, err
    assert str(chat_id) in out and "resuming the agent's session" in err
    turns = ended(chat_id, 2)
    assert [turn.pk for turn in turns][0] == first.pk and len(turns) == 2  # no replayed turn
    first.reply.refresh_from_db()
    assert first.reply.markdown == "Done: edited notes.txt."  # not said twice
    assert call_ids(chat_id) == ["t1-edit", "t1-read", "t2-edit", "t2-read"]
    assert Chat.objects.get(pk=chat_id).resumed_via == "token laptop"


def test_a_resumed_runners_permission_requests_never_reuse_a_number_the_chat_has(
    server: Server, acme: Workspace, tmp_path: Path
) -> None:
    token = AgentToken.issue(acme, "laptop")[1]
    env = child_env(
        SDK_AGENT_CAN="resume",
        SDK_AGENT_SESSIONS=str(tmp_path / "sessions"),
        KORUWEB_STATE_DIR=str(tmp_path / "state"),
    )

    def asked_and_allowed(*flags: str) -> uuid.UUID:
        command = [sys.executable, "manage.py", "agent", "--server", server.ws_url]
        command += ["--token", token, *flags, "--prompt", "permission", "--", *AGENT]
        process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        STARTED.append(process)
        assert process.stdout is not None
        chat_id = uuid.UUID(process.stdout.readline().strip().rstrip("/")[-36:])
        prompt = eventually(
            lambda: Prompt.objects.filter(chat_id=chat_id, closed_at=None).first(), 30
        )
        answer(chat_id, prompt.jsonrpc_id, {"outcome": "selected", "optionId": "o0"})
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        return chat_id

    chat_id = asked_and_allowed("--cwd", str(tmp_path))
    assert asked_and_allowed("--resume", str(chat_id)) == chat_id
    prompts = list(Prompt.objects.filter(chat_id=chat_id).order_by("created_at"))
    assert [p.outcome for p in prompts] == ["approved", "approved"]  # each asked, each answered
    assert len({p.request_id for p in prompts}) == 2
    assert [t.stop_reason for t in InferenceAttempt.objects.filter(chat_id=chat_id)] == [
        "end_turn",
        "end_turn",
    ]
