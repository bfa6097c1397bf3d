"""Agent hosts on the server: host and agent tokens on their sockets, revocation, the host's
heartbeat, and *New run* (who may, CSRF, what is sent, what is refused in words). The host's own
side is tests/runner/test_host.py."""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
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

from activity.models import Workspace
from activity.models.accounts import AgentHost, AgentToken, HostRun, HostRunStatus, TokenKind
from activity.wire.frames import CLOSE_UPGRADE, PROTOCOL_VERSION
from activity.wire.hostframes import Start, Started
from koruweb.asgi import application

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
    from activity.live import hosts

    monkeypatch.setattr(hosts, "HOST_REPLY_SECONDS", 0.2)
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
    from activity.sockets import consumers

    token = await database_sync_to_async(AgentToken.find)(tokens["host"], TokenKind.HOST)
    assert token is not None
    session = hosts.HostSession(token.workspace_id, token.pk, FakeSocket())
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
