"""The runner never dies of an agent's message (issue 11): tests/agents/odd_agent.py writes a
generated stream of odd-but-valid JSON-RPC among an ordinary turn, through the real runner to
the real server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from activity.models import InferenceAttempt, Membership, Prompt, Role, Workspace
from tests.integration import test_runner
from tests.integration.test_runner import (
    AGENTS,
    Run,
    answer,
    last_turn,
    open_prompt,
    rows,
)

pytestmark = pytest.mark.django_db(transaction=True)
server, token = test_runner.server, test_runner.token  # the fixtures: a live server, a token

# --- odd-but-valid JSON-RPC, as an agent might send it -----------------------------------------

# NUL cannot be stored in PostgreSQL text (issue 13); SQLite takes it.
ON_POSTGRES = "postgresql" in django_settings.DATABASES["default"]["ENGINE"]
NUL = "" if ON_POSTGRES else "\x00"
TRICKY = ["", "\ud800", "a\udfffb", "😀", "\u202e", "x" * 5000, NUL]
characters = st.characters(exclude_characters="\x00" if ON_POSTGRES else None)
strings = st.one_of(st.text(characters, max_size=20), st.sampled_from(TRICKY))
numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False))
scalars = st.one_of(st.none(), st.booleans(), numbers, strings)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(strings, inner, max_size=3)
    ),
    max_leaves=8,
)
request_ids = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), strings)
params = st.one_of(st.dictionaries(strings, values, max_size=3), st.lists(values, max_size=3))
SERVED = {"session/update", "session/request_permission", "elicitation/create"}
unknown_methods = st.one_of(
    st.sampled_from(
        [
            "cursor/ask_question",
            "_zed/foo",
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/output",
            "terminal/kill",
            "session/new",
            "elicitation/complete",
            "session/cancel",
        ]
    ),
    strings.filter(lambda method: method not in SERVED),
)


def rpc(method: str, request_id: Any = None, **fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **fields}
    return message if request_id is None else {**message, "id": request_id}


unknown_requests = st.builds(
    lambda method, rid, p: rpc(method, rid, **p),
    unknown_methods,
    request_ids,
    st.one_of(st.just({}), params.map(lambda p: {"params": p})),
)
notifications = st.builds(
    lambda method, p: rpc(method, **p),
    unknown_methods,
    st.one_of(st.just({}), params.map(lambda p: {"params": p})),
)
odd_update_fields = st.dictionaries(
    st.sampled_from(
        ["toolCallId", "title", "kind", "status", "content", "locations", "rawInput", "entries"]
        + ["messageId", "used", "size", "currentModeId", "configOptions", "_meta"]
    ),
    values,
    max_size=4,
)
update_kinds = st.one_of(
    st.sampled_from(
        ["tool_call", "tool_call_update", "agent_message_chunk", "plan", "usage_update"]
        + ["current_mode_update", "config_option_update", "session_info_update", "notice"]
    ),
    strings,
    numbers,
)
odd_updates = st.one_of(
    st.builds(  # a kind we do not know, or a known kind with fields of any shape
        lambda kind, fields: {"sessionUpdate": kind, **fields}, update_kinds, odd_update_fields
    ),
    st.builds(  # a tool call whose content is a string, its title a number…
        lambda call_id, content, title: {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": title,
            "content": content,
        },
        st.one_of(strings, numbers, st.none()),
        st.one_of(strings, numbers),
        st.one_of(strings, numbers, st.none()),
    ),
    values,  # `update` a list, a string, a number, null
)
session_updates = st.one_of(
    st.builds(
        lambda sid, update: rpc("session/update", params={"sessionId": sid, "update": update}),
        st.one_of(st.just("odd-1"), strings, numbers),
        odd_updates,
    ),
    params.map(lambda p: rpc("session/update", params=p)),
)
blocking = st.sampled_from(["session/request_permission", "elicitation/create"])
malformed_params = st.one_of(
    st.dictionaries(st.sampled_from(["sessionId", "toolCall", "message", "mode"]), values),
    st.builds(
        lambda options, call: {"sessionId": "odd-1", "toolCall": call, "options": options},
        st.one_of(strings, numbers, st.none(), st.dictionaries(strings, values, max_size=2)),
        values,
    ),
    st.lists(values, max_size=2),
)
malformed_requests = st.builds(
    lambda m, rid, p: rpc(m, rid, params=p), blocking, request_ids, malformed_params
)
stray_responses = st.builds(
    lambda rid, outcome: {"jsonrpc": "2.0", "id": rid, **outcome},
    st.one_of(st.integers(min_value=1000), strings),
    st.one_of(
        values.map(lambda v: {"result": v}),
        st.builds(lambda c, m: {"error": {"code": c, "message": m}}, numbers, strings),
    ),
)
single = st.one_of(
    unknown_requests, notifications, session_updates, malformed_requests, stray_responses
)
messages = st.one_of(single, st.lists(single, min_size=1, max_size=3))  # a batch


def count(line: Any) -> int:
    return len(line) if isinstance(line, list) else 1


def unique_ids(lines: list[Any]) -> list[Any]:
    """The same lines with every request's id made unique, so each response is attributable."""
    seen: set[str] = set()
    for n, line in enumerate(lines):
        for item in line if isinstance(line, list) else [line]:
            if isinstance(item, dict) and "method" in item and "id" in item:
                key = json.dumps(item["id"])
                if key in seen:
                    item["id"] = f"dup-{n}-{len(seen)}"
                    key = json.dumps(item["id"])
                seen.add(key)
    return lines


