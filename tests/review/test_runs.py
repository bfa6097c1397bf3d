"""The runs list: each filter, pagination, counts, and nothing from other workspaces."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from activity.live import answers
from activity.live.ingest import ingest
from activity.models import Chat, Prompt, Workspace
from activity.review.runs import PAGE_SIZE
from activity.wire.frames import runner_frame
from tests import factories, frames

pytestmark = pytest.mark.django_db


def run(workspace: Workspace, title: str, *raw: dict, agent: str = "demo-agent") -> Chat:
    start = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title=title)
    start["agent_name"] = agent
    return factories.run(workspace, start, *raw)


def titles(client: Client, query: str = "") -> list[str]:
    html = client.get(f"/?{query}").content.decode()
    return [
        t for t in ("Quiet", "Broken", "Waiting", "Refused", "Claude", "Old") if f">{t}<" in html
    ]


@pytest.fixture
def runs(acme, acme_approver) -> dict[str, Chat]:
    made = {
        "Quiet": run(acme, "Quiet", frames.tool_call(2, "a", "Read", status="completed")),
        "Broken": run(acme, "Broken", frames.tool_call(2, "a", "Build", status="failed")),
        "Waiting": run(acme, "Waiting", frames.permission(2, 1, "a", "Deploy")),
        "Refused": run(acme, "Refused", frames.permission(2, 1, "a", "Delete")),
        "Claude": run(acme, "Claude", agent="claude-agent-acp"),
    }
    refused = Prompt.objects.get(chat=made["Refused"])
    answers.record(refused.pk, acme_approver, "Rejected", {}, "test")
    ingest(made["Refused"].pk, [runner_frame.validate_python(frames.outcome(3, 1, "reject"))])
    attempt = made["Quiet"].current_attempt_id
    assert attempt is not None
    ingest(made["Quiet"].pk, [runner_frame.validate_python(frames.turn_ended(3, attempt))])
    old = run(acme, "Old")
    Chat.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    made["Old"] = old
    return made


def test_each_filter_narrows_the_list(as_admin, runs):
    assert titles(as_admin) == ["Quiet", "Broken", "Waiting", "Refused", "Claude", "Old"]
    assert titles(as_admin, "agent=claude-agent-acp") == ["Claude"]
    assert titles(as_admin, "status=finished") == ["Quiet"]
    assert "Quiet" not in titles(as_admin, "status=running")
    assert titles(as_admin, "waiting=on") == ["Waiting"]
    assert titles(as_admin, "failures=on") == ["Broken"]
    assert titles(as_admin, "denied=on") == ["Refused"]
    since = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert "Old" not in titles(as_admin, f"since={since}")
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert titles(as_admin, f"until={until}") == ["Old"]
    assert titles(as_admin, "workspace=acme&failures=on") == ["Broken"]


def test_a_filter_naming_an_unknown_workspace_shows_nothing_and_says_why(as_admin, runs):
    response = as_admin.get("/?workspace=globex")
    assert response.status_code == 200
    assert titles(as_admin, "workspace=globex") == []
    assert "workspace" in response.content.decode()


def test_each_run_shows_its_counts_of_calls_by_status(as_admin, runs):
    html = as_admin.get("/").content.decode()
    row = html[html.index(f'id="chat-{runs["Broken"].pk}"') :]
    assert "1 failed" in row[: row.index("</tr>")]


def test_runs_come_a_page_at_a_time_in_a_fixed_number_of_queries(as_admin, acme):
    for n in range(PAGE_SIZE + 5):
        run(acme, f"Run {n}", frames.tool_call(2, "a", "Read"))
    with CaptureQueriesContext(connection) as queries:
        first = as_admin.get("/").content.decode()
    assert first.count('<tr id="chat-') == PAGE_SIZE and "page 1 of 2" in first
    second = as_admin.get("/?page=2").content.decode()
    assert second.count('<tr id="chat-') == 5
    assert len(queries) < 15  # not one per run


def test_an_outsider_sees_no_runs(runs, as_outsider):
    assert titles(as_outsider) == []
