"""Looking after a workspace: members and roles, agent tokens, deleting runs, retention."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from activity.live import presence
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
from tests import factories, frames
from tests.members import member

pytestmark = pytest.mark.django_db


def run(workspace: Workspace, *, connected: bool = False, age_days: int = 0) -> Chat:
    """A run with a turn, a tool call and an open prompt, built the way a runner builds it."""
    chat = factories.run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix it"),
        frames.tool_call(2, "c1", "Run tests", kind="execute"),
        frames.permission(3, 7, "c1", "Run tests"),
    )
    if not connected:
        presence.disconnect(chat.pk, "runner")
    if age_days:
        created = timezone.now() - timedelta(days=age_days)
        Chat.objects.filter(pk=chat.pk).update(created_at=created)
    return Chat.objects.get(pk=chat.pk)


def membership(workspace: Workspace, user: User) -> Membership:
    return Membership.objects.get(workspace=workspace, user=user)


# --- members ---------------------------------------------------------------------------------


def test_the_workspaces_page_lists_a_users_workspaces_with_their_role_and_links_admins_to_manage(
    as_admin, acme, acme_admin, globex
):
    Membership.objects.create(workspace=globex, user=acme_admin, role=Role.VIEWER)
    Workspace.objects.create(slug="initech", name="Initech")
    html = as_admin.get("/workspaces/").content.decode()
    assert 'href="/workspaces/acme/"' in html and 'href="/workspaces/globex/"' not in html
    assert "Globex" in html and "Initech" not in html
    assert 'href="/workspaces/"' in html  # the nav link


def test_an_admin_sees_the_members_and_tokens(as_admin, acme, acme_viewer):
    AgentToken.issue(acme, "ci")
    response = as_admin.get("/workspaces/acme/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="member-{membership(acme, acme_viewer).pk}"' in html and "bob" in html
    assert "ci" in html and "never" in html
    assert "no-store" in response["Cache-Control"]


def test_an_admin_adds_a_member_with_a_role(as_admin, acme):
    User.objects.create_user("dave")
    response = as_admin.post(
        "/workspaces/acme/members/add", {"username": "dave", "role": "approver"}
    )
    assert response.status_code == 302 and response["Location"] == "/workspaces/acme/"
    assert Membership.objects.get(workspace=acme, user__username="dave").role == Role.APPROVER
    assert "Added dave to Acme as approver." in as_admin.get("/workspaces/acme/").content.decode()


def test_adding_an_unknown_user_is_explained_and_adds_no_one(as_admin, acme):
    response = as_admin.post(
        "/workspaces/acme/members/add", {"username": "nobody", "role": "viewer"}
    )
    assert response.status_code == 400
    assert "There is no user named “nobody”" in response.content.decode()
    assert acme.memberships.count() == 1


def test_adding_someone_who_is_already_a_member_is_explained_and_keeps_their_role(
    as_admin, acme, acme_viewer
):
    response = as_admin.post("/workspaces/acme/members/add", {"username": "bob", "role": "admin"})
    assert response.status_code == 400
    assert "bob is already a member of Acme, as viewer." in response.content.decode()
    assert membership(acme, acme_viewer).role == Role.VIEWER


def test_a_role_that_does_not_exist_is_refused(as_admin, acme, acme_viewer):
    target = membership(acme, acme_viewer)
    response = as_admin.post(f"/workspaces/acme/members/{target.pk}/role", {"role": "owner"})
    assert response.status_code == 400 and "is not a role" in response.content.decode()
    assert membership(acme, acme_viewer).role == Role.VIEWER


def test_an_admin_changes_a_members_role(as_admin, acme, acme_viewer):
    target = membership(acme, acme_viewer)
    response = as_admin.post(f"/workspaces/acme/members/{target.pk}/role", {"role": "approver"})
    assert response.status_code == 302
    assert membership(acme, acme_viewer).role == Role.APPROVER


def test_an_admin_removes_a_member(as_admin, acme, acme_viewer):
    target = membership(acme, acme_viewer)
    response = as_admin.post(f"/workspaces/acme/members/{target.pk}/remove")
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=target.pk).exists()
    assert as_admin.get("/workspaces/acme/").content.decode().count("Removed bob from Acme.") == 1


def test_a_member_of_another_workspace_is_never_touched(as_admin, globex, outsider):
    theirs = membership(globex, outsider)
    response = as_admin.post(f"/workspaces/acme/members/{theirs.pk}/remove")
    assert response.status_code == 404
    assert Membership.objects.filter(pk=theirs.pk).exists()


def test_the_last_admin_can_be_neither_demoted_nor_removed(as_admin, acme, acme_admin):
    own = membership(acme, acme_admin)
    demoted = as_admin.post(f"/workspaces/acme/members/{own.pk}/role", {"role": "viewer"})
    removed = as_admin.post(f"/workspaces/acme/members/{own.pk}/remove")
    for response in (demoted, removed):
        assert response.status_code == 400
        assert "carol is the last admin of Acme" in response.content.decode()
    assert membership(acme, acme_admin).role == Role.ADMIN


def test_an_admin_may_step_down_when_another_admin_remains(as_admin, acme, acme_admin):
    member(acme, "dave", Role.ADMIN)
    own = membership(acme, acme_admin)
    response = as_admin.post(f"/workspaces/acme/members/{own.pk}/role", {"role": "viewer"})
    assert response.status_code == 302 and response["Location"] == "/workspaces/"
    assert membership(acme, acme_admin).role == Role.VIEWER
    assert as_admin.get("/workspaces/acme/").status_code == 403


# --- who may do it ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_a_viewer_or_an_approver_is_refused_with_403_and_changes_nothing(
    client, acme, acme_admin, role
):
    erin = member(acme, "erin", role)
    client.force_login(erin)
    page = client.get("/workspaces/acme/")
    assert page.status_code == 403
    assert f"You are {role} in Acme" in page.content.decode()
    own, admin = membership(acme, erin), membership(acme, acme_admin)
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


def test_an_outsider_is_answered_with_404(as_outsider, acme, acme_admin):
    assert as_outsider.get("/workspaces/acme/").status_code == 404
    assert as_outsider.post("/workspaces/acme/tokens/create", {"name": "x"}).status_code == 404
    assert as_outsider.get("/workspaces/nowhere/").status_code == 404
    assert not AgentToken.objects.exists()


def test_a_stranger_is_asked_to_log_in(client, acme):
    response = client.get("/workspaces/acme/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_superuser_manages_any_workspace(client, acme):
    client.force_login(User.objects.create_superuser("root", password=None))
    assert client.get("/workspaces/acme/").status_code == 200


def test_changing_anything_needs_a_csrf_token(acme, acme_admin):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(acme_admin)
    assert strict.post("/workspaces/acme/tokens/create", {"name": "ci"}).status_code == 403
    assert not AgentToken.objects.exists()


# --- tokens ----------------------------------------------------------------------------------


def test_a_created_token_is_shown_once_with_a_command_line_and_works(as_admin, acme):
    response = as_admin.post("/workspaces/acme/tokens/create", {"name": "carol-laptop"})
    html = response.content.decode()
    assert response.status_code == 200
    plain = re.search(r'id="plain-token">(koru_[\w-]+)<', html)
    assert plain is not None
    token = plain.group(1)
    command = f"koruweb agent --server ws://testserver --token {token} -- AGENT"
    assert command in html
    found = AgentToken.find(token)
    assert found is not None and found.workspace == acme and found.name == "carol-laptop"
    assert token not in {found.digest, found.hint}  # only the hash is kept
    assert "no-store" in response["Cache-Control"]
    assert token not in as_admin.get("/workspaces/acme/").content.decode()


def test_a_token_needs_a_name_and_nothing_is_created_without_one(as_admin, acme):
    for name in ("   ", "x" * 101):
        response = as_admin.post("/workspaces/acme/tokens/create", {"name": name})
        assert response.status_code == 400 and "koru_" not in response.content.decode()
    assert not AgentToken.objects.exists()


def test_revoking_a_token_means_it_no_longer_authenticates(as_admin, acme):
    row, token = AgentToken.issue(acme, "ci")
    response = as_admin.post(f"/workspaces/acme/tokens/{row.pk}/revoke")
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert AgentToken.find(token) is None
    again = as_admin.post(f"/workspaces/acme/tokens/{row.pk}/revoke")
    assert again.status_code == 400 and "already revoked" in again.content.decode()


def test_another_workspaces_token_is_never_revoked(as_admin, acme, globex):
    row, token = AgentToken.issue(globex, "theirs")
    assert as_admin.post(f"/workspaces/acme/tokens/{row.pk}/revoke").status_code == 404
    assert AgentToken.find(token) is not None


# --- deleting a run --------------------------------------------------------------------------


def test_only_an_admin_is_offered_a_delete_button_on_the_run_page(as_admin, as_viewer, acme):
    chat = run(acme)
    page = as_admin.get(f"/chats/{chat.pk}/").content.decode()
    assert f'action="/chats/{chat.pk}/delete"' in page
    assert "/delete" not in as_viewer.get(f"/chats/{chat.pk}/").content.decode()


def test_a_run_and_everything_under_it_is_deleted_after_confirmation(as_admin, acme):
    chat, other = run(acme), run(acme)
    confirm = as_admin.get(f"/chats/{chat.pk}/delete")
    assert confirm.status_code == 200 and "Delete the run" in confirm.content.decode()
    assert Chat.objects.filter(pk=chat.pk).exists()  # asking deletes nothing
    response = as_admin.post(f"/chats/{chat.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/workspaces/acme/"
    assert not Chat.objects.filter(pk=chat.pk).exists()
    for model in (InferenceAttempt, Message, ToolActivity, Prompt):
        assert not model.objects.filter(chat_id=chat.pk).exists()
        assert model.objects.filter(chat_id=other.pk).exists()
    assert as_admin.get(f"/chats/{chat.pk}/").status_code == 404


def test_an_approver_may_not_delete_a_run(as_approver, acme, acme_admin):
    chat = run(acme)
    assert as_approver.get(f"/chats/{chat.pk}/delete").status_code == 403
    assert as_approver.post(f"/chats/{chat.pk}/delete").status_code == 403
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_a_run_stays_hidden_from_an_outsider_who_tries_to_delete_it(as_outsider, acme):
    chat = run(acme)
    assert as_outsider.post(f"/chats/{chat.pk}/delete").status_code == 404
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_a_run_whose_runner_is_connected_is_kept(as_admin, acme):
    chat = run(acme, connected=True)
    response = as_admin.post(f"/chats/{chat.pk}/delete")
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
