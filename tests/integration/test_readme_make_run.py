"""`make run` and `make run-team` as README.md writes them: up, usable, and gone after a signal.

Each starts ``make`` in a session of its own with only ``HOST`` and ``PORT`` set (and where its
data goes), waits for the login page, logs in as demo / demo, finds the demo agent's run on the
runs list, then stops ``make`` and checks that nothing it started is left.
"""

from __future__ import annotations

import contextlib
import http.client
import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.liveserver import BASE_DIR, REDIS_URL, free_port

DEMO_TITLE = "Demo: tidy up a small project"
PG_SERVER = os.environ.get("PG_TEST_URL", "postgres://postgres@127.0.0.1:5432/koruweb")


def free_ports(count: int) -> int:
    """A port such that it and the ``count - 1`` after it are free on 127.0.0.1."""
    for _ in range(50):
        port = free_port()
        if port + count > 65536:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for p in range(port, port + count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return port
    raise RuntimeError("no run of free ports")


def make_env(port: int, **extra: str) -> dict[str, str]:
    """The caller's environment as a developer's shell would have it, with PORT and HOST."""
    drop = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "MAKEFLAGS", "MAKELEVEL"}
    drop |= {"MFLAGS", "DJANGO_ALLOW_ASYNC_UNSAFE", "SECRET_KEY"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "HOST": "127.0.0.1", "PORT": str(port), **extra}


class Browser:
    """Cookies, CSRF and pages over urllib: what a person's browser does, minus the scripts."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        handler = urllib.request.HTTPCookieProcessor(self.jar)
        self.opener = urllib.request.build_opener(handler)

    def get(self, path: str, base: str = "") -> tuple[str, str]:
        """The final address and the page at ``path``, of ``base`` or this browser's server."""
        with self.opener.open((base or self.base) + path, timeout=10) as response:
            return response.geturl(), response.read().decode()

    def log_in(self, user: str, password: str) -> str:
        _, page = self.get("/accounts/login/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert found, page[:500]
        form = {"csrfmiddlewaretoken": found[1], "username": user, "password": password}
        request = urllib.request.Request(
            self.base + "/accounts/login/", data=urllib.parse.urlencode(form).encode()
        )
        with self.opener.open(request, timeout=10) as response:
            return str(response.geturl())


def until[T](what: Callable[[], T | None], within: float, why: Callable[[], str]) -> T:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            found = what()
            if found:
                return found
        time.sleep(0.25)
    raise AssertionError(why())


def session_pids(sid: int) -> list[int]:
    """The processes of a session (the demo agent runs in a process group of its own)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if (
                int(fields[3]) == sid and fields[0] != "Z"
            ):  # after "pid (comm)": state ppid pgrp sid
                pids.append(int(stat.parent.name))
    return pids


def connections_to(ports: tuple[int, ...]) -> set[tuple[int, int]]:
    """The established TCP connections (local port, remote port) that reach one of ``ports``."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(f.split(":")[1], 16) for f in fields[1:3])
        if fields[3] == "01" and remote in ports:  # 01: ESTABLISHED
            found.add((local, remote))
    return found


def two_connections(port: int, daphnes: tuple[int, ...]) -> Counter[int]:
    """How many of two connections to the proxy on ``port`` reached each Daphne."""
    before = connections_to(daphnes)
    pages = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(2)]
    try:
        for conn in pages:
            conn.request("GET", "/accounts/login/")
            assert conn.getresponse().read()
        return Counter(remote for _, remote in connections_to(daphnes) - before)
    finally:
        for conn in pages:
            conn.close()


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def as_in_a_terminal() -> None:
    """In the child: Ctrl-C and Ctrl-\\ do what they do to a command typed in a terminal. A test
    run started in the background of a shell (``make test &``, ``nohup``) ignores SIGINT and
    SIGQUIT, every process it starts inherits that, and a shell that starts ignoring a signal can
    never trap it: ``make run`` would not hear Ctrl-C at all (docs/gotchas.md)."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def make(target: str, port: int, log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        child = subprocess.Popen(
            ["make", target],
            cwd=BASE_DIR,
            env=make_env(port, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=as_in_a_terminal,
        )
    try:
        yield child
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not session_pids(child.pid):
                break
            for pid in session_pids(child.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)
        child.wait(5)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def see_the_demo_run(base: str, log: Path) -> Browser:
    browser = Browser(base)
    until(lambda: browser.get("/accounts/login/"), 60, lambda: f"no login page:\n{tail(log)}")
    assert browser.log_in("demo", "demo") == base + "/"
    shows_the_run(browser, base, log)
    return browser


def shows_the_run(browser: Browser, base: str, log: Path) -> None:
    until(
        lambda: DEMO_TITLE in browser.get("/", base=base)[1],
        30,
        lambda: f"{base}/ does not list the demo run:\n{tail(log)}",
    )


def opens_the_printed_link(browser: Browser, port: int, log: Path) -> None:
    """The run's page the runner printed opens for the demo login (it is in its workspace)."""
    printed = until(
        lambda: re.search(rf"http://127\.0\.0\.1:{port}/chats/[0-9a-f-]+/", log.read_text()),
        30,
        lambda: f"the runner printed no page:\n{tail(log)}",
    )
    address, page = browser.get(printed[0].removeprefix(browser.base))
    assert address == printed[0] and DEMO_TITLE in page


