"""Agent hosts on the server: host and agent tokens on their sockets, revocation, the host's
heartbeat, and *New run* (who may, CSRF, what is sent, what is refused in words); run tokens
scoped to their run's chat and revoked when the run ends however it ends; a busy host, a second
host of the same name, a host naming a chat it did not start. The host's own side is
tests/runner/test_host.py."""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
from datetime import timedelta
from typing import Any
from unittest.mock import ANY

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient, Client
from django.utils import timezone

from activity.live import host_asks, hosts, presence, run_tokens
from activity.models import Chat, Workspace
from activity.models.accounts import AgentHost, AgentToken, HostRun, HostRunStatus, TokenKind
from activity.wire.frames import CLOSE_FORBIDDEN, CLOSE_UPGRADE, PROTOCOL_VERSION
from activity.wire.hostframes import Start, Started
from koruweb.asgi import application
from tests import frames

FAKE_CHANNEL = "specific.test!host"
ROOT = "/srv/projects"


@pytest.fixture(autouse=True)
def fresh_layer():
    yield
    async_to_sync(get_channel_layer().flush)()


def sent_to_host() -> list[dict]:
    """What the server sent to the fake host's socket (the in-memory layer's queue)."""
    queue = get_channel_layer().channels.get(FAKE_CHANNEL)
    found = []
    while queue is not None and not queue.empty():
        found.append(queue.get_nowait()[1])
    return found


# --- tokens and sockets ------------------------------------------------------------------------


@pytest.fixture
def tokens(acme: Workspace) -> dict[str, str]:
    return {
        "agent": AgentToken.issue(acme, "laptop")[1],
        "host": AgentToken.issue(acme, "build-box", TokenKind.HOST)[1],
    }