def requests_of(lines: list[Any]) -> list[dict[str, Any]]:
    return [
        item
        for line in lines
        for item in (line if isinstance(line, list) else [line])
        if isinstance(item, dict) and "id" in item and "method" in item
    ]


# --- running the agent ---------------------------------------------------------------------------


def odd_run(server: Any, token: str, tmp_path: Path, lines: list[Any], *prompts: str) -> Run:
    source, log = tmp_path / "lines.json", tmp_path / "responses.jsonl"
    source.write_text(json.dumps(lines))
    log.write_text("")
    agent = [sys.executable, str(AGENTS / "odd_agent.py"), str(source), str(log)]
    flags = [flag for prompt in prompts or ("go",) for flag in ("--prompt", prompt)]
    return Run(server.ws_url, token, agent, *flags)


def responses(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The runner's responses to the agent's requests, by JSON id."""
    got = (tmp_path / "responses.jsonl").read_text().splitlines()
    return {json.dumps(r["id"]): r for r in map(json.loads, got)}


def page(chat_id: Any) -> str:
    workspace = Workspace.objects.get(slug="acme")
    user, _ = User.objects.get_or_create(username="watcher")
    Membership.objects.get_or_create(workspace=workspace, user=user, role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    got = client.get(f"/chats/{chat_id}/")
    assert got.status_code == 200
    return got.content.decode()


ASK = rpc("cursor/ask_question", 7, params=["Which one?"])  # params by position: still JSON-RPC
TERMINAL = rpc("terminal/create", 8, params={"sessionId": "odd-1", "command": "ls"})
CANCEL = rpc("session/cancel", params={"sessionId": "odd-1"})  # only a client sends it
STRAY = {"jsonrpc": "2.0", "id": ["not", "an", "id"], "result": None}  # not valid JSON-RPC


@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a run per example: no time to shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=st.lists(messages, min_size=10, max_size=30))
def test_a_stream_of_odd_messages_never_stops_the_runner_or_loses_an_ordinary_update(
    server, token, tmp_path_factory, drawn
):
    tmp_path = tmp_path_factory.mktemp("odd")
    lines = unique_ids([ASK, TERMINAL, CANCEL, STRAY, *drawn])
    run = odd_run(server, token, tmp_path, lines)
    code, err = run.finish(within=60)
    assert code == 0, err
    assert "Traceback" not in err
    odd = sum(map(count, lines))
    assert len(err.splitlines()) <= odd, err
    # Every ordinary update became its row, whole.
    ok = rows(run.chat_id)["o1-ok"]
    assert (ok.status, ok.agent_label, ok.agent_output, ok.read_only) == (
        "completed",
        "Read notes.txt",
        "hello",
        True,
    )
    turn = last_turn(run.chat_id)
    assert turn.stop_reason == "end_turn" and "Done." in turn.reply.markdown
    # Every request the runner does not serve was told so: "Method not found".
    told = responses(tmp_path)
    for request in requests_of(lines):
        if request["method"] not in SERVED and isinstance(request["method"], str):
            response = told.get(json.dumps(request["id"]))
            assert response is not None and "error" in response, (request, response)
            # The SDK checks the params of the terminal methods it knows before it refuses.
            known = request["method"].startswith("terminal/") and request is not TERMINAL
            assert response["error"]["code"] in ({-32601, -32602} if known else {-32601})
    assert escape("The agent asked for “cursor/ask_question”") in page(run.chat_id)


OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
CALL = {"toolCallId": "perm-1", "title": "Delete build/", "kind": "delete"}
SCHEMA = {"type": "object", "properties": {"db": {"type": "string", "title": "Database"}}}
# (method, malformed params, valid params, what the page asks, the answer, what the agent hears)
BLOCKING = [
    (
        "session/request_permission",
        {"sessionId": "odd-1", "options": "allow"},
        {"sessionId": "odd-1", "toolCall": CALL, "options": OPTIONS},
        "Delete build/",
        {"outcome": "selected", "optionId": "o1"},  # the runner's id for "reject"
        {"outcome": {"outcome": "selected", "optionId": "reject"}},
    ),
    (
        "elicitation/create",
        {"sessionId": "odd-1", "mode": "telepathy", "message": "Read my mind"},
        {
            "sessionId": "odd-1",
            "mode": "form",
            "message": "Which database?",
            "requestedSchema": SCHEMA,
        },
        "Which database?",
        {"action": "accept", "content": {"db": "Postgres"}},
        {"action": "accept", "content": {"db": "Postgres"}},
    ),
]


@pytest.mark.parametrize(("method", "malformed", "valid", "asked", "chosen", "heard"), BLOCKING)
def test_a_malformed_request_for_a_person_does_not_take_the_place_of_the_valid_one_after_it(
    server, token, tmp_path, method, malformed, valid, asked, chosen, heard
):
    lines = [rpc(method, 41, params=malformed), rpc(method, "p-42", params=valid)]
    run = odd_run(server, token, tmp_path, lines)
    prompt = open_prompt(run.chat_id)
    kept = prompt.tool.agent_summary if prompt.tool else prompt.summary  # kept once
    assert prompt.jsonrpc_id == 2 and kept == asked  # the runner's number for "p-42"
    answer(run.chat_id, prompt.jsonrpc_id, chosen)
    code, err = run.finish()
    assert code == 0, err
    told = responses(tmp_path)
    assert told['"p-42"'].get("result") == heard, told
    assert told["41"]["error"]["code"] == -32602
    prompt.refresh_from_db()
    assert prompt.closed_at is not None and prompt.outcome in {"approved", "denied"}
    assert Prompt.objects.filter(chat_id=run.chat_id).count() == 1


def test_a_prompt_answered_with_an_error_ends_its_turn_and_the_runner_takes_the_next(
    server, token, tmp_path
):
    run = odd_run(server, token, tmp_path, [], "fail now", "go")
    code, err = run.finish()
    assert code == 0, err
    first, second = run_turns(run.chat_id)
    assert first.stop_reason == "agent_error" and first.prompt == "fail now"
    assert any("the model API is down" in note for note in first.notes), first.notes
    assert first.reply.markdown == "Trying…"
    assert second.stop_reason == "end_turn" and second.prompt == "go"
    assert rows(run.chat_id)["o2-ok"].status == "completed"


def run_turns(chat_id: Any) -> list[InferenceAttempt]:
    return list(InferenceAttempt.objects.filter(chat_id=chat_id).order_by("started_at"))


# --- issue 13: frames that once looped the runner or stalled the chat ---------------------------


def update(body: dict[str, Any]) -> dict[str, Any]:
    return rpc("session/update", params={"sessionId": "odd-1", "update": body})


def usage_line(cost: str) -> dict[str, Any]:
    """A usage_update whose cost amount is the JSON text ``cost`` as written (NaN is no JSON)."""
    body = {"sessionUpdate": "usage_update", "used": 1, "size": 2}
    body["cost"] = {"amount": "COST", "currency": "USD"}
    return {"odd_agent": "raw", "line": json.dumps(update(body)).replace('"COST"', cost)}


HOSTILE = {
    "params-array": rpc("_debug/log", params=["hello"]),
    "session-update-list": update({"sessionUpdate": ["tool_call"], "toolCallId": "x"}),
    "update-a-list": rpc("session/update", params={"sessionId": "odd-1", "update": [1, 2]}),
    "nan-cost": usage_line("NaN"),
    "infinity-cost": usage_line("-Infinity"),
    "lone-surrogate-text": update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a\ud83d"}}
    ),
    "lone-surrogate-id": update(
        {"sessionUpdate": "tool_call", "toolCallId": "\udfff-id", "title": "Odd \ud800 id"}
    ),
    "huge-int": update({"sessionUpdate": "usage_update", "used": 2**70, "size": 2**80}),
    "huge-int-output": update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "o1-ok", "rawOutput": {"n": -(2**90)}}
    ),
}
LONG_PROMPT = "Summarise this log:" + "ü" * (1024 * 1024)  # over 1 MiB in characters and in bytes


def read_call(call_id: str) -> dict[str, Any]:
    """An ordinary call, opened and completed in one update."""
    return update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": f"Read {call_id}",
            "kind": "read",
            "status": "completed",
        }
    )


def assert_turn_went_through(run: Run, server: Any, names: list[str]) -> None:
    """The runner finished cleanly and every ordinary call around a hostile frame is a row."""
    code, err = run.finish(within=60)
    assert code == 0, f"runner exit {code}:\n{err}\nserver log:\n{server.output[-4000:]}"
    assert "Traceback" not in err, err
    got = rows(run.chat_id)
    for call_id in [f"{name}-{when}" for name in names for when in ("before", "after")]:
        assert call_id in got, (call_id, sorted(got))
        assert (got[call_id].status, got[call_id].agent_label) == ("completed", f"Read {call_id}")
    turn = last_turn(run.chat_id)
    assert turn.stop_reason == "end_turn" and "Done." in turn.reply.markdown


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_frame_from_an_ordinary_agent_ends_neither_the_turn_nor_the_rows_around_it(
    server, token, tmp_path, name
):
    lines = [read_call(f"{name}-before"), HOSTILE[name], read_call(f"{name}-after")]
    run = odd_run(server, token, tmp_path, lines)
    assert_turn_went_through(run, server, [name])


def test_a_prompt_over_a_mebibyte_is_cut_to_fit_and_its_turn_completes(server, token, tmp_path):
    source, log = tmp_path / "lines.json", tmp_path / "responses.jsonl"
    source.write_text(json.dumps([read_call("long-prompt-before"), read_call("long-prompt-after")]))
    agent = [sys.executable, str(AGENTS / "odd_agent.py"), str(source), str(log)]
    run = Run(server.ws_url, token, agent, stdin=LONG_PROMPT + "\n")  # no argv takes 1 MiB
    assert_turn_went_through(run, server, ["long-prompt"])
    turn = last_turn(run.chat_id)
    assert turn.prompt.startswith("Summarise this log:üüü")
    assert len(turn.prompt) < len(LONG_PROMPT)
    assert InferenceAttempt.objects.filter(chat_id=run.chat_id).count() == 1
