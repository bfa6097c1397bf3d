"""Resuming a run with the real agents, offline against the fake model APIs: the runner is
killed, ``koruweb agent --resume RUN`` takes the same agent session up again on the same machine,
and the next turn lands in the same run (docs/protocol.md#resuming-a-run). claude-agent-acp
resumes with ``session/resume``. gemini-cli 0.61.0 offers only ``session/load``, and in a new
process it rewrites the session's record before it reads it, so it finds nothing to load: the
runner says so and exits 8. (A load's replay held back: tests/runner/test_resuming_sdk.py.)"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from activity.models import Chat, InferenceAttempt, Workspace
from activity.models.accounts import AgentHost, AgentToken, HostRun, TokenKind
from tests.agents.real import anthropic, gemini
from tests.agents.real.fakeapi import FakeModels, Say
from tests.agents.real.harness import RealRun, WebUser, eventually, isolated_env
from tests.liveserver import BASE_DIR, Server

pytestmark = pytest.mark.django_db(transaction=True)
TURN_SECONDS = 60


def ended(chat_id: uuid.UUID, tag: str, run: RealRun) -> InferenceAttempt:
    def found() -> InferenceAttempt | None:
        assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
        turn = InferenceAttempt.objects.filter(chat_id=chat_id, prompt__contains=tag).first()
        return turn if turn is not None and turn.ended_at is not None else None

    return eventually(found, TURN_SECONDS, f"the turn of {tag}")


def kept_session(home: Path, session_id: str, word: str) -> bool:
    """Whether the agent has written its session, with ``word`` in it, under ``home``."""
    return any(
        session_id[:8] in path.name and word in path.read_text(errors="replace")
        for path in home.rglob("*.json*")
        if path.is_file()
    )


def hello_closes_with(server: Server, token: str, hello: dict[str, object]) -> int | None:
    """The close code a runner's socket gets for ``hello`` (None: it was taken)."""
    headers = {"Authorization": f"Bearer {token}"}
    with connect(server.ws_url + "/ws/agent/", additional_headers=headers) as socket:
        socket.send(json.dumps(hello))
        try:
            socket.recv(10)
            socket.recv(2)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        except TimeoutError:
            return None
    return None


