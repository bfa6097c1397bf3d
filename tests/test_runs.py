"""The runs list: each filter, pagination, counts, and nothing from other workspaces."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity import answers, presence
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import Chat, Membership, Prompt, Role, Workspace
from activity.runs import PAGE_SIZE
from tests import frames

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def alice(acme) -> Client:
    user = User.objects.create_user("alice", password="pw")
    Membership.objects.create(workspace=acme, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def run(workspace: Workspace, title: str, *raw: dict, agent: str = "demo-agent") -> Chat:
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), "runner")
    start = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title=title)
    start["agent_name"] = agent
    ingest(change.chat_id, [runner_frame.validate_python(r) for r in (start, *raw)])
    return Chat.objects.get(pk=change.chat_id)


def titles(client: Client, query: str = "") -> list[str]:
    html = client.get(f"/?{query}").content.decode()
    return [
        t for t in ("Quiet", "Broken", "Waiting", "Refused", "Claude", "Old") if f">{t}<" in html
    ]


@pytest.fixture
def runs(acme) -> dict[str, Chat]:
    made = {
        "Quiet": run(acme, "Quiet", frames.tool_call(2, "a", "Read", status="completed")),
        "Broken": run(acme, "Broken", frames.tool_call(2, "a", "Build", status="failed")),
        "Waiting": run(acme, "Waiting", frames.permission(2, 1, "a", "Deploy")),
        "Refused": run(acme, "Refused", frames.permission(2, 1, "a", "Delete")),
        "Claude": run(acme, "Claude", agent="claude-agent-acp"),
    }
    refused = Prompt.objects.get(chat=made["Refused"])
    answers.record(refused.pk, User.objects.create_user("bob"), "Rejected", {}, "test")
    ingest(made["Refused"].pk, [runner_frame.validate_python(frames.outcome(3, 1, "reject"))])
    attempt = made["Quiet"].current_attempt_id
    assert attempt is not None
    ingest(made["Quiet"].pk, [runner_frame.validate_python(frames.turn_ended(3, attempt))])
    old = run(acme, "Old")
    Chat.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    made["Old"] = old
    return made


def test_each_filter_narrows_the_list(alice, runs):
    assert titles(alice) == ["Quiet", "Broken", "Waiting", "Refused", "Claude", "Old"]
    assert titles(alice, "agent=claude-agent-acp") == ["Claude"]
    assert titles(alice, "status=finished") == ["Quiet"]
    assert "Quiet" not in titles(alice, "status=running")
    assert titles(alice, "waiting=on") == ["Waiting"]
    assert titles(alice, "failures=on") == ["Broken"]
    assert titles(alice, "denied=on") == ["Refused"]
    since = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert "Old" not in titles(alice, f"since={since}")
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert titles(alice, f"until={until}") == ["Old"]
    assert titles(alice, "workspace=acme&failures=on") == ["Broken"]


def test_a_filter_naming_an_unknown_workspace_shows_nothing_and_says_why(alice, runs):
    response = alice.get("/?workspace=globex")
    assert response.status_code == 200
    assert titles(alice, "workspace=globex") == []
    assert "workspace" in response.content.decode()


def test_each_run_shows_its_counts_of_calls_by_status(alice, runs):
    html = alice.get("/").content.decode()
    row = html[html.index(f'id="chat-{runs["Broken"].pk}"') :]
    assert "1 failed" in row[: row.index("</tr>")]


def test_runs_come_a_page_at_a_time_in_a_fixed_number_of_queries(alice, acme):
    for n in range(PAGE_SIZE + 5):
        run(acme, f"Run {n}", frames.tool_call(2, "a", "Read"))
    with CaptureQueriesContext(connection) as queries:
        first = alice.get("/").content.decode()
    assert first.count('<tr id="chat-') == PAGE_SIZE and "page 1 of 2" in first
    second = alice.get("/?page=2").content.decode()
    assert second.count('<tr id="chat-') == 5
    assert len(queries) < 15  # not one per run


def test_an_outsider_sees_no_runs(runs):
    charlie = Client()
    charlie.force_login(User.objects.create_user("charlie"))
    assert titles(charlie) == []
