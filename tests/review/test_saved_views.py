"""Saved views (issue 30): a filter of the runs list, of a run's calls or a search kept under a
name at a stable address, private or shared with a workspace; who sees, opens and deletes each."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from activity.live import presence
from activity.models import Chat, SavedView, Workspace
from tests import frames

pytestmark = pytest.mark.django_db


def chat_in(workspace: Workspace) -> Chat:
    chat_id = uuid.uuid4()
    presence.claim(workspace.pk, chat_id, "specific.test!r", 0, frames.secret_of(chat_id))
    return Chat.objects.get(pk=chat_id)


def save(client: Client, **fields: str) -> tuple[int, str]:
    response = client.post("/views/save", fields)
    return response.status_code, response.get("Location", response.content.decode())


def test_a_view_keeps_only_its_pages_filter_and_opens_at_a_stable_address(acme, as_approver):
    query = "failures=on&workspace=acme&page=3&evil=1&status=running"
    status, where = save(as_approver, kind="runs", query=query, name="Failing runs")
    view = SavedView.objects.get()
    assert status == 302 and where == f"/views/{view.pk}/"
    assert view.query == "workspace=acme&status=running&failures=on" and not view.shared
    opened = as_approver.get(where)
    assert opened.status_code == 302 and opened["Location"] == f"/?{view.query}"
    page = as_approver.get(opened["Location"]).content.decode()
    assert "Failing runs" in page and f'href="/views/{view.pk}/"' in page


def test_a_private_view_is_its_owners_alone_and_a_shared_one_every_members(
    acme, globex, as_approver, as_viewer, as_outsider
):
    save(as_approver, kind="runs", query="waiting=on", name="Mine")
    save(as_approver, kind="search", query="q=deploy&sort=newest", name="Deploys", share="acme")
    mine, shared = SavedView.objects.order_by("name")[1], SavedView.objects.order_by("name")[0]
    assert (mine.name, shared.name, shared.shared) == ("Mine", "Deploys", True)
    assert as_viewer.get(f"/views/{mine.pk}/").status_code == 404
    assert as_viewer.get(f"/views/{shared.pk}/")["Location"] == "/search/?q=deploy&sort=newest"
    assert "Deploys" in as_viewer.get("/search/?q=deploy").content.decode()
    assert as_outsider.get(f"/views/{shared.pk}/").status_code == 404
    assert "Deploys" not in as_outsider.get("/search/?q=deploy").content.decode()
    assert Client().get(f"/views/{shared.pk}/").status_code == 302  # to the login page
    assert save(as_outsider, kind="runs", query="waiting=on", name="x", share="acme")[0] == 403


def test_a_view_of_a_runs_calls_opens_that_run_for_those_who_may_see_it(
    acme, as_approver, as_outsider
):
    chat = chat_in(acme)
    status, where = save(
        as_approver, kind="calls", query="status=failed", chat=str(chat.pk), name="Failed calls"
    )
    assert status == 302
    assert as_approver.get(where)["Location"] == f"/chats/{chat.pk}/?status=failed"
    assert "Failed calls" in as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert save(as_outsider, kind="calls", query="q=x", chat=str(chat.pk), name="x")[0] == 404
    assert save(as_approver, kind="calls", query="q=x", chat="not-a-run", name="x")[0] == 404


def test_only_its_owner_or_an_admin_deletes_a_view(acme, as_approver, as_viewer, as_admin):
    save(as_approver, kind="runs", query="waiting=on", name="Waiting", share="acme")
    view = SavedView.objects.get()
    assert as_viewer.post(f"/views/{view.pk}/delete").status_code == 403
    assert as_admin.post(f"/views/{view.pk}/delete", {"next": "//evil.example/"})["Location"] == "/"
    assert not SavedView.objects.exists()


def test_a_view_without_a_name_or_of_no_page_is_refused_in_words(acme, as_approver):
    assert save(as_approver, kind="runs", query="waiting=on", name=" ") == (
        400,
        "Name the view: 1 to 100 characters.",
    )
    assert save(as_approver, kind="admin", query="", name="x")[0] == 400
    assert (
        save(as_approver, kind="runs", query="q=" + "x" * 3000, name="x")[0] == 302
    )  # q is no runs key
    assert not SavedView.objects.filter(query__contains="x" * 100).exists()
    assert Client(enforce_csrf_checks=True).post("/views/save").status_code in (302, 403)
