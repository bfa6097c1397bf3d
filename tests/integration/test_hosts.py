"""A real agent host (``manage.py agent host``) against a real server over Redis: it comes
online, lists directories, refuses what is outside its roots and agents it was not given, and
starts runs from *New run* whose rows appear; a flood of starts meets ``--max-runs`` and the
server's limit per person; nothing a host hands its runners shows in ``/proc``; a killed host's
run tokens are revoked within the grace."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.client
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from channels_redis.core import RedisChannelLayer
from django.contrib.auth.models import User
from django.test import Client

from activity.core import groups
from activity.models import (
    Chat,
    InferenceAttempt,
    Membership,
    Prompt,
    Role,
    ToolActivity,
    Workspace,
)
from activity.models.accounts import AgentHost, AgentToken, HostRun, HostRunStatus, TokenKind
from activity.wire.hostframes import ListDir, Listing, Start
from tests.integration.test_drive import Person
from tests.integration.test_runner import children, eventually, open_prompt
from tests.liveserver import BASE_DIR, REDIS_URL, Server, child_env

pytestmark = pytest.mark.django_db(transaction=True)
SDK_AGENT = f"sdk={shlex.quote(sys.executable)} {BASE_DIR / 'tests' / 'agents' / 'sdk_agent.py'}"
STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def _no_host_outlives_its_test() -> Iterator[None]:
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def host_token(acme: Workspace) -> str:
    return AgentToken.issue(acme, "build-box", TokenKind.HOST)[1]


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    """A root with ``project/src`` in it, and a symlink out of it to a secret directory."""
    root = tmp_path / "root"
    (root / "project" / "src").mkdir(parents=True)
    (root / "project" / "notes.txt").write_text("hello\n")
    (tmp_path / "secret").mkdir()
    (root / "project" / "escape").symlink_to(tmp_path / "secret")
    return root


class HostProcess:
    """``manage.py agent host …`` in a child process; its first line is the workspace page."""

    def __init__(self, words: list[str], **env: str) -> None:
        self.process = subprocess.Popen(
            words,
            cwd=BASE_DIR,
            env=child_env(KORUWEB_DEMO_FAST="1", **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        STARTED.append(self.process)
        assert self.process.stdout is not None
        self.page = self.process.stdout.readline().strip()

    def stop(self, within: float = 20) -> tuple[int, str]:
        """Ctrl-C, then its exit code and what it said."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.finish(within)

    def finish(self, within: float = 20) -> tuple[int, str]:
        """Its exit code and what it said, once it exits by itself."""
        _, err = self.process.communicate(timeout=within)
        return self.process.returncode, err


def host(
    server: Server, token: str, root: Path, *agents: str, max_runs: int | None = None
) -> HostProcess:
    """A host with its token in ``KORUWEB_TOKEN``, as the README starts one."""
    words = [sys.executable, "manage.py", "agent", "host", "--server", server.ws_url]
    words += ["--root", str(root), "--name", "build-box"]
    words += ["--max-runs", str(max_runs)] if max_runs is not None else []
    for agent in agents or (SDK_AGENT,):
        words += ["--agent", agent]
    return HostProcess(words, KORUWEB_TOKEN=token)


