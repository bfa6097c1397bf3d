"""The team's services: its PostgreSQL database, its Redis, its Daphne processes (conftest.py
starts them; tests read their logs)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from py_vapid import Vapid02

from koruweb.proxy import ProxyThread
from tests.integration.team.helpers import APPROVER, PASSWORD, Visitor
from tests.liveserver import BASE_DIR, Child, Daphne, child_env

VAPID = Vapid02()
VAPID.generate_keys()
PG_URL = os.environ.get("KORUWEB_TEAM_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
HEARTBEAT = 1  # s: RUNNER_HEARTBEAT_SECONDS
GRACE = 3  # s: RUNNER_GRACE_SECONDS
REDIS_SOCKET_TIMEOUT = 2  # s: longer than the channel layer's blocking receive (1 s)
SETTINGS = {
    "RUNNER_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "RUNNER_GRACE_SECONDS": str(GRACE),
    "REDIS_BRPOP_TIMEOUT": "1",
    "REDIS_SOCKET_TIMEOUT": str(REDIS_SOCKET_TIMEOUT),
    "REDIS_HEALTH_CHECK_SECONDS": "1",
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    # Notifications at once, to the tests' push service on 127.0.0.1, signed with one key that
    # both processes share, as a team's must be (README, KORUWEB_VAPID_PRIVATE_KEY).
    "NOTIFY_DELAY_SECONDS": "0",
    "NOTIFY_POLL_MS": "100",
    "PUSH_ALLOW_HTTP": "1",
    "KORUWEB_VAPID_PRIVATE_KEY": VAPID.private_pem().decode(),
}

# What the team needs in its database: the approver who logs in, and the runners' agent token.
SEED = """
import os
import django
django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth.models import User
from activity.models import AgentToken, Membership, Role, Workspace
acme = Workspace.objects.create(slug="acme", name="Acme")
alice = User.objects.create_user(os.environ["TEAM_USER"], password=os.environ["TEAM_PASSWORD"])
Membership.objects.create(workspace=acme, user=alice, role=Role.APPROVER)
print(AgentToken.issue(acme, "team")[1])
"""


PREFIX = "koruweb_team_test_"


class Database:
    """A PostgreSQL database of the team's own on the server of ``PG_URL``, named after the test
    process (``PREFIX<pid>``)."""

    def __init__(self, admin_url: str, pid: int) -> None:
        self.admin_url = admin_url
        self.name = f"{PREFIX}{pid}"
        parts = urlsplit(admin_url)
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5)

    def create(self) -> None:
        with self.admin() as db:
            db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))

    def drop(self) -> None:
        with self.admin() as db:
            db.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )

    def drop_orphans(self) -> None:
        """Drop the databases of test processes that died before dropping their own."""
        with self.admin() as db:
            names = db.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{PREFIX}%",)
            ).fetchall()
        for (name,) in names:
            pid = name.removeprefix(PREFIX)
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                Database(self.admin_url, int(pid)).drop()

    def state(self) -> str:
        """The chats' presence and their turns, as rows, for a failing test's report."""
        queries = [
            "SELECT id, runner_connected, runner_channel, runner_seen_at, runner_left_at,"
            " last_seq, version FROM activity_chat ORDER BY created_at",
            "SELECT chat_id, started_at, ended_at, stop_reason FROM activity_inferenceattempt"
            " ORDER BY started_at",
        ]
        lines = []
        with psycopg.connect(self.url, connect_timeout=5) as db:
            for query in queries:
                lines.append(query)
                lines += [f"  {row}" for row in db.execute(query).fetchall()]
        return "\n".join(lines)

    def terminate_sessions(self) -> int:
        """End every session the servers have open on it, as an administrator (or a failover)
        would; returns how many there were."""
        with self.admin() as db:
            ended = db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            ).fetchall()
        return len(ended)


class Redis(Child):
    """``redis-server`` on a free port of 127.0.0.1, nothing saved: a restart forgets all."""

    name = "redis-server"

    def command(self) -> list[str]:
        return [
            "redis-server",
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.log.parent)),
        ]

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as redis:
                redis.sendall(b"PING\r\n")
                return redis.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def location(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


PROBLEMS = re.compile(r"Traceback|TimeoutError|could not receive|Error|\" 500 ")


class Server(Daphne):
    """One of the team's Daphne processes; ``mark``/``since`` read its log from a point on."""

    def __init__(self, name: str, log: Path, env: dict[str, str]) -> None:
        super().__init__(log, env)
        self.name = f"server {name}"
        self.mark = 0

    def since(self) -> str:
        return self.output[self.mark :]

    def agent_sockets(self, opened: bool = False) -> int:
        """Runner sockets open on it now that were opened since the mark (its access log); with
        ``opened``, all it accepted since the mark."""
        text = self.since()
        accepted = text.count('"WSCONNECT /ws/agent/"')
        return accepted if opened else accepted - text.count('"WSDISCONNECT /ws/agent/"')

    def problems(self) -> list[str]:
        """Lines of its log since the mark that tell of a failure (a traceback, an error, a 500)."""
        return [line for line in self.since().splitlines() if PROBLEMS.search(line)]


@dataclass
class Team:
    database: Database
    redis: Redis
    a: Server
    b: Server
    proxy: ProxyThread
    token: str
    log_dir: Path
    visitor: Visitor = field(init=False)

    @property
    def servers(self) -> tuple[Server, Server]:
        return self.a, self.b

    def other(self, server: Server) -> Server:
        return self.b if server is self.a else self.a

    def up(self) -> None:
        """Start again whatever a test killed, and read the logs from here on."""
        if not self.redis.running:
            self.redis.start()
        down = [server for server in self.servers if not server.running]
        for server in down:
            server.spawn()
        for server in down:
            server.wait_ready()
        for server in self.servers:
            server.mark = len(server.output)

    def logs(self, chars: int = 20_000) -> str:
        """Both servers' logs since the mark (the end of each, if long), for a failure."""
        return "\n".join(f"--- {s.name} ---\n{s.since()[-chars:]}" for s in self.servers)


def unavailable() -> str | None:
    """Why team mode cannot run here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3):
            pass
    except psycopg.Error as error:
        said = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"PostgreSQL does not answer at {PG_URL} (KORUWEB_TEAM_PG_URL): {said}"
    return None


def seed(database: Database) -> str:
    """Migrate the team's database and make its people; returns the agent token."""
    env = child_env(
        DATABASE_URL=database.url, REDIS_URL="", TEAM_USER=APPROVER, TEAM_PASSWORD=PASSWORD
    )
    done = subprocess.run(
        [sys.executable, "-c", SEED],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"seeding the team's database failed:\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1]
