"""Driving a run from the web (issue 16) with the real server and real runner processes: a
person's POSTs on the live server reach the runner through the Redis channel layer, and what
the runner does comes back as its frames."""

from __future__ import annotations

import asyncio
import http.client
import re
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from channels_redis.core import RedisChannelLayer
from django.contrib.auth.models import User
from django.test import Client

from activity.live import drive
from activity.models import (
    AgentToken,
    Chat,
    InferenceAttempt,
    Prompt,
    Role,
    WebPrompt,
    WebPromptStatus,
    Workspace,
)
from activity.runner.web import NOT_ALLOWED
from activity.wire.orders import WebMode
from tests.agents.real import anthropic
from tests.agents.real.fakeapi import FakeModels, Say
from tests.agents.real.harness import RealRun, isolated_env
from tests.integration.test_runner import (  # noqa: F401  (a fixture: no runner outlives its test)
    AGENTS,
    Run,
    _no_runner_outlives_its_test,
    eventually,
    open_prompt,
)
from tests.liveserver import REDIS_URL, Server
from tests.members import member

pytestmark = pytest.mark.django_db(transaction=True)
SDK_AGENT = [sys.executable, str(AGENTS / "sdk_agent.py")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def token(acme: Workspace) -> str:
    return AgentToken.issue(acme, "ci")[1]


class Person:
    """A member's browser without a browser: their session cookie, and the CSRF token every
    page carries (its logout form), so a refusal is the server's decision and not CSRF's."""

    def __init__(self, server: Server, user: User) -> None:
        client = Client()
        client.force_login(user)
        self.port = server.port
        self.cookies = {"sessionid": client.cookies["sessionid"].value}

    def request(self, method: str, path: str, body: str = "") -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = f"http://127.0.0.1:{self.port}"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name] = rest.split(";")[0]
        text = response.read().decode()
        connection.close()
        return response.status, text

    def post(self, path: str, **fields: str) -> tuple[int, str]:
        _, page = self.request("GET", "/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert found, "the page has no CSRF token"
        return self.request("POST", path, urlencode({"csrfmiddlewaretoken": found[1], **fields}))

    def send(self, chat_id: uuid.UUID, text: str) -> tuple[int, str]:
        return self.post(f"/chats/{chat_id}/messages", text=text)

    def choose(self, chat_id: uuid.UUID, mode: str) -> tuple[int, str]:
        return self.post(f"/chats/{chat_id}/mode", mode=mode)

    def cancel(self, chat_id: uuid.UUID, attempt_id: uuid.UUID) -> tuple[int, str]:
        return self.post(f"/chats/{chat_id}/turns/{attempt_id}/cancel")

    def allow(self, prompt: Prompt) -> None:
        """Allow the agent's permission request: kept, and sent to the runner when it is back."""
        status, said = self.post(f"/prompts/{prompt.pk}/answer", choice="o0")  # "Allow once"
        assert status == 302, said


@pytest.fixture
def alice(server: Server, acme: Workspace) -> tuple[User, Person]:
    user = member(acme, "alice", Role.APPROVER)
    return user, Person(server, user)


@pytest.fixture
def bob(server: Server, acme: Workspace) -> Person:
    return Person(server, member(acme, "bob", Role.VIEWER))


def runner(server: Server, token: str, *flags: str) -> Run:
    return Run(server.ws_url, token, SDK_AGENT, *flags)


def chat(run: Run | RealRun) -> Chat:
    return Chat.objects.get(pk=run.chat_id)


def told(run: Run | RealRun, **fields: object) -> Chat:
    """The chat once the runner's session info says ``fields``."""

    def says() -> Chat | None:
        found = chat(run)
        return found if all(getattr(found, k) == v for k, v in fields.items()) else None

    return eventually(says)


def turns(run: Run | RealRun) -> list[InferenceAttempt]:
    return list(InferenceAttempt.objects.filter(chat_id=run.chat_id).order_by("started_at"))


def turns_ended(run: Run | RealRun, count: int) -> list[InferenceAttempt]:
    def ended() -> list[InferenceAttempt]:
        found = turns(run)
        done = len(found) >= count and all(turn.ended_at for turn in found[:count])
        return found if done else []

    return eventually(ended, within=30)


def running_turn(run: Run | RealRun) -> InferenceAttempt:
    return eventually(lambda: next((t for t in turns(run) if t.ended_at is None), None))


def stopped(run: Run) -> str:
    """Ctrl-C to a runner that serves the web with no turn running: it quits (130)."""
    run.process.send_signal(signal.SIGINT)
    code, err = run.finish()
    assert code == 130 and "Traceback" not in err, err
    return err


def deliver(chat_id: uuid.UUID, *texts: str) -> None:
    """What a server would send the runner, sent whatever the server's own checks say."""

    async def send() -> None:
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        try:
            await drive.deliver(chat_id, list(texts), layer=layer)
        finally:
            await layer.close_pools()

    asyncio.run(send())


def test_a_web_message_survives_the_server_restarting_and_each_runs_once(server, token, alice):
    user, person = alice
    run = runner(server, token, "--allow-web")  # its standard input has ended: it stays
    told(run, allow_web=True, runner_stays=True)
    status, _ = person.send(run.chat_id, "permission")
    assert status == 302
    server.kill()  # the message may be on its way, taken, or its turn not yet committed
    server.start()
    request = open_prompt(run.chat_id)
    status, _ = person.send(run.chat_id, "basic")  # a turn runs: queued
    assert status == 302
    server.kill()
    server.start()
    person.allow(request)
    first, second = turns_ended(run, 2)
    assert [first.prompt, second.prompt] == ["permission", "basic"]
    assert first.sent_by == user and second.sent_by == user
    assert first.stop_reason == second.stop_reason == "end_turn"
    messages = WebPrompt.objects.filter(chat_id=run.chat_id).order_by("created_at")
    assert [(m.status, m.attempt_id) for m in messages] == [
        (WebPromptStatus.STARTED, first.pk),
        (WebPromptStatus.STARTED, second.pk),
    ]
    stopped(run)
    assert len(turns(run)) == 2


def test_a_runner_without_allow_web_refuses_web_prompts(server, token, alice):
    user, person = alice
    run = runner(server, token, "--prompt", "permission")
    request = open_prompt(run.chat_id)
    assert not told(run, allow_web=False).takes_prompts
    status, said = person.send(run.chat_id, "basic")
    assert status == 409 and "--allow-web" in said
    # A message that reaches the runner anyway (a server that thought otherwise) is refused.
    sneaked = WebPrompt.objects.create(
        chat_id=run.chat_id, author=user, text="basic", status=WebPromptStatus.SENT
    )
    deliver(run.chat_id, drive.prompt_frame(sneaked))
    refused = eventually(
        lambda: WebPrompt.objects.filter(pk=sneaked.pk, status=WebPromptStatus.REFUSED).first()
    )
    assert refused.refused_reason == NOT_ALLOWED
    person.allow(request)
    code, err = run.finish()
    assert code == 0, err
    assert [turn.prompt for turn in turns(run)] == ["permission"]
    assert f"refused the web's prompt by alice: {NOT_ALLOWED}" in err


def test_a_mode_not_in_web_modes_cannot_be_chosen(server, token, alice):
    _, person = alice
    run = runner(server, token, "--allow-web", "--web-modes", "auto")
    found = told(run, web_modes=["auto"], mode="default")
    assert [mode["id"] for mode in found.modes] == ["default", "auto"]
    assert [mode["id"] for mode in found.web_choices] == ["auto"]
    status, said = person.choose(run.chat_id, "default")
    assert status == 400 and "does not let the web choose that mode" in said
    # Sent anyway (a server that thought otherwise), the runner refuses it and says why.
    asked = WebMode(id=uuid.uuid4(), mode="default", by="alice")
    deliver(run.chat_id, asked.model_dump_json())
    note = eventually(lambda: chat(run).web_note)
    assert "'default' is not one of this runner's --web-modes (auto)" in note
    assert chat(run).mode == "default"
    status, _ = person.choose(run.chat_id, "auto")  # listed: the agent switches
    assert status == 302
    told(run, mode="auto")
    status, _ = person.send(run.chat_id, "basic")
    assert status == 302
    (turn,) = turns_ended(run, 1)
    assert turn.stop_reason == "end_turn" and chat(run).mode == "auto"
    err = stopped(run)
    assert "switched the agent to mode 'auto' (asked from the web by alice)" in err


def test_a_viewer_is_refused_every_action_and_the_runner_gets_nothing(server, token, alice, bob):
    _, person = alice
    run = runner(server, token, "--allow-web", "--web-modes", "auto", "--prompt", "permission")
    told(run, allow_web=True, web_modes=["auto"])
    request = open_prompt(run.chat_id)
    turn = running_turn(run)
    status, _ = person.send(run.chat_id, "basic")  # queued behind the running turn
    assert status == 302
    queued = WebPrompt.objects.get(chat_id=run.chat_id)
    base = f"/chats/{run.chat_id}"
    refusals = [
        bob.send(run.chat_id, "question"),
        bob.cancel(run.chat_id, turn.pk),
        bob.choose(run.chat_id, "auto"),
        bob.post(f"{base}/messages/{queued.pk}/edit", text="question"),
        bob.post(f"{base}/messages/{queued.pk}/remove"),
    ]
    assert [status for status, _ in refusals] == [403] * 5
    assert all("only an approver or an admin" in said for _, said in refusals)
    assert list(WebPrompt.objects.filter(chat_id=run.chat_id)) == [queued]
    queued.refresh_from_db()
    assert queued.text == "basic" and queued.status == WebPromptStatus.QUEUED
    status, _ = person.post(f"{base}/messages/{queued.pk}/remove")  # alice may
    assert status == 302
    person.allow(request)
    code, err = run.finish()
    assert code == 0, err
    (ended,) = turns(run)
    assert ended.stop_reason == "end_turn" and ended.cancelled_by is None
    assert chat(run).mode == "default"
    assert "from the web" not in err and "refused the web" not in err


def test_claude_reports_its_modes_and_commands_switches_to_a_listed_mode_and_runs_a_message(
    koruweb_server: Server,
    workspace: Workspace,
    agent_token: str,
    fake_models: FakeModels,
    real_agents: Path,
    tmp_path: Path,
) -> None:
    """The real claude-agent-acp (against the fake Anthropic API): its modes come from its
    ``configOptions`` and are set through ``session/set_config_option``; its slash commands
    from ``available_commands_update``."""
    user = member(workspace, "alice", Role.APPROVER)
    person = Person(koruweb_server, user)
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
    flags = ["--cwd", str(project), "--mode", "default", "--allow-web", "--web-modes", "plan"]
    run = RealRun(koruweb_server.ws_url, agent_token, list(anthropic.COMMAND), env, *flags)
    try:
        assert run.chat_id.int, f"the runner printed no page:\n{run.stderr[-4000:]}"
        found = eventually(lambda: (c := chat(run)).commands and c, within=60)
        assert {"default", "plan", "bypassPermissions"} <= {mode["id"] for mode in found.modes}
        assert [mode["id"] for mode in found.web_choices] == ["plan"]
        assert found.mode == "default" and found.allow_web and found.runner_stays
        assert all(command["name"] for command in found.commands)
        status, said = person.choose(run.chat_id, "bypassPermissions")  # not listed
        assert status == 400, said
        status, said = person.choose(run.chat_id, "plan")
        assert status == 302, said
        told(run, mode="plan")
        tag = fake_models.script(Say("Here is the plan."))
        status, said = person.send(run.chat_id, f"Plan the work {tag}")
        assert status == 302, said
        (turn,) = turns_ended(run, 1)
        assert turn.sent_by == user and turn.stop_reason == "end_turn", run.stderr[-4000:]
        run.ctrl_c()  # no turn runs: the runner quits
        code, err = run.finish()
        assert code == 130 and "Traceback" not in err, err[-4000:]
    finally:
        if run.process.poll() is None:
            run.kill()
