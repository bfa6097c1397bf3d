"""A browser's socket opens only from the page's own origin: scheme, host and port
(docs/gotchas.md#the-origin-check-ignores-scheme-and-port).

A page on another port of the same host is the same site to SameSite=Lax, so the browser sends
the session cookie along; only an exact Origin check keeps it from reading the inbox and chats.
"""

from __future__ import annotations

import uuid

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from activity.sockets.origins import origin_allowed
from koruweb.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True)]
HOST = "127.0.0.1:8000"


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@pytest.fixture
async def cookie() -> str:
    @database_sync_to_async
    def log_in() -> str:
        client = Client()
        client.force_login(User.objects.create_superuser("root", password=None))
        return "sessionid=" + str(client.cookies["sessionid"].value)

    cookie: str = await log_in()
    return cookie


async def opens(path: str, cookie: str, origin: str | None, **extra: str) -> bool:
    headers = [(b"host", HOST.encode()), (b"cookie", cookie.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(name.replace("_", "-").encode(), value.encode()) for name, value in extra.items()]
    socket = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await socket.connect()
    await socket.disconnect()
    return bool(connected)


SOCKETS = ["/ws/inbox/", f"/ws/chats/{uuid.UUID(int=1)}/"]  # one id: xdist workers collect alike


@pytest.mark.parametrize("path", SOCKETS)
async def test_a_page_on_the_servers_own_origin_opens_the_socket(path, cookie):
    assert await opens(path, cookie, f"http://{HOST}")


@pytest.mark.parametrize("path", SOCKETS)
@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:8799",  # another port of the same host: same site to SameSite=Lax
        "http://127.0.0.1",  # the default port is another port too
        "https://127.0.0.1:8000",  # another scheme
        "http://localhost:8000",  # another name for the same machine
        "null",
    ],
)
async def test_a_page_whose_origin_differs_in_port_scheme_or_host_is_refused(path, origin, cookie):
    assert not await opens(path, cookie, origin)


@pytest.mark.parametrize("path", SOCKETS)
async def test_a_browser_socket_without_an_origin_is_refused(path, cookie):
    assert not await opens(path, cookie, None)


async def test_a_host_outside_allowed_hosts_is_refused_even_when_the_origin_matches_it(cookie):
    headers = [(b"host", b"rebound.example:8000"), (b"origin", b"http://rebound.example:8000")]
    socket = WebsocketCommunicator(application, "/ws/inbox/", headers=headers)
    assert not (await socket.connect())[0]


@pytest.mark.parametrize("path", SOCKETS)
async def test_a_trusted_origin_opens_the_socket(path, cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://localhost:8443"]  # a proxy's public origin
    assert await opens(path, cookie, "https://localhost:8443")
    assert not await opens(path, cookie, "https://localhost:8444")
    assert not await opens(path, cookie, "http://localhost:8443")


def test_a_trusted_wildcard_origin_admits_its_subdomains_only(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.com"]

    def scope(origin: str) -> dict:
        return {"type": "websocket", "headers": [(b"host", b"x"), (b"origin", origin.encode())]}

    assert origin_allowed(scope("https://team.example.com"))
    assert not origin_allowed(scope("http://team.example.com"))
    assert not origin_allowed(scope("https://example.org"))
    assert not origin_allowed(scope("https://team.example.com.evil.org"))


async def test_behind_a_tls_proxy_the_https_origin_of_the_forwarded_host_opens_the_socket(
    cookie, settings
):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert await opens("/ws/inbox/", cookie, f"https://{HOST}", x_forwarded_proto="https")
    assert not await opens("/ws/inbox/", cookie, f"http://{HOST}", x_forwarded_proto="https")
    assert not await opens("/ws/inbox/", cookie, f"https://{HOST}")


async def test_the_runners_socket_needs_no_origin_and_still_asks_for_its_token():
    socket = WebsocketCommunicator(application, "/ws/agent/", headers=[(b"host", HOST.encode())])
    connected, _ = await socket.connect()
    assert connected  # accepted, then closed for want of a token, never refused for its origin
    assert (await socket.receive_output())["code"] == 4401