class Web:
    """A person's browser, without a browser: their session cookie and the CSRF dance."""

    def __init__(self, server: Server, user: User) -> None:
        client = Client()
        client.force_login(user)
        self.port = server.port
        self.cookies = {"sessionid": client.cookies["sessionid"].value}

    def request(
        self, method: str, path: str, body: str = "", **headers: str
    ) -> tuple[int, str, str]:
        """(status, body, Location)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        headers = {"Cookie": cookie, **headers}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = f"http://127.0.0.1:{self.port}"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name] = rest.split(";")[0]
        text = response.read().decode()
        connection.close()
        return response.status, text, response.headers.get("Location", "")

    def get(self, path: str, **headers: str) -> tuple[int, str, str]:
        return self.request("GET", path, **headers)

    def post(self, path: str, form_page: str, fields: dict[str, str]) -> tuple[int, str, str]:
        _, page, _ = self.get(form_page)
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert found, "the form page has no CSRF token"
        body = urlencode({"csrfmiddlewaretoken": found.group(1), **fields})
        return self.request("POST", path, body)


def person(workspace: Workspace, name: str, role: Role) -> User:
    user = User.objects.create_user(name)
    Membership.objects.create(workspace=workspace, user=user, role=role)
    return user


def online_host() -> AgentHost:
    return eventually(lambda: AgentHost.objects.filter(online=True).first())


def test_a_host_comes_online_lists_a_directory_and_starts_a_run_whose_rows_appear(
    server: Server, acme: Workspace, host_token: str, disk: Path
) -> None:
    running = host(server, host_token, disk)
    assert running.page == f"{server.url}/workspaces/acme/", running.stop()
    found = online_host()
    admin = Web(server, person(acme, "carol", Role.ADMIN))
    _, page, _ = admin.get("/workspaces/acme/")
    row = page[page.index(f'id="host-{found.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "online" in row and "sdk" in row and str(disk) in row

    alice = Web(server, person(acme, "alice", Role.APPROVER))
    new_run = f"/runs/new?host={found.pk}"
    status, listing, _ = alice.get(f"{new_run}&path=project", **{"HX-Request": "true"})
    assert status == 200 and "src/" in listing and "notes.txt" in listing
    assert "escape" not in listing  # a symlink out of the root is not offered
    _, refused, _ = alice.get(f"{new_run}&path=project/escape")
    assert "is outside" in refused and "listing-error" in refused

    fields = {"host": str(found.pk), "agent": "sdk", "root": str(disk), "path": "project"}
    status, _, starting = alice.post("/runs/new/start", new_run, {**fields, "prompt": "basic"})
    assert status == 302 and starting.startswith("/runs/new/")

    def landed() -> str:
        status, _, location = alice.get(starting)
        return location if status == 302 else ""

    chat_page = eventually(landed, within=30)
    chat_id = uuid.UUID(chat_page.split("/")[2])
    chat = Chat.objects.get(pk=chat_id)
    assert chat.workspace_id == acme.pk
    eventually(lambda: ToolActivity.objects.filter(chat_id=chat_id).count() >= 2, within=30)
    turn = eventually(lambda: Chat.objects.get(pk=chat_id).current_attempt)
    assert turn.prompt == "basic"
    assert eventually(lambda: Chat.objects.get(pk=chat_id).allow_web)  # started --allow-web
    run = HostRun.objects.get()
    assert run.token is not None
    nothing_shows(running, [run.token.hint, host_token, "basic"])
    assert run.status == HostRunStatus.STARTED and run.requested_by is not None
    code, err = running.stop()  # its runners stop with it, and it says so
    assert code == 130, err
    exited = eventually(
        lambda: HostRun.objects.filter(status=HostRunStatus.EXITED).select_related("token").first()
    )
    assert exited.code is not None and exited.token is not None
    assert exited.token.revoked_at is not None  # the run's token ends with its runner


def nothing_shows(running: HostProcess, secrets: list[str]) -> None:
    """No process the host started (its runners, their agents, theirs) shows any of
    ``secrets`` in ``/proc/<pid>/cmdline`` or ``environ``: not in ps, not handed on. The
    host's own command line shows no token either (it is in its environment)."""
    host_line = Path(f"/proc/{running.process.pid}/cmdline").read_bytes()
    assert not any(secret.encode() in host_line for secret in secrets[:2])
    started: set[int] = set()
    last = children(running.process.pid)
    while last:
        started |= last
        last = {child for pid in last for child in children(pid)} - started
    runners = children(running.process.pid)
    assert runners and started - runners, "the host runs the run's runner, which runs its agent"
    for pid in started:
        for name in ("cmdline", "environ"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                seen = Path(f"/proc/{pid}/{name}").read_bytes()
                for secret in secrets:
                    assert secret.encode() not in seen, (pid, name, secret)


def ask(channel: str, frame: Start | ListDir) -> dict[str, Any] | None:
    """Send a frame to the host's socket as the server does (through Redis), bypassing the
    server's own checks; a ``list`` gets its reply."""

    async def send() -> dict[str, Any] | None:
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        try:
            reply = await layer.new_channel() if isinstance(frame, ListDir) else None
            message = {"type": "host.ask", "text": frame.model_dump_json(), "id": str(frame.id)}
            await layer.send(channel, {**message, "reply": reply or ""})
            if reply is None:
                return None
            answer: dict[str, Any] = await asyncio.wait_for(layer.receive(reply), 10)
            return answer
        finally:
            await layer.close_pools()

    return asyncio.run(send())


def refused(run: HostRun) -> HostRun | None:
    return (
        HostRun.objects.select_related("token")
        .filter(pk=run.pk, status=HostRunStatus.FAILED)
        .first()
    )


def test_the_host_refuses_a_directory_outside_its_roots_and_an_agent_it_was_not_given(
    server: Server, acme: Workspace, host_token: str, disk: Path
) -> None:
    running = host(server, host_token, disk)
    found = online_host()
    root = str(disk)
    for path in ("../", "project/escape", str(disk.parent / "secret"), "project/../../secret"):
        answer = ask(found.channel, ListDir(id=uuid.uuid4(), root=root, path=path))
        assert answer is not None
        listing = Listing.model_validate(answer["listing"])
        assert listing.error is not None and "outside" in listing.error and not listing.entries
    answer = ask(found.channel, ListDir(id=uuid.uuid4(), root="/etc", path=""))
    assert answer is not None and "not one of this host's" in answer["listing"]["error"]

    host_token_row = AgentToken.objects.get(kind=TokenKind.HOST)
    asked = {
        "bash": ("bash", "project"),
        "escape": ("sdk", "project/escape"),
        "dotdot": ("sdk", "../secret"),
        "absolute": ("sdk", str(disk.parent / "secret")),
    }
    runs = {}
    for what, (agent, path) in asked.items():
        token, plain = AgentToken.issue(acme, what, TokenKind.AGENT, host_token_row)
        runs[what] = HostRun.objects.create(host=found, agent=agent, token=token)
        ask(
            found.channel,
            Start(
                id=runs[what].pk,
                agent=agent,
                root=root,
                path=path,
                chat_id=uuid.uuid4(),
                prompt="basic",
                token=plain,
            ),
        )
    for what, run in runs.items():
        failed = eventually(functools.partial(refused, run))
        expected = "offers no agent “bash”" if what == "bash" else "outside"
        assert expected in failed.error, (what, failed.error)
        assert failed.token is not None and failed.token.revoked_at is not None
    assert not Chat.objects.exists()  # nothing ran
    code, err = running.stop()
    assert code == 130 and "starting" not in err, err


def test_a_revoked_host_token_stops_the_host_with_exit_2(
    server: Server, acme: Workspace, host_token: str, disk: Path
) -> None:
    running = host(server, host_token, disk)
    online_host()
    token = AgentToken.objects.get(kind=TokenKind.HOST)
    AgentToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")

    async def revoke() -> None:
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        try:
            await layer.group_send(groups.token(token.pk), {"type": "token.revoked"})
        finally:
            await layer.close_pools()

    asyncio.run(revoke())
    code, err = running.finish()
    assert code == 2 and "refused the host token" in err, err


def test_an_agent_token_is_no_host_token(server: Server, acme: Workspace, disk: Path) -> None:
    _, agent_token = AgentToken.issue(acme, "laptop")
    running = host(server, agent_token, disk)
    code, err = running.finish()
    assert code == 2 and "refused the host token" in err, err


DEMO_AGENT = BASE_DIR / "activity" / "runner" / "demo_agent.py"


def demo_config(tmp_path: Path, root: Path) -> Path:
    """A host.toml offering the demo agent (modes default and auto) twice: as "Demo agent",
    which the web may switch between both, and as "Planner", declared with a mode it lacks."""
    command = f"command = [{str(sys.executable)!r}, {str(DEMO_AGENT)!r}]"
    config = tmp_path / "host.toml"
    config.write_text(
        f'name = "build-box"\nroots = [{str(root)!r}]\n\n'
        f'[agents.demo]\nlabel = "Demo agent"\n{command}\nweb_modes = ["default", "auto"]\n\n'
        f'[agents.planner]\nlabel = "Planner"\n{command}\nweb_modes = ["plan"]\n'
    )
    return config


def test_a_host_from_a_config_offers_labels_and_its_runs_switch_modes_from_the_web(
    server: Server, acme: Workspace, host_token: str, disk: Path, tmp_path: Path
) -> None:
    words = [sys.executable, "manage.py", "agent", "host", "--server", server.ws_url]
    running = HostProcess(
        words + ["--config", str(demo_config(tmp_path, disk))], KORUWEB_TOKEN=host_token
    )
    found = online_host()
    assert found.agent_labels == ["Demo agent", "Planner"]
    user = person(acme, "alice", Role.APPROVER)
    alice, driver = Web(server, user), Person(server, user)
    _, form, _ = alice.get(f"/runs/new?host={found.pk}")
    assert '<option value="demo" selected>Demo agent</option>' in form
    assert '<option value="planner">Planner</option>' in form and "demo_agent.py" not in form

    fields = {"host": str(found.pk), "agent": "demo", "root": str(disk), "path": "project"}
    status, _, starting = alice.post("/runs/new/start", "/runs/new", {**fields, "prompt": "Fix it"})
    assert status == 302
    chat_id = uuid.UUID(
        eventually(functools.partial(landed, alice, starting), within=30).split("/")[2]
    )
    chat = eventually(lambda: Chat.objects.filter(pk=chat_id).exclude(web_modes=[]).first())
    assert chat.web_modes == ["default", "auto"]  # the runner was given the declared modes
    assert [mode["id"] for mode in chat.web_choices] == ["default", "auto"]
    _, page, _ = alice.get(f"/chats/{chat_id}/")
    assert 'name="mode" value="auto"' in page  # the run's page shows its mode control
    asked = open_prompt(chat_id)  # in mode default the demo agent asks before it edits
    status, _ = driver.choose(chat_id, "auto")
    assert status == 302
    eventually(lambda: Chat.objects.filter(pk=chat_id, mode="auto").first())  # the agent took it
    driver.allow(asked)
    eventually(
        lambda: InferenceAttempt.objects.filter(chat_id=chat_id, ended_at__isnull=False).exists(),
        within=30,
    )
    status, _ = driver.send(chat_id, "Fix it again")
    assert status == 302

    def second_turn_ended() -> bool:
        ended = InferenceAttempt.objects.filter(chat_id=chat_id, ended_at__isnull=False)
        return ended.count() == 2

    eventually(second_turn_ended, within=30)
    # In mode auto the agent edited without asking: the first turn's prompt is the only one.
    assert list(Prompt.objects.filter(chat_id=chat_id)) == [asked]
    code, err = running.stop()
    assert code == 130 and "mode 'auto' (asked from the web by alice)" in err, err


def test_a_declared_mode_the_agent_lacks_fails_the_start_listing_the_agents_modes(
    server: Server, acme: Workspace, host_token: str, disk: Path, tmp_path: Path
) -> None:
    words = [sys.executable, "manage.py", "agent", "host", "--server", server.ws_url]
    running = HostProcess(
        words + ["--config", str(demo_config(tmp_path, disk))], KORUWEB_TOKEN=host_token
    )
    found = online_host()
    alice = Web(server, person(acme, "alice", Role.APPROVER))
    fields = {"host": str(found.pk), "agent": "planner", "root": str(disk), "prompt": "Fix it"}
    status, _, starting = alice.post("/runs/new/start", "/runs/new", fields)
    assert status == 302
    failed = eventually(lambda: refused(HostRun.objects.get()), within=30)
    said = "planner did not start: the agent has no mode 'plan' (web_modes); its modes: "
    assert failed.error.startswith(said) and "default (Default), auto (Auto)" in failed.error
    assert failed.token is not None and failed.token.revoked_at is not None
    status, page, _ = alice.get(starting)  # the New run page says why
    assert status == 200 and "has no mode &#x27;plan&#x27;" in page
    assert "default (Default), auto (Auto)" in page
    code, err = running.stop()
    assert code == 130, err


def landed(web: Web, starting: str) -> str:
    status, _, location = web.get(starting)
    return location if status == 302 else ""


def readme_host_line(flag: str) -> str:
    """The host's command line with ``flag`` as README.md writes it (continuations joined)."""
    text = (BASE_DIR / "README.md").read_text().replace("\\\n", " ")
    lines = [" ".join(line.split()) for line in text.splitlines() if "manage.py agent host" in line]
    assert lines, "README.md shows no `manage.py agent host` line"
    return next(line for line in lines if ".venv/bin/python manage.py" in line and flag in line)


def readme_host(server: Server, host_token: str, flag: str, **paths: str) -> HostProcess:
    """The README's host line with ``flag``, run as written (its server this test's, and each
    of ``paths``' file names where this test wrote it)."""
    line = readme_host_line(flag).replace("ws://127.0.0.1:8000", server.ws_url)
    words = [w.replace("HOST_TOKEN", host_token) for w in shlex.split(line)]
    words = [paths.get(word, word) for word in words]
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):  # NAME=VALUE before the command
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert env == {"KORUWEB_TOKEN": host_token}  # the token is not on the command line
    return HostProcess(words, **env)