async def closed_with(path: str, token: str) -> int:
    socket = WebsocketCommunicator(
        application, path, headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    await socket.connect()
    closed = await socket.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    return int(closed["code"])


HELLO = {
    "type": "host_hello",
    "protocol": PROTOCOL_VERSION,
    "name": "build-box",
    "agents": [{"name": "sdk", "command": "python sdk_agent.py"}],
    "roots": [ROOT],
}


async def host_socket(token: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application, "/ws/host/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    connected, _ = await socket.connect()
    assert connected
    await socket.send_json_to(HELLO)
    assert await socket.receive_json_from(timeout=5) == {"type": "welcome", "page": ANY}
    return socket


@pytest.mark.django_db(transaction=True)
async def test_a_host_token_is_refused_on_the_agent_socket_and_an_agent_token_on_the_host_one(
    tokens,
):
    assert await closed_with("/ws/agent/", tokens["host"]) == 4401
    assert await closed_with("/ws/host/", tokens["agent"]) == 4401
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("protocol", [None, PROTOCOL_VERSION + 1], ids=["none", "newer"])
async def test_a_host_hello_of_another_protocol_is_refused_with_the_runner_to_install(
    tokens, protocol
):
    socket = WebsocketCommunicator(
        application, "/ws/host/", headers=[(b"authorization", f"Bearer {tokens['host']}".encode())]
    )
    assert (await socket.connect())[0]
    hello = {k: v for k, v in HELLO.items() if k != "protocol"}
    await socket.send_json_to(hello if protocol is None else {**hello, "protocol": protocol})
    closed = await socket.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == CLOSE_UPGRADE
    version = importlib.metadata.version("koruweb")
    assert closed["reason"] == (
        f"this koruweb server speaks runner protocol {PROTOCOL_VERSION}; "
        f"install its runner: pip install 'koruweb=={version}'"
    )
    assert not await AgentHost.objects.filter(name="build-box").aexists()
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_a_host_token_reads_no_run_over_the_export_either(tokens, acme):
    client = AsyncClient(headers={"authorization": f"Bearer {tokens['host']}"})
    response = await client.get(f"/api/chats/{uuid.uuid4()}/tool-activity")
    assert response.status_code in (401, 403, 404)
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_a_hello_shows_the_host_online_with_its_agents_and_it_goes_offline_when_it_leaves(
    tokens,
):
    socket = await host_socket(tokens["host"])
    host = await AgentHost.objects.aget(name="build-box")
    assert host.is_online and host.agent_names == ["sdk"] and host.roots == [ROOT]
    await socket.disconnect()
    await host.arefresh_from_db()
    assert not host.is_online
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_revoking_a_host_token_closes_its_socket_and_revokes_its_runs_tokens(tokens, acme):
    socket = await host_socket(tokens["host"])
    host_token = await database_sync_to_async(AgentToken.find)(tokens["host"], TokenKind.HOST)
    assert host_token is not None
    admin = await database_sync_to_async(User.objects.create_superuser)("root")
    run_token, _ = await database_sync_to_async(AgentToken.issue)(
        acme, "build-box/sdk (run)", TokenKind.AGENT, host_token
    )
    client = AsyncClient()
    await client.aforce_login(admin)
    response = await client.post(f"/workspaces/acme/tokens/{host_token.pk}/revoke")
    assert response.status_code == 302
    closed = await socket.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4401
    await run_token.arefresh_from_db()
    assert run_token.revoked_at is not None
    await database_sync_to_async(connections.close_all)()


# --- New run ---------------------------------------------------------------------------------


@pytest.fixture
def online_host(acme: Workspace) -> AgentHost:
    """A host of Acme, online on a socket the test reads (``sent_to_host``)."""
    token, _ = AgentToken.issue(acme, "build-box", TokenKind.HOST)
    return AgentHost.objects.create(
        workspace=acme,
        token=token,
        name="build-box",
        agents=[{"name": "sdk", "command": "python sdk_agent.py"}],
        roots=[ROOT],
        online=True,
        channel=FAKE_CHANNEL,
        seen_at=timezone.now(),
    )


def start_post(host: AgentHost, **fields: str) -> dict[str, str]:
    return {"host": str(host.pk), "agent": "sdk", "root": ROOT, "path": "app", **fields} | {
        "prompt": fields.get("prompt", "basic")
    }


@pytest.mark.django_db(transaction=True)
def test_a_viewer_is_refused_the_page_and_the_post_and_nothing_is_sent(online_host, as_viewer):
    assert as_viewer.get("/runs/new").status_code == 403
    assert as_viewer.get(f"/runs/new?host={online_host.pk}").status_code == 403
    assert as_viewer.post("/runs/new/start", start_post(online_host)).status_code == 403
    assert 'id="new-run-link"' not in as_viewer.get("/").content.decode()
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_outsider_does_not_find_the_host_and_nothing_is_sent(online_host, as_outsider):
    assert as_outsider.get(f"/runs/new?host={online_host.pk}").status_code == 404
    assert as_outsider.post("/runs/new/start", start_post(online_host)).status_code == 404
    assert "build-box" not in as_outsider.get("/runs/new").content.decode()
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_starting_a_run_needs_the_csrf_token(online_host, acme_approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(acme_approver)
    assert client.post("/runs/new/start", start_post(online_host)).status_code == 403
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_approver_starts_a_run_with_a_token_of_its_own_and_waits_for_it(
    online_host, as_approver
):
    assert 'id="new-run-link"' in as_approver.get("/").content.decode()
    response = as_approver.post("/runs/new/start", start_post(online_host, title="Tidy"))
    run = HostRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/new/{run.pk}/"
    [asked] = sent_to_host()
    frame = Start.model_validate_json(asked["text"])
    assert (frame.agent, frame.root, frame.path, frame.prompt, frame.title) == (
        "sdk",
        ROOT,
        "app",
        "basic",
        "Tidy",
    )
    token = AgentToken.find(frame.token)  # an agent token: it writes the run's chat
    assert token is not None and token.issued_by_id == online_host.token_id
    assert token.chat_id == frame.chat_id == run.chat_id  # and that chat alone
    assert token.pk != online_host.token_id
    page = as_approver.get(f"/runs/new/{run.pk}/").content.decode()
    assert 'id="starting"' in page and 'http-equiv="refresh"' in page


@pytest.mark.django_db(transaction=True)
def test_a_run_the_host_could_not_start_says_why_and_its_token_is_revoked(online_host, as_approver):
    as_approver.post("/runs/new/start", start_post(online_host))
    run = HostRun.objects.get()
    from activity.live import hosts

    hosts.started(online_host.pk, Started(id=run.pk, error="the runner did not start: boom"))
    page = as_approver.get(f"/runs/new/{run.pk}/").content.decode()
    assert "the runner did not start: boom" in page and "refresh" not in page
    run.refresh_from_db()
    assert run.status == HostRunStatus.FAILED and run.token is not None
    assert run.token.revoked_at is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"agent": "bash"}, "offers no agent “bash”"),
        ({"path": "../etc"}, "is outside"),
        ({"path": "/etc"}, "is outside"),
        ({"root": "/etc"}, "is not one of the directories"),
        ({"prompt": "  "}, "Write the first prompt"),
    ],
)
def test_what_the_host_would_refuse_is_refused_in_words_and_nothing_is_sent(
    online_host, as_approver, fields, said
):
    response = as_approver.post("/runs/new/start", start_post(online_host, **fields))
    assert response.status_code == 409 and said in response.content.decode()
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_a_hello_keeps_each_agents_label_and_web_modes_and_new_run_shows_labels_only(
    tokens, acme
):
    socket = WebsocketCommunicator(
        application, "/ws/host/", headers=[(b"authorization", f"Bearer {tokens['host']}".encode())]
    )
    assert (await socket.connect())[0]
    demo = {"name": "demo", "command": "/venv/bin/python /srv/demo_agent.py", "label": "Demo"}
    agents = [{**demo, "web_modes": ["default", "auto"]}, HELLO["agents"][0]]  # type: ignore[index]
    await socket.send_json_to({**HELLO, "agents": agents})
    assert (await socket.receive_json_from(timeout=5))["type"] == "welcome"
    host = await AgentHost.objects.aget(name="build-box")
    assert host.agents[0]["label"] == "Demo" and host.agents[0]["web_modes"] == ["default", "auto"]
    assert host.agent_labels == ["Demo", "sdk"]  # an agent without a label goes by its name

    @database_sync_to_async
    def new_run_page() -> tuple[str, str]:
        user = User.objects.create_user("alice")
        acme.memberships.create(user=user, role="admin")
        client = Client()
        client.force_login(user)
        # A start the host does not offer: the form comes back without asking for a listing.
        fields = {"host": str(host.pk), "agent": "nope", "root": ROOT, "prompt": "basic"}
        response = client.post("/runs/new/start", fields)
        assert response.status_code == 409
        return response.content.decode(), client.get("/workspaces/acme/").content.decode()

    page, workspace = await new_run_page()
    assert '<option value="demo">Demo</option>' in page and '<option value="sdk"' in page
    assert "Demo, sdk" in page  # the host's line lists its agents by label
    assert "demo_agent.py" not in page and "sdk_agent.py" not in page  # never a command line
    # The workspace page tells its admins what each agent is: the label, its name, its modes.
    assert "<strong>Demo</strong> (demo) · modes the web may choose: default, auto" in workspace
    await socket.disconnect()
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
def test_an_offline_host_is_an_error_not_a_wait(online_host, as_approver):
    AgentHost.objects.filter(pk=online_host.pk).update(online=False)
    response = as_approver.post("/runs/new/start", start_post(online_host))
    assert response.status_code == 409 and "is offline" in response.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_an_approver_browses_what_the_host_lists_and_a_refusal_reads_in_words(
    tokens, acme_approver
):
    socket = await host_socket(tokens["host"])
    host = await AgentHost.objects.aget(name="build-box")
    client = AsyncClient()
    await client.aforce_login(acme_approver)

    async def host_lists(entries: list[dict] | None, error: str | None = None) -> dict:
        asked: dict = await socket.receive_json_from(timeout=5)
        listing = {"type": "listing", "id": asked["id"], "root": ROOT, "path": asked["path"]}
        await socket.send_json_to({**listing, "entries": entries or [], "error": error})
        return asked

    url = f"/runs/new?host={host.pk}&path=app"
    page, asked = await asyncio.gather(
        client.get(url, headers={"HX-Request": "true"}),
        host_lists([{"name": "src", "dir": True}, {"name": "README.md", "dir": False}]),
    )
    assert asked == {"type": "list", "id": ANY, "root": ROOT, "path": "app"}
    html = page.content.decode()
    assert html.lstrip().startswith('<div id="browse"')  # the listing alone, for htmx
    assert "path=app%2Fsrc" in html and "README.md" in html
    page, _ = await asyncio.gather(
        client.get(f"/runs/new?host={host.pk}&path=escape"),
        host_lists(None, "“escape” is outside /srv/projects"),
    )
    assert "“escape” is outside /srv/projects" in page.content.decode()
    await socket.disconnect()
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
def test_a_host_that_does_not_answer_is_an_error_within_seconds(
    online_host, as_approver, monkeypatch
):

    monkeypatch.setattr(host_asks, "HOST_REPLY_SECONDS", 0.2)
    page = as_approver.get(f"/runs/new?host={online_host.pk}").content.decode()
    assert "did not answer within 0.2 s" in page


