"""An agent's own ids never reach the server (issue 22): the real runner and the real server,
with an agent whose request ids and option ids are keys (tests/agents/secret_ids_agent.py),
answered from the web as a person's browser does. The agent hears its own exact ids; no table,
export, transcript, page or search holds them, nor the key it printed across two blocks."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from activity.models import AgentToken, Prompt, Role, ToolActivity, Workspace
from activity.review import search
from tests.agents.secret_ids_agent import IDS, KEY
from tests.integration.test_drive import Person
from tests.integration.test_runner import (  # noqa: F401  (a fixture: no runner outlives its test)
    AGENTS,
    Run,
    _no_runner_outlives_its_test,
    eventually,
    last_turn,
)
from tests.liveserver import Server
from tests.members import member

pytestmark = pytest.mark.django_db(transaction=True)
AGENT = [sys.executable, str(AGENTS / "secret_ids_agent.py")]
HIDDEN = (*IDS, KEY[13:33], KEY[33:])  # the ids, and each half of the key (its prefix is kept)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "daphne.log", redis=True)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def database_text() -> str:
    """Every row of every table, search indexes included, as text."""
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from the schema
            dump.append(repr(cursor.fetchall()))
    return "\n".join(dump)


def open_prompt(run: Run, kind: str) -> Prompt:
    return eventually(
        lambda: Prompt.objects.filter(chat_id=run.chat_id, kind=kind, closed_at=None).first()
    )


def test_an_agents_secret_ids_reach_it_exactly_and_nothing_the_server_keeps_or_shows(server):
    acme = Workspace.objects.create(slug="acme", name="Acme")
    token = AgentToken.issue(acme, "ci")[1]
    alice = member(acme, "alice", Role.APPROVER)
    browser = Person(server, alice)
    run = Run(server.ws_url, token, AGENT, "--prompt", "go")

    asked = open_prompt(run, "permission")
    assert [(c["id"], c["label"]) for c in asked.choices] == [
        ("o0", "Allow once"),
        ("o1", "Reject"),
    ]
    status, said = browser.post(f"/prompts/{asked.pk}/answer", choice="o0")
    assert status == 302, said
    question = open_prompt(run, "question")
    status, said = browser.post(f"/prompts/{question.pk}/answer", region_other="eu")
    assert status == 302, said
    code, err = run.finish()
    assert code == 0, err

    reply = last_turn(run.chat_id).reply.markdown
    assert reply == "Permission outcome: allow. Question outcome: accept eu."  # its own ids
    printed = ToolActivity.objects.get(chat_id=run.chat_id, tool_call_id="split")
    assert printed.agent_output == f"key: {KEY[:13]}" + "*" * 20 + "\n" + "*" * 20
    assert printed.result_bytes == len(f"key: {KEY}\n".encode())
    assert ToolActivity.objects.get(chat_id=run.chat_id, tool_call_id="deploy").approval == (
        "approved"
    )
    stored = database_text()
    assert "Print the key" in stored and "Which region?" in stored  # the rows are there…
    assert [hidden for hidden in HIDDEN if hidden in stored] == []  # … without the agent's ids
    for path in (
        f"/chats/{run.chat_id}/",
        f"/chats/{run.chat_id}/transcript.md",
        f"/api/chats/{run.chat_id}/tool-activity",
    ):
        status, shown = browser.request("GET", path)
        assert status == 200 and "Deploy" in shown, path
        assert [hidden for hidden in HIDDEN if hidden in shown] == [], path
    assert search.search(alice, "Deploy")
    assert [hidden for hidden in HIDDEN if search.search(alice, hidden)] == []
