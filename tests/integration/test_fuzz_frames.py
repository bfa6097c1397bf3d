"""Hostile frames through a real Daphne (issue 13): a frame is applied or refused, alone.

Hypothesis makes hostile frames from valid ones (a field replaced by NaN, a lone surrogate, a
NUL, an integer beyond 2^63, a value of the wrong type, a huge string, deep nesting; params
that are an array, a sessionUpdate that is a list, unknown frame types, request ids longer than
their column…) and from text that is no frame at all. They are sent pipelined over a real
socket, each followed by a valid frame, to koruweb under Daphne (the in-process communicator
accepts close codes Daphne cannot send, so only a real server shows a broken close). Then:
no traceback or error in the server's log, every frame acknowledged or refused, every valid
frame applied, and every exported row valid against the contract's JSON Schema.

The server's own faults are here too: a batch whose database went away is not acknowledged,
the socket closes with ``CLOSE_UNAVAILABLE`` and the runner's resend is applied.
"""

from __future__ import annotations

import contextlib
import json
import math
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from psycopg import sql
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from activity.core.contract import tool_activity_json_schema
from activity.models import AgentToken, Chat, ToolActivity, Workspace
from activity.wire.frames import CLOSE_UNAVAILABLE
from tests import frames
from tests.liveserver import Server

# Hostile frames against the database of each mode: on PostgreSQL too.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ON_POSTGRES = "postgresql" in django_settings.DATABASES["default"]["ENGINE"]
BATCH = 50  # hostile frames per hypothesis example, each followed by a valid one

# --- hostile values and frames -----------------------------------------------------------------

HUGE = "h" * 300_000  # far over every column, well under the 1 MiB frame limit
TRICKY_TEXT = [
    "\ud800",
    "a\udfffb",
    "\udc00\ud800",
    "\x00",
    "nul\x00inside",
    "r" * 300,  # longer than a request id's column
    "x" * 20_000,
    "😀",
    "\u202e",
    "",
    "session/update",
    "tool_call",
]
BIG_INTS = [2**63, 2**63 - 1, -(2**63) - 1, 2**64, 2**70, 10**30, -(10**30), 2**32, -1, 0]
ODD_FLOATS = [math.nan, math.inf, -math.inf, 1e308, -0.0, 0.5]


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


texts = st.one_of(st.text(max_size=20), st.sampled_from(TRICKY_TEXT))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(BIG_INTS),
    st.integers(),
    st.sampled_from(ODD_FLOATS),
    st.floats(),
    texts,
)
hostile_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(texts, scalars, max_size=3),
    st.just(["hello"]),  # params by position
    st.just({"sessionUpdate": ["tool_call"], "toolCallId": "h1"}),
    st.sampled_from([nested(100), nested(20)]),
    st.integers(0, 40).map(lambda n: HUGE if n == 0 else "y" * 5000),
)
UNUSABLE_SEQS = [0, -1, 2**63, 2**70, "7", 7.5, True, None, [7], {"seq": 7}]


