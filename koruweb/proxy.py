"""A small TCP reverse proxy: team mode on one machine, and network faults in tests.

It forwards bytes both ways (layer 4), so the ``Host`` header, the WebSocket upgrade and the
server's exact-Origin check pass untouched. Each new client connection goes to the next
upstream, round-robin; one that refuses is skipped, and if all refuse the client is closed.

    python -m koruweb.proxy --listen 127.0.0.1:8000 --upstream 127.0.0.1:8001 \\
        --upstream 127.0.0.1:8002

A bad address is a one-line error and exit status 2; SIGINT or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from collections.abc import Callable

Address = tuple[str, int]
CHUNK = 64 * 1024
CONNECT_TIMEOUT = 5.0


class _Link:
    """One client connection, its upstream connection and the two tasks pumping between them."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.writers = (client, upstream)
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()

    def close(self) -> None:
        for writer in self.writers:
            writer.close()  # sends what is still buffered, then closes


class Proxy:
    def __init__(self, upstreams: list[Address], host: str = "127.0.0.1", port: int = 0) -> None:
        if not upstreams:
            raise ValueError("a proxy needs at least one upstream")
        self.upstreams = list(upstreams)
        self.host = host
        self.port = port
        self.delay = 0.0  # seconds added before forwarding each chunk
        self._next = 0
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._links: set[_Link] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def connections(self) -> int:
        """The client connections open now."""
        return len(self._clients)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        if self._server is not None:
            await self._server.wait_closed()

    def cut(self) -> None:
        """Drop every open connection at once, both sides, as a network failure would."""
        for link in list(self._links):
            link.abort()
        for client in list(self._clients):
            client.transport.abort()

    def stall(self, on: bool) -> None:
        """Hold every byte (connections stay open) until called again with False."""
        self._flowing.clear() if on else self._flowing.set()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for i in range(len(self.upstreams)):
            index = (self._next + i) % len(self.upstreams)
            try:
                conn = await asyncio.wait_for(
                    asyncio.open_connection(*self.upstreams[index]), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError):
                continue  # refused or unreachable: try the next one
            self._next = index + 1
            return conn
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        link: _Link | None = None
        try:
            upstream = await self._connect()
            if upstream is None:
                return
            link = _Link(writer, upstream[1])
            self._links.add(link)
            link.tasks = [
                asyncio.create_task(self._pump(reader, upstream[1], link)),
                asyncio.create_task(self._pump(upstream[0], writer, link)),
            ]
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._clients.discard(writer)
            if link is not None:
                self._links.discard(link)
                link.close()
            writer.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        """Copy one direction until its end of file, then pass the end of file on.

        A reset on either side drops both connections, as it would without the proxy.
        """
        try:
            while data := await reader.read(CHUNK):
                if self.delay > 0:
                    await asyncio.sleep(self.delay)
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof() and not writer.is_closing():
                writer.write_eof()
        except OSError:
            link.abort()


class ProxyThread:
    """A Proxy on its own event loop in a daemon thread, for synchronous code and tests."""

    def __init__(self, upstreams: list[Address], host: str = "127.0.0.1", port: int = 0) -> None:
        self.proxy = Proxy(upstreams, host, port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        return self._call(lambda: self.proxy.connections)

    @property
    def delay(self) -> float:
        return self.proxy.delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self._call(lambda: setattr(self.proxy, "delay", seconds))

    def cut(self) -> None:
        self._call(self.proxy.cut)

    def stall(self, on: bool) -> None:
        self._call(lambda: self.proxy.stall(on))

    def stop(self) -> None:
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()

    def _call[T](self, fn: Callable[[], T]) -> T:
        """Run fn on the proxy's loop and wait for it: done when this returns."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)


def parse_address(text: str) -> Address:
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"bad address {text!r}: use HOST:PORT, e.g. 127.0.0.1:8000")
    return host, int(port)


async def _run(listen: Address, upstreams: list[Address]) -> None:
    proxy = Proxy(upstreams, *listen)
    await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    targets = ", ".join(f"{h}:{p}" for h, p in upstreams)
    print(f"koruweb.proxy: listening on {listen[0]}:{proxy.port}, forwarding to {targets}")
    sys.stdout.flush()
    await stop.wait()
    await proxy.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koruweb.proxy", description=__doc__)
    parser.add_argument("--listen", required=True, help="HOST:PORT to listen on")
    parser.add_argument("--upstream", required=True, action="append", help="HOST:PORT (repeat)")
    args = parser.parse_args(argv)
    try:
        listen = parse_address(args.listen)
        upstreams = [parse_address(u) for u in args.upstream]
        asyncio.run(_run(listen, upstreams))
    except (ValueError, OSError) as exc:
        print(f"koruweb.proxy: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
