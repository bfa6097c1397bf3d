"""Pages: the runs list and a chat, for members only, with agent text made safe."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from activity import presence
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import AgentToken, Chat, Membership, Role, Workspace
from tests import frames

pytestmark = pytest.mark.django_db


def run(workspace: Workspace, *raw: dict) -> Chat:
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), "runner")
    ingest(change.chat_id, [runner_frame.validate_python(r) for r in raw])
    return Chat.objects.get(pk=change.chat_id)


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def alice(client, acme) -> User:
    user = User.objects.create_user("alice", password="pw")
    Membership.objects.create(workspace=acme, user=user, role=Role.VIEWER)
    client.force_login(user)
    return user


def test_the_runs_list_asks_for_a_login(client):
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_runs_list_shows_a_members_runs_newest_first_and_hides_others(client, acme, alice):
    older = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Older run"))
    newer = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Newer run"))
    globex = Workspace.objects.create(slug="globex", name="Globex")
    run(globex, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Secret run"))
    html = client.get("/").content.decode()
    assert html.index(str(newer.pk)) < html.index(str(older.pk))
    assert "Secret run" not in html
    assert "running" in html and "live" in html


def test_a_chat_page_shows_the_reply_safely_and_the_rows_in_order(client, acme, alice):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, attempt, reply, prompt="Please <b>fix</b> it"),
        frames.say(2, "**Done** <script>alert('x')</script>"),
        frames.tool_call(3, "c1", "Read README.md", kind="read", status="completed"),
        frames.tool_call(
            4,
            "c2",
            "Edit a.py",
            kind="edit",
            content=[{"type": "diff", "path": "/w/a.py", "oldText": "a\n", "newText": "b\n"}],
        ),
    )
    html = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "<strong>Done</strong>" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "Please &lt;b&gt;fix&lt;/b&gt; it" in html
    assert html.index("Read README.md") < html.index("Edit a.py")
    assert '<span class="del">-a</span>' in html and '<span class="add">+b</span>' in html
    assert f'data-version="{chat.version}"' in html


def test_a_chat_is_not_found_for_someone_outside_its_workspace(client, acme):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    charlie = User.objects.create_user("charlie", password="pw")
    client.force_login(charlie)
    assert client.get(f"/chats/{chat.pk}/").status_code == 404


def test_a_superuser_sees_every_chat(client, acme):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.get(f"/chats/{chat.pk}/").status_code == 200


def test_pages_carry_a_strict_content_security_policy(client, acme, alice):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    policy = client.get(f"/chats/{chat.pk}/")["Content-Security-Policy"]
    assert "script-src 'self' 'nonce-" in policy and "unsafe-inline" not in policy


def test_create_agent_token_makes_the_workspace_and_prints_a_token_that_works(capsys):
    call_command("create_agent_token", "Team Rocket", name="ci")
    token = capsys.readouterr().out.strip()
    found = AgentToken.find(token)
    assert found is not None and found.workspace.slug == "team-rocket"
    assert token not in {found.digest, found.hint}  # only a hash is kept