def rpc(method: str, params: Any, request_id: Any = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    return message if request_id is None else {**message, "id": request_id}


def notify(update: dict[str, Any]) -> dict[str, Any]:
    return rpc("session/update", {"sessionId": "s1", "update": update})


OUTPUT = [{"type": "content", "content": {"type": "text", "text": "out"}}]
TEMPLATES: list[dict[str, Any]] = [  # valid frames of every kind (seq and at are set on sending)
    frames.tool_call(
        0,
        "h1",
        "Run ls",
        kind="execute",
        status="pending",
        rawInput={"command": ["ls", "-l"]},
        locations=[{"path": "/tmp/a", "line": 3}],
    ),
    {**frames.tool_update(0, "h1", status="completed", content=OUTPUT), "cut_bytes": 10},
    frames.update(
        0,
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "h2", "content": OUTPUT[0]},
    ),
    frames.say(0, "Some text."),
    frames.update(
        0, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Hm"}}
    ),
    frames.update(
        0, {"sessionUpdate": "plan", "entries": [{"content": "Step", "status": "pending"}]}
    ),
    frames.update(
        0,
        {
            "sessionUpdate": "usage_update",
            "used": 10,
            "size": 100,
            "cost": {"amount": 0.5, "currency": "USD"},
        },
    ),
    frames.update(0, {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}),
    frames.update(
        0,
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"id": "mode", "currentValue": "default"}],
        },
    ),
    frames.update(0, {"sessionUpdate": "session_info_update", "title": "A title"}),
    frames.permission(0, 7, "h3", "Delete build/"),
    frames.elicitation(0, 8, frames.CLAUDE_QUESTION),
    frames.outcome(0, 7, "allow-once"),
    {**frames.outcome(0, 8, None), "outcome": {"action": "accept"}},
    frames.acp(0, rpc("_debug/log", ["hello"])),
    frames.acp(0, {"jsonrpc": "2.0", "id": 3, "result": {"outcome": {"outcome": "cancelled"}}}),
    frames.acp(0, rpc("fs/read_text_file", {"sessionId": "s1", "path": "/etc/hosts"}, 4)),
    {**frames.turn_ended(0, uuid.uuid4()), "usage": {"inputTokens": 3}, "error": "oops"},
    frames.turn_started(0, uuid.uuid4(), uuid.uuid4()),  # applies once, then is a duplicate
    {"type": "bogus", "seq": 0, "at": 0},
]


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a frame a value sits (the frame's own seq excluded)."""
    if at:
        yield at
    if isinstance(value, dict):
        for key, item in value.items():
            if at or key != "seq":
                yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from paths(item, (*at, n))


def replaced(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[at[0]] = replaced(value[at[0]], at[1:], new)
    return copy


@dataclass(frozen=True)
class Hostile:
    """A hostile frame: its text for a seq, and whether the server can read that seq in it
    (then the frame is acknowledged, as applied or refused; else refused with no seq)."""

    text: Callable[[int], str]
    has_seq: bool
    what: str

    def __repr__(self) -> str:  # what hypothesis prints of a failing batch
        return f"Hostile({self.what}: {self.text(1)[:300]!r})"


NEXT = object()  # a frame that takes the next seq


def framed(frame: dict[str, Any], seq: Any = NEXT) -> Callable[[int], str]:
    def text(next_seq: int) -> str:
        sent = {**frame, "seq": next_seq if seq is NEXT else seq}
        if seq == "absent":
            del sent["seq"]
        return json.dumps(sent)  # NaN and Infinity as Python writes them, surrogates escaped

    return text


@st.composite
def hostile_frames(draw: st.DrawFn) -> Hostile:
    template = draw(st.sampled_from(TEMPLATES))
    how = draw(st.integers(0, 9))
    if how <= 5:  # one value replaced (a field of the frame or deep inside its message)
        places = list(paths(template))
        at = places[draw(st.integers(0, len(places) - 1))]
        return Hostile(framed(replaced(template, at, draw(hostile_values))), True, "replaced")
    if how == 6:  # one field more, or one less
        key = draw(st.one_of(texts, st.sampled_from(["cut_bytes", "usage", "mode", "title"])))
        if key == "seq" or draw(st.booleans()):
            field_ = draw(st.sampled_from([k for k in template if k not in ("seq", "at")]))
            return Hostile(framed({k: v for k, v in template.items() if k != field_}), True, "-")
        return Hostile(framed({**template, key: draw(hostile_values)}), True, "added")
    if how == 7:  # a seq no chat can reach: refused without one
        seq = draw(st.sampled_from([*UNUSABLE_SEQS, "absent"]))
        return Hostile(framed(template, seq), False, "seq")
    if how == 8:  # no frame at all
        value = draw(st.one_of(st.lists(scalars, max_size=3), scalars))
        return Hostile(lambda _: json.dumps(value), False, "not an object")
    text = draw(  # text no JSON parser should take whole
        st.sampled_from(
            [
                '{"type": "acp", "seq": ',
                "NaN",
                '{"type": "acp", "seq": 1, "at": 1, "message": {"a": ' + "[" * 10_000,
                '{"type": "acp", "message": ' + "[" * 10_000 + "]" * 10_000 + "}",
                "1" * 5000,
                "",
            ]
        )
    )
    return Hostile(lambda _: text, False, "not JSON")


# --- a runner that pipelines -------------------------------------------------------------------


@dataclass
class Pipe:
    """One runner socket: frames sent without waiting, replies read until the last is acked."""

    socket: ClientConnection
    seq: int = 0
    acked: int = 0
    refused: dict[int, str] = field(default_factory=dict)  # seq → the server's reason
    refused_without_seq: list[str] = field(default_factory=list)
    sent: int = 0

    @classmethod
    @contextlib.contextmanager
    def open(cls, server: Server, token: str, chat_id: uuid.UUID) -> Iterator[Pipe]:
        """Connect and say hello; the pipe knows the seq the server has."""
        with connect(
            f"{server.ws_url}/ws/agent/",
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=None,
            compression=None,
            open_timeout=10,
            ping_interval=None,  # no pings: their payloads would draw from random mid-example
            max_queue=None,  # replies pile up while frames are still being generated and sent
        ) as socket:
            socket.send(json.dumps(frames.hello(chat_id)))
            pipe = cls(socket)
            reply = json.loads(socket.recv(timeout=10))
            assert reply["type"] == "ack", reply
            pipe.seq = pipe.acked = reply["seq"]
            yield pipe

    def send(self, text: str) -> None:
        self.socket.send(text)
        self.sent += 1

    def wait_acked(self, seq: int, timeout: float = 60) -> None:
        while self.acked < seq:
            reply = json.loads(self.socket.recv(timeout=timeout))
            if reply["type"] == "ack":
                self.acked = max(self.acked, reply["seq"])
            elif reply["type"] == "error" and reply["seq"] is None:
                self.refused_without_seq.append(reply["error"])
            elif reply["type"] == "error":
                self.refused[reply["seq"]] = reply["error"]


SERVER_APP = "koruweb-fuzz-server"  # the server's PostgreSQL sessions carry this name


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log")
    running.env["PGAPPNAME"] = SERVER_APP  # libpq reads it: only the server's sessions are cut
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def token() -> str:
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    return AgentToken.issue(workspace, "fuzz")[1]


def exported(server: Server, token: str, chat_id: uuid.UUID) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{server.url}/api/chats/{chat_id}/tool-activity",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        rows: list[dict[str, Any]] = json.load(answer)
    return rows


def assert_no_error_logged(server: Server) -> None:
    log = server.output
    assert "Traceback" not in log and "ERROR" not in log, log[-5000:]


# --- the fuzz test -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "count",
    [
        pytest.param(
            10_000, marks=pytest.mark.skipif(ON_POSTGRES, reason="the SQLite pass sends 10,000")
        ),
        pytest.param(
            300, marks=pytest.mark.skipif(not ON_POSTGRES, reason="10,000 on SQLite cover it")
        ),
    ],
)
def test_hostile_frames_are_each_refused_or_applied_and_every_valid_frame_after_them_applies(
    server: Server, token: str, count: int
) -> None:
    chat_id, run = uuid.uuid4(), uuid.uuid4().hex[:8]
    hostile_seqs: set[int] = set()  # hostile frames with a seq: each acknowledged or refused
    without_seq = 0  # hostile frames with no seq the server can read: each refused
    valid: dict[int, str] = {}  # seq → the label its row must show

    with Pipe.open(server, token, chat_id) as pipe:
        pipe.seq += 1
        pipe.send(json.dumps(frames.turn_started(pipe.seq, uuid.uuid4(), uuid.uuid4())))

        @settings(
            max_examples=max(count // BATCH, 1),
            phases=[Phase.generate],
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(hostile_frames(), min_size=BATCH, max_size=BATCH))
        def pipelined(batch: list[Hostile]) -> None:
            nonlocal without_seq
            for hostile in batch:  # all sent before any reply is read
                if hostile.has_seq:
                    pipe.seq += 1
                    hostile_seqs.add(pipe.seq)
                else:
                    without_seq += 1  # the seq it names, if any, is the next frame's
                pipe.send(hostile.text(pipe.seq))
                pipe.seq += 1
                valid[pipe.seq] = label = f"Valid {len(valid)}"
                call_id = f"ok-{run}-{len(valid)}"
                pipe.send(
                    json.dumps(frames.tool_call(pipe.seq, call_id, label, status="completed"))
                )
            # No waiting: the server works through the frames while the next batch is made.

        while len(hostile_seqs) + without_seq < count:
            pipelined()
        pipe.wait_acked(pipe.seq, timeout=120)  # the socket never closed on the way
        print(
            f"{pipe.sent} frames sent, pipelined: {len(hostile_seqs) + without_seq} hostile,"
            f" {len(valid)} valid"
        )

    # Every frame acknowledged or refused, and only hostile ones refused.
    assert pipe.acked == pipe.seq
    wrongly = {seq: pipe.refused[seq] for seq in set(pipe.refused) - hostile_seqs}
    assert not wrongly, f"valid frames were refused: {wrongly}"
    assert len(pipe.refused_without_seq) == without_seq
    assert Chat.objects.get(pk=chat_id).last_seq == pipe.seq

    # Every valid frame applied.
    rows = dict(
        ToolActivity.objects.filter(
            chat_id=chat_id, tool_call_id__startswith=f"ok-{run}-"
        ).values_list("agent_label", "status")
    )
    assert sorted(map(str, rows)) == sorted(valid.values())
    assert set(rows.values()) <= {"completed", "cancelled"}  # a hostile cancel may cancel a row

    # Every exported row valid against the contract's JSON Schema.
    validator = jsonschema.Draft202012Validator(tool_activity_json_schema())
    export = exported(server, token, chat_id)
    assert len(export) >= len(valid)
    for row in export:
        validator.validate(row)
    assert_no_error_logged(server)


# --- the server's own faults -------------------------------------------------------------------


@contextlib.contextmanager
def database_away() -> Iterator[None]:
    """No new connection to the test database, and the server's cut (only the server's: this
    process's own, in every thread, must live on for the tests after): its database is away."""
    db = connection.settings_dict
    maintenance = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    name = sql.Identifier(db["NAME"])
    try:
        maintenance.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        maintenance.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = %s",
            [db["NAME"], SERVER_APP],
        )
        yield
    finally:
        maintenance.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))
        maintenance.close()