def test_a_killed_claude_run_is_resumed_in_place_and_its_old_runner_is_refused(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    project: Path,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
    agent = list(anthropic.COMMAND)
    server, token = koruweb_server.ws_url, agent_token
    first = RealRun(
        server, token, agent, env, "--cwd", str(project), "--mode", "default", stdin=True
    )
    runs = [first]
    try:
        chat_id = first.chat_id
        before = fake_models.script(Say("The first answer."))
        first.send(f"Remember the word teal {before}")
        turn1 = ended(chat_id, before, first)
        chat = Chat.objects.get(pk=chat_id)
        assert chat.agent_session_id and chat.agent_resumes and chat.agent_closes
        kept = home / ".local" / "state" / "koruweb" / "runs" / f"{chat_id}.json"
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        old_secret = json.loads(kept.read_text())["secret"]

        # The agent keeps its session on disk, a moment after the turn (gemini-cli writes it
        # after it answers): the laptop closes once it has.
        eventually(lambda: kept_session(home, chat.agent_session_id, "teal"), 30, "its session")
        first.kill()  # the laptop's lid closes: the runner and its agent die, nothing is said
        eventually(lambda: not Chat.objects.get(pk=chat_id).runner_connected, 30, "runner gone")

        second = RealRun(server, token, agent, env, "--resume", str(chat_id), stdin=True)
        runs.append(second)
        assert second.chat_id == chat_id, second.stderr
        after = fake_models.script(Say("The word was teal."))
        second.send(f"Which word? {after}")
        turn2 = ended(chat_id, after, second)

        chat.refresh_from_db()
        turns = list(InferenceAttempt.objects.filter(chat_id=chat_id))
        assert turns == [turn1, turn2]  # in order; nothing replayed became a turn of its own
        turn1.reply.refresh_from_db()
        assert turn1.reply.markdown == "The first answer."  # nor was said twice
        assert turn2.reply.markdown == "The word was teal."
        assert chat.resumed_at is not None and chat.resumed_via == "token laptop"
        # claude took its own conversation up again: the model saw the first turn's words
        [*_, request] = fake_models.sent(after)
        assert "Remember the word teal" in request.text
        assert json.loads(kept.read_text())["secret"] != old_secret

        # The old runner, were it to come back, is refused; so is a second resume meanwhile.
        hello = {"type": "hello", "protocol": 1, "chat_id": str(chat_id), "acked": 0}
        assert hello_closes_with(koruweb_server, token, {**hello, "secret": old_secret}) == 4403
        third = RealRun(server, token, agent, env, "--resume", str(chat_id))
        runs.append(third)
        code, err = third.finish()
        assert code == 2 and "the run's runner is still connected" in err, err

        code, err = second.finish()
        assert code == 0, err
    finally:
        for run in runs:
            if run.process.poll() is None:
                with contextlib.suppress(Exception):
                    run.kill()


def test_gemini_cli_cannot_load_its_session_in_a_new_process_and_the_runner_says_why(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    project: Path,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = isolated_env(home, gemini.environment(f"{fake_models.url}/gemini", home))
    agent = list(gemini.COMMAND)
    server, token = koruweb_server.ws_url, agent_token
    first = RealRun(server, token, agent, env, "--cwd", str(project), stdin=True)
    runs = [first]
    try:
        before = fake_models.script(Say("The first answer."))
        first.send(f"Remember the word teal {before}")
        turn = ended(first.chat_id, before, first)
        chat = Chat.objects.get(pk=first.chat_id)
        # gemini-cli offers session/load alone (which replays), and no session/close
        assert chat.agent_session_id and chat.agent_resumes and not chat.agent_closes
        eventually(lambda: kept_session(home, chat.agent_session_id, "teal"), 30, "its session")
        first.kill()
        eventually(lambda: not Chat.objects.get(pk=chat.pk).runner_connected, 30, "runner gone")

        second = RealRun(server, token, agent, env, "--resume", str(chat.pk), stdin=True)
        runs.append(second)
        code, err = second.finish()
        assert code == 8, err
        said = "the agent would not resume the run's session: Internal error (No previous sessions"
        assert f"koruweb: {said} found for this project.)" in err.splitlines()
        assert list(InferenceAttempt.objects.filter(chat_id=chat.pk)) == [turn]  # nothing else
        turn.reply.refresh_from_db()
        assert turn.reply.markdown == "The first answer."
    finally:
        for run in runs:
            if run.process.poll() is None:
                with contextlib.suppress(Exception):
                    run.kill()


def test_a_claude_run_a_host_started_is_stopped_and_resumed_from_its_page(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    workspace: Workspace,
    approver: WebUser,
    project: Path,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
    token = AgentToken.issue(workspace, "build-box", TokenKind.HOST)[1]
    words = [sys.executable, "manage.py", "agent", "host", "--server", koruweb_server.ws_url]
    words += ["--root", str(project.parent), "--name", "build-box"]
    words += ["--agent", "claude=claude-agent-acp"]
    host = subprocess.Popen(
        words,
        cwd=BASE_DIR,
        env={**env, "KORUWEB_TOKEN": token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stdout is not None and host.stdout.readline().strip().endswith("/acme/")
        found = AgentHost.objects.get(name="build-box")
        first = fake_models.script(Say("Ready."))
        fields = {"host": str(found.pk), "agent": "claude", "root": str(project.parent)}
        fields |= {"path": project.name, "prompt": f"Get ready {first}"}
        status, said = approver.post("/runs/new/start", fields)
        assert status == 200, said
        run = eventually(lambda: HostRun.objects.filter(status="started").first(), 60, "started")
        assert run.chat_id is not None
        chat_id = run.chat_id
        turn1 = eventually(lambda: done(chat_id, first), 60, "the first turn")
        chat = eventually(
            lambda: Chat.objects.filter(pk=chat_id).exclude(agent_session_id="").first(), 30
        )
        assert chat.agent_closes  # claude offers session/close: Stop closes its session

        status, said = approver.post(f"/chats/{chat_id}/stop", {})
        assert status == 200 and "end the run" in said, said
        stopped = eventually(lambda: HostRun.objects.filter(pk=run.pk, status="exited").first(), 60)
        assert stopped.code == 0  # the runner closed claude's session and exited by itself
        eventually(lambda: kept_session(home, chat.agent_session_id, "Get ready"), 30, "session")

        status, said = approver.post(f"/chats/{chat_id}/resume", {})
        assert status == 200 and "resume" in said, said
        eventually(lambda: Chat.objects.filter(pk=chat_id, runner_connected=True).first(), 60)
        second = fake_models.script(Say("Still here."))
        status, said = approver.post(f"/chats/{chat_id}/messages", {"text": f"Go on {second}"})
        assert status == 200, said
        turn2 = eventually(lambda: done(chat_id, second), 60, "the turn after the resume")
        assert list(InferenceAttempt.objects.filter(chat_id=chat_id)) == [turn1, turn2]
        [*_, request] = fake_models.sent(second)
        assert "Get ready" in request.text  # claude's own session went on
        chat.refresh_from_db()
        assert chat.resumed_via == "host build-box" and chat.resumed_by is not None
    finally:
        host.send_signal(signal.SIGINT)
        try:
            host.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            host.kill()
            host.communicate()


def done(chat_id: uuid.UUID, tag: str) -> InferenceAttempt | None:
    turn = InferenceAttempt.objects.filter(chat_id=chat_id, prompt__contains=tag).first()
    return turn if turn is not None and turn.ended_at is not None else None
