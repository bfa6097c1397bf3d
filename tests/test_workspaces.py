"""Looking after a workspace: members and roles, agent tokens, deleting runs, retention."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from activity import presence
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import (
    AgentToken,
    Chat,
    InferenceAttempt,
    Membership,
    Message,
    Prompt,
    Role,
    ToolActivity,
    Workspace,
)
from tests import frames

pytestmark = pytest.mark.django_db


def run(workspace: Workspace, *, connected: bool = False, age_days: int = 0) -> Chat:
    """A run with a turn, a tool call and an open prompt, built the way a runner builds it."""
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), "runner")
    raw = [
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix it"),
        frames.tool_call(2, "c1", "Run tests", kind="execute"),
        frames.permission(3, 7, "c1", "Run tests"),
    ]
    ingest(change.chat_id, [runner_frame.validate_python(r) for r in raw])
    if not connected:
        presence.disconnect(change.chat_id, "runner")
    if age_days:
        created = timezone.now() - timedelta(days=age_days)
        Chat.objects.filter(pk=change.chat_id).update(created_at=created)
    return Chat.objects.get(pk=change.chat_id)


def member(workspace: Workspace, name: str, role: Role) -> User:
    user = User.objects.create_user(name, password="pw")
    Membership.objects.create(workspace=workspace, user=user, role=role)
    return user


def membership(workspace: Workspace, user: User) -> Membership:
    return Membership.objects.get(workspace=workspace, user=user)


@pytest.fixture
def acme() -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def alice(client, acme) -> User:
    """Alice is an admin of Acme, logged in."""
    user = member(acme, "alice", Role.ADMIN)
    client.force_login(user)
    return user


@pytest.fixture
def bob(acme) -> User:
    return member(acme, "bob", Role.VIEWER)


# --- members ---------------------------------------------------------------------------------


def test_it_lists_the_users_workspaces_with_their_role_and_links_admins_to_manage(
    client, acme, alice
):
    globex = Workspace.objects.create(slug="globex", name="Globex")
    Membership.objects.create(workspace=globex, user=alice, role=Role.VIEWER)
    Workspace.objects.create(slug="initech", name="Initech")
    html = client.get("/workspaces/").content.decode()
    assert 'href="/workspaces/acme/"' in html and 'href="/workspaces/globex/"' not in html
    assert "Globex" in html and "Initech" not in html
    assert 'href="/workspaces/"' in html  # the nav link


def test_it_shows_an_admin_the_members_and_tokens(client, acme, alice, bob):
    AgentToken.issue(acme, "ci")
    response = client.get("/workspaces/acme/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="member-{membership(acme, bob).pk}"' in html and "bob" in html
    assert "ci" in html and "never" in html
    assert "no-store" in response["Cache-Control"]


def test_it_lets_an_admin_add_a_member_with_a_role(client, acme, alice):
    User.objects.create_user("carol", password="pw")
    response = client.post(
        "/workspaces/acme/members/add", {"username": "carol", "role": "approver"}
    )
    assert response.status_code == 302 and response["Location"] == "/workspaces/acme/"
    assert Membership.objects.get(workspace=acme, user__username="carol").role == Role.APPROVER
    assert "Added carol to Acme as approver." in client.get("/workspaces/acme/").content.decode()


def test_it_explains_an_unknown_user_and_adds_no_one(client, acme, alice):
    response = client.post("/workspaces/acme/members/add", {"username": "nobody", "role": "viewer"})
    assert response.status_code == 400
    assert "There is no user named “nobody”" in response.content.decode()
    assert acme.memberships.count() == 1


def test_it_explains_that_someone_is_already_a_member_and_keeps_their_role(
    client, acme, alice, bob
):
    response = client.post("/workspaces/acme/members/add", {"username": "bob", "role": "admin"})
    assert response.status_code == 400
    assert "bob is already a member of Acme, as viewer." in response.content.decode()
    assert membership(acme, bob).role == Role.VIEWER


def test_it_refuses_a_role_that_does_not_exist(client, acme, alice, bob):
    target = membership(acme, bob)
    response = client.post(f"/workspaces/acme/members/{target.pk}/role", {"role": "owner"})
    assert response.status_code == 400 and "is not a role" in response.content.decode()
    assert membership(acme, bob).role == Role.VIEWER


def test_it_lets_an_admin_change_a_members_role(client, acme, alice, bob):
    target = membership(acme, bob)
    response = client.post(f"/workspaces/acme/members/{target.pk}/role", {"role": "approver"})
    assert response.status_code == 302
    assert membership(acme, bob).role == Role.APPROVER


def test_it_lets_an_admin_remove_a_member(client, acme, alice, bob):
    target = membership(acme, bob)
    response = client.post(f"/workspaces/acme/members/{target.pk}/remove")
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=target.pk).exists()
    assert client.get("/workspaces/acme/").content.decode().count("Removed bob from Acme.") == 1


def test_it_will_not_touch_a_member_of_another_workspace(client, acme, alice):
    globex = Workspace.objects.create(slug="globex", name="Globex")
    outsider = membership(globex, member(globex, "gina", Role.ADMIN))
    response = client.post(f"/workspaces/acme/members/{outsider.pk}/remove")
    assert response.status_code == 404
    assert Membership.objects.filter(pk=outsider.pk).exists()


def test_it_protects_the_last_admin_from_demotion_and_removal(client, acme, alice):
    own = membership(acme, alice)
    demoted = client.post(f"/workspaces/acme/members/{own.pk}/role", {"role": "viewer"})
    removed = client.post(f"/workspaces/acme/members/{own.pk}/remove")
    for response in (demoted, removed):
        assert response.status_code == 400
        assert "alice is the last admin of Acme" in response.content.decode()
    assert membership(acme, alice).role == Role.ADMIN


def test_it_lets_an_admin_step_down_when_another_admin_remains(client, acme, alice):
    member(acme, "dave", Role.ADMIN)
    own = membership(acme, alice)
    response = client.post(f"/workspaces/acme/members/{own.pk}/role", {"role": "viewer"})
    assert response.status_code == 302 and response["Location"] == "/workspaces/"
    assert membership(acme, alice).role == Role.VIEWER
    assert client.get("/workspaces/acme/").status_code == 403


# --- who may do it ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_it_refuses_a_viewer_or_an_approver_with_403_and_changes_nothing(client, acme, alice, role):
    erin = member(acme, "erin", role)
    client.force_login(erin)
    page = client.get("/workspaces/acme/")
    assert page.status_code == 403
    assert f"You are {role} in Acme" in page.content.decode()
    own, admin = membership(acme, erin), membership(acme, alice)
    posts = [
        ("/workspaces/acme/members/add", {"username": "erin", "role": "admin"}),
        (f"/workspaces/acme/members/{own.pk}/role", {"role": "admin"}),
        (f"/workspaces/acme/members/{admin.pk}/remove", {}),
        ("/workspaces/acme/tokens/create", {"name": "sneaky"}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403
    assert membership(acme, erin).role == role
    assert Membership.objects.filter(pk=admin.pk).exists()
    assert not AgentToken.objects.exists()


def test_it_answers_an_outsider_with_404(client, acme, alice):
    client.force_login(User.objects.create_user("charlie", password="pw"))
    assert client.get("/workspaces/acme/").status_code == 404
    assert client.post("/workspaces/acme/tokens/create", {"name": "x"}).status_code == 404
    assert client.get("/workspaces/nowhere/").status_code == 404
    assert not AgentToken.objects.exists()


def test_it_asks_a_stranger_to_log_in(client, acme):
    response = client.get("/workspaces/acme/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_lets_a_superuser_manage_any_workspace(client, acme):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.get("/workspaces/acme/").status_code == 200


def test_it_needs_a_csrf_token_to_change_anything(acme, alice):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/workspaces/acme/tokens/create", {"name": "ci"}).status_code == 403
    assert not AgentToken.objects.exists()


# --- tokens ----------------------------------------------------------------------------------


def test_it_shows_a_created_token_once_with_a_command_line_and_the_token_works(client, acme, alice):
    response = client.post("/workspaces/acme/tokens/create", {"name": "alice-laptop"})
    html = response.content.decode()
    assert response.status_code == 200
    plain = re.search(r'id="plain-token">(koru_[\w-]+)<', html)
    assert plain is not None
    token = plain.group(1)
    assert f"python manage.py agent --server ws://testserver --token {token} -- AGENT" in html
    found = AgentToken.find(token)
    assert found is not None and found.workspace == acme and found.name == "alice-laptop"
    assert token not in {found.digest, found.hint}  # only the hash is kept
    assert "no-store" in response["Cache-Control"]
    assert token not in client.get("/workspaces/acme/").content.decode()


def test_it_asks_for_a_token_name_and_creates_nothing_without_one(client, acme, alice):
    for name in ("   ", "x" * 101):
        response = client.post("/workspaces/acme/tokens/create", {"name": name})
        assert response.status_code == 400 and "koru_" not in response.content.decode()
    assert not AgentToken.objects.exists()


def test_it_revokes_a_token_so_it_no_longer_authenticates(client, acme, alice):
    row, token = AgentToken.issue(acme, "ci")
    response = client.post(f"/workspaces/acme/tokens/{row.pk}/revoke")
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert AgentToken.find(token) is None
    again = client.post(f"/workspaces/acme/tokens/{row.pk}/revoke")
    assert again.status_code == 400 and "already revoked" in again.content.decode()


def test_it_will_not_revoke_another_workspaces_token(client, acme, alice):
    globex = Workspace.objects.create(slug="globex", name="Globex")
    row, token = AgentToken.issue(globex, "theirs")
    assert client.post(f"/workspaces/acme/tokens/{row.pk}/revoke").status_code == 404
    assert AgentToken.find(token) is not None


# --- deleting a run --------------------------------------------------------------------------


def test_it_offers_an_admin_a_delete_button_on_the_run_page(client, acme, alice, bob):
    chat = run(acme)
    assert f'action="/chats/{chat.pk}/delete"' in client.get(f"/chats/{chat.pk}/").content.decode()
    client.force_login(bob)
    assert "/delete" not in client.get(f"/chats/{chat.pk}/").content.decode()


def test_it_deletes_a_run_and_everything_under_it_after_confirmation(client, acme, alice):
    chat, other = run(acme), run(acme)
    confirm = client.get(f"/chats/{chat.pk}/delete")
    assert confirm.status_code == 200 and "Delete the run" in confirm.content.decode()
    assert Chat.objects.filter(pk=chat.pk).exists()  # asking deletes nothing
    response = client.post(f"/chats/{chat.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/workspaces/acme/"
    assert not Chat.objects.filter(pk=chat.pk).exists()
    for model in (InferenceAttempt, Message, ToolActivity, Prompt):
        assert not model.objects.filter(chat_id=chat.pk).exists()
        assert model.objects.filter(chat_id=other.pk).exists()
    assert client.get(f"/chats/{chat.pk}/").status_code == 404


def test_it_refuses_to_delete_a_run_for_an_approver(client, acme, alice):
    chat = run(acme)
    client.force_login(member(acme, "erin", Role.APPROVER))
    assert client.get(f"/chats/{chat.pk}/delete").status_code == 403
    assert client.post(f"/chats/{chat.pk}/delete").status_code == 403
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_it_hides_a_run_from_an_outsider_who_tries_to_delete_it(client, acme):
    chat = run(acme)
    client.force_login(User.objects.create_user("charlie", password="pw"))
    assert client.post(f"/chats/{chat.pk}/delete").status_code == 404
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_it_keeps_a_run_whose_runner_is_connected(client, acme, alice):
    chat = run(acme, connected=True)
    response = client.post(f"/chats/{chat.pk}/delete")
    assert response.status_code == 409 and "stop the runner" in response.content.decode()
    assert Chat.objects.filter(pk=chat.pk).exists()


# --- retention -------------------------------------------------------------------------------


def test_prune_runs_deletes_only_runs_older_than_the_setting(acme, settings, capsys):
    settings.RETENTION_DAYS = 30
    old, recent = run(acme, age_days=31), run(acme, age_days=29)
    call_command("prune_runs")
    assert "Deleted 1 run(s)" in capsys.readouterr().out
    assert not Chat.objects.filter(pk=old.pk).exists()
    assert Chat.objects.filter(pk=recent.pk).exists()
    assert not ToolActivity.objects.filter(chat_id=old.pk).exists()


def test_prune_runs_keeps_everything_when_the_setting_is_zero(acme, settings, capsys):
    settings.RETENTION_DAYS = 0
    old = run(acme, age_days=3650)
    call_command("prune_runs")
    assert "nothing deleted" in capsys.readouterr().out
    assert Chat.objects.filter(pk=old.pk).exists()


def test_prune_runs_days_overrides_the_setting(acme, settings, capsys):
    settings.RETENTION_DAYS = 0
    old, recent = run(acme, age_days=8), run(acme, age_days=1)
    call_command("prune_runs", "--days", "7")
    assert "Deleted 1 run(s)" in capsys.readouterr().out
    assert list(Chat.objects.values_list("pk", flat=True)) == [recent.pk]
    assert old.pk != recent.pk
    with pytest.raises(CommandError, match="--days must be 1 or more"):
        call_command("prune_runs", "--days", "0")


def test_prune_runs_keeps_an_old_run_whose_runner_is_connected(acme, settings, capsys):
    settings.RETENTION_DAYS = 30
    live = run(acme, connected=True, age_days=40)
    call_command("prune_runs")
    out = capsys.readouterr().out
    assert "Deleted 0 run(s)" in out and "Kept 1 older run(s) whose runner is connected" in out
    assert Chat.objects.filter(pk=live.pk).exists()


def test_prune_runs_dry_run_only_counts(acme, settings, capsys):
    settings.RETENTION_DAYS = 30
    old = run(acme, age_days=31)
    call_command("prune_runs", "--dry-run")
    assert "Would delete 1 run(s)" in capsys.readouterr().out
    assert Chat.objects.filter(pk=old.pk).exists()