def test_the_readme_host_line_runs_as_written(
    server: Server, acme: Workspace, host_token: str
) -> None:
    running = readme_host(server, host_token, "--agent")
    found = online_host()
    assert found.agent_names == ["demo"] and found.roots == [str(BASE_DIR)]
    assert running.page == f"{server.url}/workspaces/acme/"
    alice = Web(server, person(acme, "alice", Role.APPROVER))
    fields = {"host": str(found.pk), "agent": "demo", "root": str(BASE_DIR), "path": "activity"}
    status, _, _ = alice.post("/runs/new/start", "/runs/new", {**fields, "prompt": "Fix it"})
    assert status == 302
    try:
        eventually(lambda: ToolActivity.objects.exists(), within=30)  # the demo agent at work
    finally:
        code, err = running.stop()
    assert code == 130, err


def test_the_readme_host_toml_and_its_line_run_as_written(
    server: Server, acme: Workspace, host_token: str, tmp_path: Path
) -> None:
    readme = (BASE_DIR / "README.md").read_text()
    toml = readme[readme.index("```toml\n") + 8 :]
    config = tmp_path / "host.toml"
    config.write_text(toml[: toml.index("```")])
    running = readme_host(server, host_token, "--config", **{"host.toml": str(config)})
    found = online_host()
    assert (found.name, found.max_runs, found.roots) == ("build-box", 4, [str(BASE_DIR)])
    [demo] = found.agents
    assert (demo["name"], demo["label"], demo["web_modes"]) == (
        "demo",
        "Demo agent",
        ["default", "auto"],
    )
    alice = Web(server, person(acme, "alice", Role.APPROVER))
    fields = {"host": str(found.pk), "agent": "demo", "root": str(BASE_DIR), "path": "activity"}
    status, _, starting = alice.post("/runs/new/start", "/runs/new", {**fields, "prompt": "Fix it"})
    assert status == 302
    try:
        chat_id = uuid.UUID(
            eventually(functools.partial(landed, alice, starting), 30).split("/")[2]
        )
        chat = eventually(lambda: Chat.objects.filter(pk=chat_id).exclude(web_modes=[]).first())
        assert chat.web_modes == ["default", "auto"]
    finally:
        code, err = running.stop()
    assert code == 130, err


