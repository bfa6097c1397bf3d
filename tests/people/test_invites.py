"""Inviting people by a one-time link: admins make, list and revoke invites; a link lets a new
person sign up (or someone logged in join) with the invite's role, once, before it expires."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from activity.models import Invite, InviteState, Membership, Role, Workspace
from activity.people import invites

pytestmark = pytest.mark.django_db

PASSWORD = "a long passphrase 42"


def make_link(client: Client, role: str = "approver", days: str = "7") -> str:
    """Make an invite on the page and return the link path it shows (once)."""
    response = client.post("/workspaces/acme/invites/create", {"role": role, "days": days})
    assert response.status_code == 200
    found = re.search(r'value="http://testserver(/invite/inv_[\w-]+/)"', response.content.decode())
    assert found, "the new link is shown"
    return found[1]


def sign_up(link: str, username: str = "dana") -> Client:
    client = Client()
    client.post(link, {"username": username, "password1": PASSWORD, "password2": PASSWORD})
    return client


def test_an_admin_invites_a_new_person_who_signs_up_once_with_the_invites_role(as_admin, acme):
    page = as_admin.get("/workspaces/acme/").content.decode()
    assert "/workspaces/acme/invites/" in page, "the workspace page links to the invites"
    link = make_link(as_admin, role="approver")
    invite = Invite.objects.get()
    assert link.split("/")[2] not in invite.digest and len(invite.digest) == 64, "only a hash"

    stranger = Client()
    shown = stranger.get(link).content.decode()
    assert "Join Acme" in shown and "approver" in shown and "carol" in shown
    response = stranger.post(
        link, {"username": "dana", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert response.status_code == 302
    dana = User.objects.get(username="dana")
    assert Membership.objects.get(user=dana, workspace=acme).role == Role.APPROVER
    assert "You joined Acme" in stranger.get(link).content.decode()
    assert stranger.get("/").status_code == 200, "logged in after signing up"

    listed = as_admin.get("/workspaces/acme/invites/").content.decode()
    assert "used" in listed and "by dana" in listed

    again = sign_up(link, "eve").get(link)
    assert not User.objects.filter(username="eve").exists(), "no account from a spent link"
    refused = Client().post(link, {"username": "eve", "password1": PASSWORD, "password2": PASSWORD})
    assert refused.status_code == 410 and "already used" in refused.content.decode()
    assert again.status_code == 410


def test_someone_logged_in_joins_by_the_link_and_a_member_cannot_spend_it(
    as_admin, as_viewer, acme, outsider
):
    link = make_link(as_admin, role="viewer")
    member_page = as_viewer.get(link)
    assert "already a member of Acme" in member_page.content.decode()
    as_viewer.post(link)
    assert Invite.objects.get().state == InviteState.OPEN, "left for someone else"

    charlie = Client()
    charlie.force_login(outsider)
    assert "You are logged in as <strong>charlie</strong>" in charlie.get(link).content.decode()
    assert charlie.post(link).status_code == 302
    assert Membership.objects.get(user=outsider, workspace=acme).role == Role.VIEWER
    assert Invite.objects.get().used_by == outsider


def test_expired_revoked_and_unknown_links_are_refused_plainly_and_change_nothing(as_admin, acme):
    expired = make_link(as_admin)
    Invite.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    response = sign_up(expired).get(expired)
    assert response.status_code == 410 and "expired" in response.content.decode()

    revoked = make_link(as_admin)
    open_invite = Invite.objects.get(revoked_at__isnull=True, expires_at__gt=timezone.now())
    after = as_admin.post(f"/workspaces/acme/invites/{open_invite.pk}/revoke", follow=True)
    assert "Revoked the invite" in after.content.decode()
    response = Client().post(
        revoked, {"username": "dana", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert response.status_code == 410 and "withdrawn" in response.content.decode()
    again = as_admin.post(f"/workspaces/acme/invites/{open_invite.pk}/revoke")
    assert again.status_code == 400 and "only an open one" in again.content.decode()

    unknown = Client().get("/invite/inv_not-a-real-one/")
    assert unknown.status_code == 404 and "not valid" in unknown.content.decode()
    assert not User.objects.filter(username="dana").exists()
    assert Membership.objects.filter(workspace=acme).count() == 1  # carol only


def test_bad_invite_input_is_refused_with_a_reason(as_admin, acme):
    wrong_days = as_admin.post("/workspaces/acme/invites/create", {"role": "viewer", "days": "3"})
    assert wrong_days.status_code == 400 and "1, 7 or 30 days" in wrong_days.content.decode()
    wrong_role = as_admin.post("/workspaces/acme/invites/create", {"role": "owner", "days": "7"})
    assert wrong_role.status_code == 400
    assert not Invite.objects.exists()


def test_only_admins_make_list_or_revoke_invites(as_approver, as_outsider, acme):
    other = Workspace.objects.get(slug="acme")
    invite, _ = invites.issue(other, Role.VIEWER, 7, None)
    for client, status in ((as_approver, 403), (as_outsider, 404)):
        assert client.get("/workspaces/acme/invites/").status_code == status
        made = client.post("/workspaces/acme/invites/create", {"role": "admin", "days": "7"})
        assert made.status_code == status
        revoked = client.post(f"/workspaces/acme/invites/{invite.pk}/revoke")
        assert revoked.status_code == status
    assert Invite.objects.count() == 1 and Invite.objects.get().state == "open"
    assert Client().get("/workspaces/acme/invites/").status_code == 302  # to the login page