@pytest.mark.django_db(transaction=True)
def test_hosts_show_on_the_workspace_page_with_their_agents_and_state(online_host, as_admin):
    html = as_admin.get("/workspaces/acme/").content.decode()
    row = html[html.index(f'id="host-{online_host.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "build-box" in row and "online" in row and "sdk" in row and ROOT in row
    created = as_admin.post("/workspaces/acme/tokens/create", {"name": "ci-box", "kind": "host"})
    assert "manage.py agent host --server" in created.content.decode()
    assert AgentToken.objects.get(name="ci-box").kind == TokenKind.HOST


class FakeSocket:
    channel_name = "specific.test!fake"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send_text(self, text: str) -> None:
        self.sent.append(text)

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        pass

    async def join(self, group: str) -> None:
        pass

    async def leave(self, group: str) -> None:
        pass


@pytest.mark.django_db(transaction=True)
async def test_the_hosts_heartbeat_ends_with_its_consumer_even_one_that_dies_without_disconnect(
    tokens, monkeypatch
):
    import json

    from activity.live import hosts
    from activity.push import broadcast
    from activity.sockets import consumers

    token = await database_sync_to_async(AgentToken.find)(tokens["host"], TokenKind.HOST)
    assert token is not None
    session = hosts.HostSession(token.workspace_id, token.pk, FakeSocket(), broadcast.announce)
    await session.receive(json.dumps(HELLO))
    assert session.heartbeat is not None and not session.heartbeat.done()

    async def dies(self, scope, receive, send):
        raise RuntimeError("the receive loop failed")

    monkeypatch.setattr(consumers.Relay, "__call__", dies)
    consumer = consumers.HostConsumer()
    consumer.session = session
    with pytest.raises(RuntimeError):
        await consumer({"type": "websocket"}, None, None)
    await asyncio.sleep(0)
    assert session.heartbeat.cancelled()
    await database_sync_to_async(connections.close_all)()


# --- run tokens: their run's chat alone, revoked when the run ends ------------------------------


def starts_sent() -> list[dict]:
    """The ``start`` frames sent to the fake host (not the listings a page asked for)."""
    return [asked for asked in sent_to_host() if '"type":"start"' in asked["text"]]


def started_run(host: AgentHost, client: Client, **fields: str) -> tuple[HostRun, Start]:
    """A run *New run* asked ``host`` to start, and the ``start`` frame the host got."""
    response = client.post("/runs/new/start", start_post(host, **fields))
    assert response.status_code == 302, response.content.decode()[:500]
    [asked] = starts_sent()
    frame = Start.model_validate_json(asked["text"])
    return HostRun.objects.get(pk=frame.id), frame


async def runner_closed_with(token: str, chat_id: uuid.UUID, acked: int = 0) -> dict[str, Any]:
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to(frames.hello(chat_id, acked))
    said: dict[str, Any] = await socket.receive_output(timeout=5)
    if said["type"] == "websocket.send" and '"type":"error"' in said["text"]:  # why, then close
        said = await socket.receive_output(timeout=5)
    await socket.disconnect()
    return said


@pytest.mark.django_db(transaction=True)
async def test_a_run_token_is_refused_on_another_chat_and_on_a_new_chat_and_taken_on_its_own(
    online_host, acme_approver, acme
):
    client = Client()
    await database_sync_to_async(client.force_login)(acme_approver)
    run, frame = await database_sync_to_async(started_run)(online_host, client)
    other = await database_sync_to_async(make_chat)(acme)
    for chat_id, acked in ((other, 1), (uuid.uuid4(), 0)):
        said = await runner_closed_with(frame.token, chat_id, acked)
        assert said["type"] == "websocket.close" and said["code"] == CLOSE_FORBIDDEN, said
        assert "its own run's chat only" in said["reason"]
    assert await Chat.objects.acount() == 1  # no new chat was made
    said = await runner_closed_with(frame.token, frame.chat_id)
    assert said["type"] == "websocket.send", said  # its ack: the run's own chat is made
    assert await Chat.objects.filter(pk=frame.chat_id, workspace=acme).aexists()
    await database_sync_to_async(connections.close_all)()


def make_chat(workspace: Workspace) -> uuid.UUID:
    chat_id = uuid.uuid4()
    presence.claim(workspace.pk, chat_id, "specific.test!other", 0, frames.secret_of(chat_id))
    return chat_id


@pytest.mark.django_db(transaction=True)
def test_a_run_token_exports_its_own_run_and_no_other_chat(online_host, as_approver, acme):
    run, frame = started_run(online_host, as_approver)
    other = make_chat(acme)
    presence.claim(acme.pk, frame.chat_id, "specific.test!run", 0, frames.secret_of(frame.chat_id))
    reader = Client(headers={"authorization": f"Bearer {frame.token}"})
    assert reader.get(f"/api/chats/{other}/tool-activity").status_code == 404
    assert reader.get(f"/api/chats/{frame.chat_id}/tool-activity").status_code == 200
    workspace_token = AgentToken.issue(acme, "laptop")[1]  # a token of the workspace's page
    everyone = Client(headers={"authorization": f"Bearer {workspace_token}"})
    assert everyone.get(f"/api/chats/{other}/tool-activity").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_host_naming_a_chat_it_did_not_start_is_refused_and_the_page_goes_nowhere(
    online_host, as_approver, acme
):
    run, _ = started_run(online_host, as_approver)
    other = make_chat(acme)
    hosts.started(online_host.pk, Started(id=run.pk, chat_url=f"http://x/chats/{other}/"))
    run.refresh_from_db()
    assert run.status == HostRunStatus.FAILED and "not this run's" in run.error
    assert run.token is not None and run.token.revoked_at is not None
    page = as_approver.get(f"/runs/new/{run.pk}/")
    assert page.status_code == 200 and str(other) not in page.content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("field", ["agent", "root", "path", "prompt", "title"])
def test_a_nul_in_any_start_field_is_refused_in_words_and_nothing_is_sent(
    online_host, as_approver, field
):
    values = start_post(online_host, title="Tidy")
    values[field] = values[field][:2] + "\x00" + values[field][2:]
    response = as_approver.post("/runs/new/start", values)
    said = response.content.decode()
    assert response.status_code in (404, 409), said[:300]
    if response.status_code == 409:
        assert "NUL" in said or "offers no agent" in said or "not one of the" in said
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("prompt", "a\x00b", "The first prompt holds a NUL"),
        ("title", "a\x00b", "The title holds a NUL"),
        ("path", "app\x00", "The directory holds a NUL"),
        ("prompt", "half \ud800 of a pair", "lone surrogate"),
        ("title", "half \udfff", "lone surrogate"),
        ("title", "t" * 201, "The title is at most 200 characters"),
        ("prompt", "p" * 30_001, "at most 30,000 characters"),
        ("path", "p" * 4097, "at most 4,096 characters"),
    ],
)
def test_what_no_host_could_take_is_refused_before_it_is_sent(
    online_host, acme_approver, field, value, said
):
    asked: dict[str, Any] = {"agent": "sdk", "root": ROOT, "path": "app", "prompt": "basic"}
    asked[field] = value
    with pytest.raises(host_asks.HostError, match=said):
        host_asks.start_run(online_host, acme_approver, **asked)
    assert sent_to_host() == [] and not HostRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_busy_host_shows_busy_and_is_refused_a_start(online_host, as_approver):
    AgentHost.objects.filter(pk=online_host.pk).update(max_runs=2)
    started_run(online_host, as_approver)
    page = as_approver.get("/runs/new").content.decode()
    assert f'id="busy-{online_host.pk}"' not in page and "1/2 runs" in page
    started_run(online_host, as_approver)
    page = as_approver.get("/runs/new").content.decode()
    assert f'id="busy-{online_host.pk}"' in page and "busy (2/2)" in page
    response = as_approver.post("/runs/new/start", start_post(online_host))
    assert response.status_code == 409 and "is busy (2/2 runs)" in response.content.decode()
    assert starts_sent() == [] and HostRun.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_starts_past_the_limit_per_person_per_minute_are_refused_with_429(
    online_host, as_approver, settings
):
    settings.HOST_STARTS_PER_MINUTE = 2
    for _ in range(2):
        started_run(online_host, as_approver)
    response = as_approver.post("/runs/new/start", start_post(online_host))
    assert response.status_code == 429
    assert "started 2 runs within a minute" in response.content.decode()
    assert sent_to_host() == [] and HostRun.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_run_stuck_starting_fails_and_its_token_is_revoked_by_the_sweep(
    online_host, as_approver, settings
):
    settings.HOST_START_SECONDS = 1
    run, _ = started_run(online_host, as_approver)
    assert run_tokens.sweep() == []  # not stuck yet
    later = timezone.now() + timedelta(seconds=2)
    assert run_tokens.sweep(later) == [run.token_id]
    run.refresh_from_db()
    assert run.status == HostRunStatus.FAILED and "did not start it within 1 s" in run.error
    assert run.token is not None and run.token.revoked_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_runner_is_gone_past_the_grace_loses_its_token_and_not_before(
    online_host, as_approver, acme, settings
):
    settings.RUNNER_GRACE_SECONDS = 1
    run, frame = started_run(online_host, as_approver)
    channel = "specific.test!run"
    presence.claim(acme.pk, frame.chat_id, channel, 0, frames.secret_of(frame.chat_id))
    hosts.started(online_host.pk, Started(id=run.pk, chat_url=f"http://x/chats/{frame.chat_id}/"))
    later = timezone.now() + timedelta(seconds=5)
    assert run_tokens.sweep(later) == []  # its runner is connected
    presence.disconnect(frame.chat_id, channel)
    assert run_tokens.sweep() == []  # gone, but within the grace (a blip, a server restart)
    assert run_tokens.sweep(later) == [run.token_id]
    run.refresh_from_db()
    assert run.status == HostRunStatus.EXITED
    assert run.token is not None and run.token.revoked_at is not None


