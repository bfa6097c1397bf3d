"""A runner for the browser tests: a real socket to the server's ``/ws/agent/``.

The ``websockets`` package is not among koruweb's dependencies, so this speaks the few parts of
RFC 6455 a runner needs (client handshake, masked text frames, ping/pong, close) over a plain
blocking socket. ``Runner`` keeps what a real runner keeps: every frame until it is acknowledged,
so after a reconnect it resends exactly what the server does not have.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import struct
import time
import uuid
from typing import Any

from tests import frames

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class Closed(Exception):
    """The server closed the socket (``code`` is None when the connection just dropped)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"socket closed: {code} {reason}".strip())
        self.code = code
        self.reason = reason


class WebSocket:
    """A blocking WebSocket client: just enough for JSON text frames."""

    def __init__(self, host: str, port: int, path: str, headers: dict[str, str]) -> None:
        self.sock = socket.create_connection((host, port), timeout=5)
        self.buffer = b""
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status, *fields = head.decode("latin-1").split("\r\n")
        if " 101 " not in f"{status} ":
            raise ConnectionError(f"no WebSocket upgrade: {status}")
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if f"sec-websocket-accept: {accept.lower()}" not in [f.lower() for f in fields]:
            raise ConnectionError("bad Sec-WebSocket-Accept")

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Closed(None, "connection dropped")
        self.buffer += chunk

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_json(self, data: Any) -> None:
        self._send_frame(TEXT, json.dumps(data).encode())

    def receive_json(self, timeout: float = 5) -> Any:
        """The next text message, as JSON; answers pings; raises ``Closed`` on a close."""
        self.sock.settimeout(timeout)
        message = b""
        while True:
            first, second = self._take(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._take(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._take(8))
            payload = self._take(length)
            if opcode == PING:
                self._send_frame(PONG, payload)
            elif opcode == CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode(errors="replace"))
            elif opcode in (TEXT, 0x0):
                message += payload
                if first & 0x80:
                    return json.loads(message)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send_frame(CLOSE, struct.pack("!H", 1000))
        self.sock.close()


class Runner:
    """One chat's runner: says hello, numbers nothing itself, keeps unacknowledged frames."""

    def __init__(self, port: int, token: str, chat_id: uuid.UUID) -> None:
        self.port = port
        self.token = token
        self.chat_id = chat_id
        self.acked = 0
        self.unacked: dict[int, dict[str, Any]] = {}
        self.errors: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []  # what else came while waiting for acks
        self.socket: WebSocket | None = None

    def connect(self, within: float = 10) -> int:
        """Open the socket (retrying while the server is down), say hello, resend what the
        server lacks. Returns the seq the server says it has."""
        deadline = time.monotonic() + within
        while True:
            try:
                self.socket = WebSocket(
                    "127.0.0.1", self.port, "/ws/agent/", {"Authorization": f"Bearer {self.token}"}
                )
                break
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.socket.send_json(frames.hello(self.chat_id, acked=self.acked))
        reply = self.socket.receive_json()
        assert reply["type"] == "ack", reply
        self._acknowledged(reply["seq"])
        for seq in sorted(self.unacked):
            self.socket.send_json(self.unacked[seq])
        return int(reply["seq"])

    def _acknowledged(self, seq: int) -> None:
        self.acked = max(self.acked, seq)
        for done in [s for s in self.unacked if s <= seq]:
            del self.unacked[done]

    def send(self, *sent: dict[str, Any], wait: bool = True) -> None:
        """Send numbered frames; with ``wait``, until the server acknowledges all of them."""
        assert self.socket is not None, "connect first"
        for frame in sent:
            self.unacked[frame["seq"]] = frame
            self.socket.send_json(frame)
        if wait:
            self.wait_acked(max(f["seq"] for f in sent))

    def wait_acked(self, seq: int | None = None, timeout: float = 10) -> None:
        """Read replies until everything up to ``seq`` (default: all sent) is acknowledged."""
        assert self.socket is not None, "connect first"
        target = seq if seq is not None else max(self.unacked, default=self.acked)
        deadline = time.monotonic() + timeout
        while self.acked < target:
            reply = self.socket.receive_json(timeout=max(0.1, deadline - time.monotonic()))
            if reply["type"] == "error":
                self.errors.append(reply)
            elif reply["type"] == "ack":
                self._acknowledged(reply["seq"])
            else:
                self.received.append(reply)
        assert not self.errors, f"the server refused frames: {self.errors}"

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
            self.socket = None
