"""koruweb.proxy: a TCP proxy in front of tiny echo servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from koruweb.proxy import Proxy, ProxyThread, parse_address
from tests.liveserver import free_port

# The proxy is TCP: no database.
pytestmark = pytest.mark.once


async def echo_server(tag: bytes = b"") -> asyncio.Server:
    """Answers each chunk with ``tag`` + the chunk, until the client closes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(tag + data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def address(server: asyncio.Server) -> tuple[str, int]:
    return "127.0.0.1", int(server.sockets[0].getsockname()[1])


@pytest.fixture
async def servers() -> AsyncIterator[list[asyncio.Server]]:
    made = [await echo_server(b"a:"), await echo_server(b"b:")]
    yield made
    for server in made:
        server.close()


async def start(upstreams: list[tuple[str, int]]) -> Proxy:
    proxy = Proxy(upstreams)
    await proxy.start()
    return proxy


async def connect(proxy: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def ask(proxy: Proxy, data: bytes) -> bytes:
    reader, writer = await connect(proxy)
    writer.write(data)
    answer = await asyncio.wait_for(reader.read(100), 5)
    writer.close()
    return answer


async def dropped(reader: asyncio.StreamReader) -> bool:
    """Whether the connection ends (reset or closed) rather than bringing more bytes."""
    try:
        return await asyncio.wait_for(reader.read(100), 5) == b""
    except ConnectionResetError:
        return True


async def test_bytes_go_through_both_ways(servers):
    proxy = await start([address(servers[0])])
    reader, writer = await connect(proxy)
    for word in (b"hello", b"again"):
        writer.write(word)
        assert await asyncio.wait_for(reader.read(100), 5) == b"a:" + word
    assert proxy.connections == 1
    writer.close()
    await proxy.close()


async def test_new_connections_take_the_upstreams_in_turn(servers):
    proxy = await start([address(s) for s in servers])
    answers = [await ask(proxy, b"x") for _ in range(4)]
    assert answers == [b"a:x", b"b:x", b"a:x", b"b:x"]
    await proxy.close()


async def test_an_upstream_that_is_down_is_skipped(servers):
    down = ("127.0.0.1", free_port())
    proxy = await start([down, address(servers[1])])
    assert [await ask(proxy, b"x") for _ in range(3)] == [b"b:x"] * 3
    await proxy.close()


async def test_the_client_is_closed_when_every_upstream_is_down():
    proxy = await start([("127.0.0.1", free_port()), ("127.0.0.1", free_port())])
    reader, writer = await connect(proxy)
    assert await dropped(reader)
    writer.close()
    await proxy.close()


async def test_cut_drops_open_connections_and_new_ones_still_work(servers):
    proxy = await start([address(servers[0])])
    reader, writer = await connect(proxy)
    writer.write(b"one")
    assert await asyncio.wait_for(reader.read(100), 5) == b"a:one"
    proxy.cut()
    assert await dropped(reader)
    writer.close()
    assert proxy.connections == 0
    assert await ask(proxy, b"two") == b"a:two"
    await proxy.close()


async def test_a_stalled_proxy_holds_the_bytes_until_it_is_resumed(servers):
    proxy = await start([address(servers[0])])
    reader, writer = await connect(proxy)
    proxy.stall(True)
    writer.write(b"held")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.read(100), 0.3)
    assert proxy.connections == 1
    proxy.stall(False)
    assert await asyncio.wait_for(reader.read(100), 5) == b"a:held"
    writer.close()
    await proxy.close()


async def test_a_delay_slows_each_chunk(servers):
    proxy = await start([address(servers[0])])
    proxy.delay = 0.2
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await ask(proxy, b"slow") == b"a:slow"
    assert loop.time() - began >= 0.4  # there and back
    await proxy.close()


async def test_several_megabytes_arrive_intact_byte_for_byte():
    server = await echo_server()
    proxy = await start([address(server)])
    payload = os.urandom(8 * 1024 * 1024)
    reader, writer = await connect(proxy)

    async def send() -> None:
        writer.write(payload)
        await writer.drain()
        writer.write_eof()  # the end of file passes through, and the echo's comes back

    sending = asyncio.create_task(send())
    received = bytearray()
    while chunk := await asyncio.wait_for(reader.read(1 << 20), 10):
        received += chunk
    await sending
    assert bytes(received) == payload
    writer.close()
    await proxy.close()
    server.close()


def test_the_thread_version_serves_synchronous_code():
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        proxy = ProxyThread([("127.0.0.1", upstream.getsockname()[1])])
        proxy.start()
        try:
            assert proxy.url == f"http://127.0.0.1:{proxy.port}"
            assert proxy.ws_url == f"ws://127.0.0.1:{proxy.port}"
            client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            conn, _ = upstream.accept()
            conn.settimeout(5)
            client.sendall(b"ping")
            assert conn.recv(100) == b"ping"
            proxy.stall(True)
            proxy.delay = 0.01
            assert proxy.delay == 0.01
            client.sendall(b"held")
            conn.settimeout(0.3)
            with pytest.raises(TimeoutError):
                conn.recv(100)
            proxy.stall(False)
            conn.settimeout(5)
            assert conn.recv(100) == b"held"
            assert proxy.connections == 1
            proxy.cut()
            assert conn.recv(100) == b""  # the upstream side is dropped too
            conn.close()
            client.close()
        finally:
            proxy.stop()


def test_the_command_line_refuses_a_bad_address_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "koruweb.proxy", "--listen", "nowhere", "--upstream", "1.2.3.4:5"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "bad address 'nowhere'" in result.stderr


def test_addresses_are_host_and_port():
    assert parse_address("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_address("[::1]:8000") == ("::1", 8000)
    for bad in ("8000", "host:", ":80", "host:99999", "host:http"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_the_command_line_says_where_it_listens_and_stops_on_sigterm():
    port, upstream = free_port(), free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "koruweb.proxy", "--listen", f"127.0.0.1:{port}"]
        + ["--upstream", f"127.0.0.1:{upstream}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert f"127.0.0.1:{port}" in line and f"127.0.0.1:{upstream}" in line
        child.send_signal(signal.SIGTERM)
        assert child.wait(10) == 0
    finally:
        child.kill()
        child.communicate()