# --- the host's hello: one host per name, its runs reconciled ------------------------------------


async def hello_from(token: str, **more: object) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application, "/ws/host/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to({**HELLO, **more})
    return socket


@pytest.mark.django_db(transaction=True)
async def test_a_second_live_host_of_the_same_name_is_refused_and_the_same_host_comes_back(
    tokens, acme
):
    first = await hello_from(tokens["host"], instance="first")
    assert (await first.receive_json_from(timeout=5))["type"] == "welcome"
    _, other_token = await database_sync_to_async(AgentToken.issue)(acme, "ci", TokenKind.HOST)
    for token, instance in ((other_token, "second"), (tokens["host"], "second")):
        second = await hello_from(token, instance=instance)
        closed = await second.receive_output(timeout=5)
        assert closed["type"] == "websocket.close" and closed["code"] == CLOSE_FORBIDDEN
        assert "a host named build-box is online in this workspace already" in closed["reason"]
    again = await hello_from(tokens["host"], instance="first")  # its reconnect, the old socket up
    assert (await again.receive_json_from(timeout=5))["type"] == "welcome"
    host = await AgentHost.objects.aget(name="build-box")
    assert host.channel != "" and await AgentHost.objects.acount() == 1
    await first.disconnect()
    await again.disconnect()
    await database_sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_a_host_that_reconnects_without_a_run_has_that_runs_token_revoked(tokens, acme):
    socket = await hello_from(tokens["host"], instance="one", runs=[])
    assert (await socket.receive_json_from(timeout=5))["type"] == "welcome"
    host = await AgentHost.objects.aget(name="build-box")
    host_token = await AgentToken.objects.aget(kind=TokenKind.HOST)

    def runs() -> tuple[HostRun, HostRun]:
        made = []
        for status in (HostRunStatus.STARTED, HostRunStatus.STARTED):
            token, _ = AgentToken.issue(acme, "run", TokenKind.AGENT, host_token, uuid.uuid4())
            made.append(HostRun.objects.create(host=host, agent="sdk", token=token, status=status))
        return made[0], made[1]

    kept, ended = await database_sync_to_async(runs)()
    await socket.disconnect()
    socket = await hello_from(tokens["host"], instance="one", runs=[str(kept.pk)])
    assert (await socket.receive_json_from(timeout=5))["type"] == "welcome"
    kept_token = await AgentToken.objects.aget(pk=kept.token_id)
    ended_token = await AgentToken.objects.aget(pk=ended.token_id)
    assert kept_token.revoked_at is None and ended_token.revoked_at is not None
    assert (await HostRun.objects.aget(pk=ended.pk)).status == HostRunStatus.EXITED
    assert (await HostRun.objects.aget(pk=kept.pk)).status == HostRunStatus.STARTED
    await socket.disconnect()
    await database_sync_to_async(connections.close_all)()