@pytest.mark.skipif(not ON_POSTGRES, reason="cuts the server's PostgreSQL connections")
def test_a_batch_written_while_the_database_is_away_is_not_acknowledged_and_its_resend_applies(
    server: Server, token: str
) -> None:
    chat_id = uuid.uuid4()
    waiting = frames.permission(3, 7, "c1", "Deploy")  # the agent then waits: nothing follows
    with Pipe.open(server, token, chat_id) as pipe:
        pipe.send(json.dumps(frames.turn_started(1, uuid.uuid4(), uuid.uuid4())))
        pipe.send(json.dumps(frames.say(2, "Before.")))
        pipe.wait_acked(2)
        with database_away():
            pipe.send(json.dumps(waiting))
            with pytest.raises(ConnectionClosed) as closed:
                pipe.wait_acked(3, timeout=20)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_UNAVAILABLE
    assert pipe.acked == 2 and not pipe.refused  # neither acknowledged nor refused
    resent = False
    for _ in range(20):  # the runner reconnects and resends until the server has it
        with contextlib.suppress(ConnectionClosed), Pipe.open(server, token, chat_id) as back:
            assert back.acked == 2
            back.send(json.dumps(waiting))
            back.wait_acked(3)
            resent = not back.refused
            break
    assert resent
    assert ToolActivity.objects.get(chat_id=chat_id).approval == "pending"
    assert "Traceback" not in server.output