def keeps_its_token_private(var: Path, sid: int) -> None:
    """The demo token is kept under var/ for the next ``make run``, readable by its owner only,
    and no process shows it on its command line."""
    [kept] = var.glob("demo-token-*")
    assert kept.stat().st_mode & 0o777 == 0o600
    token = kept.read_text().strip().encode()
    for pid in session_pids(sid):
        with contextlib.suppress(OSError):
            assert token not in Path(f"/proc/{pid}/cmdline").read_bytes(), pid


def stopped(child: subprocess.Popen[bytes], ports: list[int], log: Path) -> None:
    """``make`` exits, and with it every process it started; nothing listens on ``ports``."""
    try:
        child.wait(45)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"make is still running: {session_pids(child.pid)}") from None
    until(lambda: not session_pids(child.pid), 10, lambda: f"left: {session_pids(child.pid)}")
    assert not [p for p in ports if listening(p)], tail(log)


def test_make_run_serves_the_demo_and_ctrl_c_stops_everything(tmp_path):
    port = free_ports(1)
    log = tmp_path / "make-run.log"
    with make("run", port, log, KORUWEB_VAR_DIR=str(tmp_path / "var")) as child:
        browser = see_the_demo_run(f"http://127.0.0.1:{port}", log)
        assert (tmp_path / "var" / "koruweb.sqlite3").exists()  # not the developer's var/
        opens_the_printed_link(browser, port, log)
        keeps_its_token_private(tmp_path / "var", child.pid)
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        stopped(child, [port], log)


@pytest.fixture
def team_database() -> Iterator[str]:
    """A PostgreSQL database name for this run alone, dropped afterwards."""
    server = make_conninfo(PG_SERVER, dbname="postgres", connect_timeout=5)
    try:
        psycopg.connect(server).close()
    except psycopg.OperationalError as error:
        pytest.fail(
            f"make run-team needs PostgreSQL, which does not answer at {PG_SERVER}: {error}"
        )
    name = f"koruweb_team_test_{uuid.uuid4().hex[:12]}"
    yield urllib.parse.urlsplit(PG_SERVER)._replace(path=f"/{name}").geturl()
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def test_make_run_team_serves_through_the_proxy_from_both_daphnes_and_stops(
    tmp_path, team_database
):
    port = free_ports(3)
    daphnes = (port + 1, port + 2)
    log = tmp_path / "make-run-team.log"
    env = {"TEAM_DATABASE_URL": team_database, "TEAM_REDIS_URL": REDIS_URL}
    env["KORUWEB_VAR_DIR"] = str(tmp_path / "var")  # the development secret both processes share
    with make("run-team", port, log, **env) as child:
        base = f"http://127.0.0.1:{port}"
        browser = see_the_demo_run(base, log)
        for daphne in daphnes:  # each answers on its own, and knows the same session
            shows_the_run(browser, f"http://127.0.0.1:{daphne}", log)
        # Two connections through the proxy, one after the other, reach different processes
        # (tried again if another connection, a runner's reconnecting, came between them).
        for _ in range(3):
            reached = two_connections(port, daphnes)
            if reached == dict.fromkeys(daphnes, 1):
                break
        assert reached == dict.fromkeys(daphnes, 1), reached
        os.kill(child.pid, signal.SIGTERM)  # make alone, as a supervisor would
        stopped(child, [port, *daphnes], log)