def flood(web: Web, found: AgentHost, root: Path, starts: int) -> list[int]:
    """``starts`` POSTs to *Start*, as fast as they go: their statuses."""
    fields = {"host": str(found.pk), "agent": "sdk", "root": str(root), "path": "project"}
    new_run = f"/runs/new?host={found.pk}"
    _, page, _ = web.get(new_run)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert csrf is not None
    body = urlencode({"csrfmiddlewaretoken": csrf.group(1), **fields, "prompt": "basic"})
    return [web.request("POST", "/runs/new/start", body)[0] for _ in range(starts)]


def test_a_flood_of_starts_meets_max_runs_on_the_server_and_on_the_host_itself(
    tmp_path: Path, acme: Workspace, host_token: str, disk: Path
) -> None:
    lifted = Server(tmp_path / "lifted.log", redis=True, env={"HOST_STARTS_PER_MINUTE": "1000"})
    lifted.start()
    try:
        running = host(lifted, host_token, disk, max_runs=2)
        found = online_host()
        assert found.max_runs == 2
        alice = Web(lifted, person(acme, "alice", Role.APPROVER))
        statuses = flood(alice, found, disk, 40)
        assert statuses[:2] == [302, 302] and set(statuses[2:]) == {409}, statuses
        _, page, _ = alice.get("/runs/new")
        assert "busy (2/2)" in page
        eventually(lambda: HostRun.objects.filter(status=HostRunStatus.STARTED).count() == 2, 30)
        # Past the server's count (a start sent as the server does, 20 times): the host holds.
        host_token_row = AgentToken.objects.get(kind=TokenKind.HOST)
        extra = []
        for n in range(20):
            token, plain = AgentToken.issue(acme, f"x{n}", TokenKind.AGENT, host_token_row)
            extra.append(HostRun.objects.create(host=found, agent="sdk", token=token))
            frame = Start(
                id=extra[-1].pk,
                agent="sdk",
                root=str(disk),
                path="project",
                chat_id=uuid.uuid4(),
                prompt="basic",
                token=plain,
            )
            ask(found.channel, frame)
        for run in extra:
            failed = eventually(functools.partial(refused, run))
            assert "--max-runs 2" in failed.error, failed.error
            assert failed.token is not None and failed.token.revoked_at is not None
        assert len(children(running.process.pid)) == 2  # two runners, never more
        code, err = running.stop()
        assert code == 130, err
    finally:
        lifted.stop()


def test_a_flood_of_starts_past_the_limit_per_person_is_refused_with_429(
    tmp_path: Path, acme: Workspace, host_token: str, disk: Path
) -> None:
    limited = Server(tmp_path / "limited.log", redis=True, env={"HOST_STARTS_PER_MINUTE": "3"})
    limited.start()
    try:
        running = host(limited, host_token, disk, max_runs=10)
        found = online_host()
        alice = Web(limited, person(acme, "alice", Role.APPROVER))
        statuses = flood(alice, found, disk, 30)
        assert statuses[:3] == [302] * 3 and set(statuses[3:]) == {429}, statuses
        fields = {"host": str(found.pk), "agent": "sdk", "root": str(disk), "prompt": "basic"}
        status, said, _ = alice.post("/runs/new/start", f"/runs/new?host={found.pk}", fields)
        assert status == 429 and "started 3 runs within a minute" in said
        assert HostRun.objects.count() == 3
        code, err = running.stop()
        assert code == 130, err
    finally:
        limited.stop()


def test_a_killed_hosts_run_tokens_are_revoked_within_the_grace(
    tmp_path: Path, acme: Workspace, host_token: str, disk: Path
) -> None:
    brief = Server(tmp_path / "brief.log", redis=True, grace=1)
    brief.start()
    try:
        running = host(brief, host_token, disk)
        found = online_host()
        alice = Web(brief, person(acme, "alice", Role.APPROVER))
        assert flood(alice, found, disk, 1) == [302]
        run = eventually(
            lambda: (
                HostRun.objects.filter(status=HostRunStatus.STARTED).select_related("token").first()
            ),
            within=30,
        )
        assert run.token is not None and run.token.revoked_at is None and run.chat_id is not None
        chat_id, token_id = run.chat_id, run.token.pk
        eventually(lambda: Chat.objects.filter(pk=chat_id, runner_connected=True).exists())
        running.process.kill()  # no Ctrl-C, no exited: its runners die with it
        running.process.wait(10)
        revoked = eventually(
            lambda: AgentToken.objects.filter(pk=token_id, revoked_at__isnull=False).first(),
            within=15,
        )
        assert revoked.revoked_at is not None
    finally:
        brief.stop()
