"""Share links (issue 30): a read-only link to one run that works without an account, shows the
stored, masked run and none of the team's own, expires, and is revoked at once; who may make and
revoke one. The live side (the link's socket) is tests/sockets/test_shared.py, a browser on it
tests/browser/test_share_links_browser.py."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from activity.live import boundary
from activity.models import Chat, InferenceAttempt, Prompt, ShareLink, ToolActivity, Workspace
from activity.review import shares
from tests import factories, frames

pytestmark = pytest.mark.django_db
LINK = re.compile(r"http://testserver(/s/[\w-]+/)")


def busy_run(workspace: Workspace) -> Chat:
    """A run with a call its team commented on, a prompt alice answered and one still waiting,
    and a secret the agent printed (stored masked)."""
    chat = factories.run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Tidy the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
        frames.tool_call(4, "call-2", "cat .env", kind="read"),
        frames.permission(5, 8, "call-2", "cat .env"),
    )
    said = frames.say(6, "The key was AKIAIOSFODNN7EXAMPLE, now rotated.")
    factories.apply(chat.pk, boundary.load(json.dumps(said)))  # through the server's boundary
    return chat


def share(client: Client, chat: Chat, hours: str = "24") -> str:
    """Make a link as ``client``; its path."""
    made = client.post(f"/chats/{chat.pk}/share", {"hours": hours})
    assert made.status_code == 200, made.content
    found = LINK.search(made.content.decode())
    assert found, made.content
    return found.group(1)


def test_a_link_shows_the_run_to_someone_without_an_account_and_tells_no_one_where_from(
    acme, as_admin
):
    chat = busy_run(acme)
    path = share(as_admin, chat)
    page = Client().get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Tidy the build" in html and "rm -rf build" in html and "now rotated" in html
    assert "AKIAIOSFODNN7EXAMPLE" not in html  # only the stored, masked text
    assert page["Referrer-Policy"] == "no-referrer"
    assert "noindex" in page["X-Robots-Tag"] and '<meta name="robots" content="noindex' in html
    assert "no-store" in page["Cache-Control"]
    assert f'hx-ws:connect="{path.replace("/s/", "/ws/shared/")}"' in html
    assert ShareLink.objects.get().last_opened_at is not None


def test_a_shared_page_hides_comments_watchers_the_message_box_and_members_names(
    acme, as_admin, as_approver, acme_admin
):
    chat = busy_run(acme)
    Chat.objects.filter(pk=chat.pk).update(allow_web=True)
    first = Prompt.objects.filter(chat=chat).order_by("created_at").first()
    assert first is not None
    as_approver.post(f"/prompts/{first.pk}/answer", {"choice": "allow-once"})
    call = ToolActivity.objects.get(chat=chat, tool_call_id="call-1")
    said = as_admin.post(f"/tools/{call.pk}/comments", {"text": "Careful here @alice"})
    assert said.status_code == 302  # back to the call
    InferenceAttempt.objects.filter(chat=chat).update(  # cancelled and sent from the web
        sent_by=acme_admin,
        cancelled_by=acme_admin,
        stop_reason="cancelled",
        ended_at=1_700_000_100_000,
    )
    member_page = as_admin.get(f"/chats/{chat.pk}/").content.decode()
    assert "Careful here" in member_page and "by alice" in member_page  # what a member sees
    assert "Cancelled by " in member_page and "on the web" in member_page
    html = Client().get(share(as_admin, chat)).content.decode()
    assert "Allowed once" in html and "Cancelled" in html  # what was decided shows …
    for hidden in ("Careful here", "Comment on this call", "compose", "watching", "Log out"):
        assert hidden not in html, hidden
    assert "Cancelled by" not in html and "sent on the web" in html
    for name in ("alice", "carol", "a former member", acme_admin.get_username()):  # … not who
        assert name not in html, name
    assert "/chats/" not in html and "/tools/" not in html  # no way into the team's pages


def test_a_waiting_prompt_shows_what_it_asks_but_cannot_be_answered_through_a_link(acme, as_admin):
    chat = busy_run(acme)
    visitor = Client()
    html = visitor.get(share(as_admin, chat)).content.decode()
    assert "cat .env" in html and "Waiting for the team's answer" in html
    assert 'class="answer"' not in html and 'name="choice"' not in html
    waiting = Prompt.objects.filter(chat=chat, answered_at__isnull=True).first()
    assert waiting is not None
    answered = visitor.post(f"/prompts/{waiting.pk}/answer", {"choice": "allow-once"})
    assert answered.status_code == 302 and "/login/" in answered["Location"]
    waiting.refresh_from_db()
    assert waiting.answered_at is None


def test_a_revoked_or_expired_link_shows_nothing_and_says_it_does_not_work(acme, as_admin):
    chat = busy_run(acme)
    revoked, expired = share(as_admin, chat), share(as_admin, chat, "1")
    link = ShareLink.objects.get(hint=revoked.split("/")[2][:6])
    assert as_admin.post(f"/shares/{link.pk}/revoke").status_code == 302
    ShareLink.objects.exclude(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for path in (revoked, expired, "/s/not-a-link/", "/s/" + "x" * 200 + "/"):
        gone = Client().get(path)
        assert gone.status_code == 404 and "This link does not work" in gone.content.decode()
        assert "Tidy the build" not in gone.content.decode()
        assert gone["Referrer-Policy"] == "no-referrer"
    assert ShareLink.objects.get(pk=link.pk).revoked_by is not None


def test_only_who_the_workspace_allows_makes_or_revokes_a_link(
    acme, as_admin, as_approver, as_viewer, as_outsider, acme_approver
):
    chat = busy_run(acme)
    assert as_viewer.post(f"/chats/{chat.pk}/share", {"hours": "24"}).status_code == 403
    refused = as_approver.post(f"/chats/{chat.pk}/share", {"hours": "24"})
    assert refused.status_code == 403 and "made by its admins" in refused.content.decode()
    assert as_outsider.post(f"/chats/{chat.pk}/share", {"hours": "24"}).status_code == 404
    anonymous = Client().post(f"/chats/{chat.pk}/share", {"hours": "24"})
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(acme_approver)
    assert csrf.post(f"/chats/{chat.pk}/share", {"hours": "24"}).status_code == 403
    for hours in ("0", "25", "999999", "x", ""):
        assert as_admin.post(f"/chats/{chat.pk}/share", {"hours": hours}).status_code == 400
    assert not ShareLink.objects.exists()
    sharing = "/workspaces/acme/sharing"
    assert as_approver.post(sharing, {"share_role": "approver"}).status_code == 403
    assert as_admin.post(sharing, {"share_role": "viewer"}).status_code == 400
    assert as_admin.post(sharing, {"share_role": "approver"}).status_code == 302
    share(as_approver, chat)  # approvers may, now
    link = ShareLink.objects.get()
    assert as_viewer.post(f"/shares/{link.pk}/revoke").status_code == 403
    assert as_outsider.post(f"/shares/{link.pk}/revoke").status_code == 404
    assert ShareLink.objects.get().live
    assert as_approver.post(f"/shares/{link.pk}/revoke").status_code == 302
    assert not ShareLink.objects.get().live


def test_the_workspace_page_lists_its_live_links_who_made_them_and_when_they_were_last_opened(
    acme, as_admin, acme_admin
):
    chat = busy_run(acme)
    opened, never, revoked = (share(as_admin, chat) for _ in range(3))
    Client().get(opened)
    gone = ShareLink.objects.get(hint=revoked.split("/")[2][:6])
    shares.revoke(gone, acme_admin)
    html = as_admin.get("/workspaces/acme/").content.decode()
    rows = re.findall(r'<tr id="share-link-(\d+)">(.*?)</tr>', html, re.S)
    assert {int(pk) for pk, _ in rows} == set(
        ShareLink.objects.exclude(pk=gone.pk).values_list("pk", flat=True)
    )
    by_hint = {row: text for _, text in rows for row in [re.search(r"<code>([\w-]+)…", text)[1]]}  # type: ignore[index]
    assert "never" in by_hint[never.split("/")[2][:6]]
    assert "never" not in by_hint[opened.split("/")[2][:6]]
    assert all(acme_admin.get_username() in text for text in by_hint.values())


def test_a_run_has_at_most_a_bounded_number_of_live_links(acme, as_admin, acme_admin: User):
    chat = busy_run(acme)
    for _ in range(shares.PER_RUN):
        shares.make(chat, acme_admin, 1)
    refused = as_admin.post(f"/chats/{chat.pk}/share", {"hours": "1"})
    assert refused.status_code == 409 and "revoke one first" in refused.content.decode()
    assert ShareLink.objects.count() == shares.PER_RUN


def test_only_the_links_hash_is_kept(acme, as_admin):
    chat = busy_run(acme)
    path = share(as_admin, chat)
    token = path.split("/")[2]
    link = ShareLink.objects.get()
    assert token not in link.token_hash and link.token_hash == shares.digest(token)


def test_holding_a_link_opens_nothing_else_of_the_run_or_the_workspace(acme, as_admin):
    chat = busy_run(acme)
    visitor = Client()
    visitor.get(share(as_admin, chat))
    call = ToolActivity.objects.filter(chat=chat).first()
    assert call is not None
    for path in (
        f"/chats/{chat.pk}/",
        f"/chats/{chat.pk}/transcript.md",
        f"/api/chats/{chat.pk}/tool-activity",
        f"/chats/{chat.pk}/changes/",
        f"/tools/{call.pk}/",
        "/workspaces/acme/",
    ):
        assert visitor.get(path).status_code in (302, 401, 403, 404), path
    for path, form in (
        (f"/tools/{call.pk}/comments", {"text": "hi"}),
        (f"/chats/{chat.pk}/messages", {"text": "rm -rf /"}),
        (f"/chats/{chat.pk}/share", {"hours": "24"}),
        (f"/shares/{ShareLink.objects.get().pk}/revoke", {}),
    ):
        assert visitor.post(path, form).status_code in (302, 401, 403), path
    assert ShareLink.objects.get().live and ShareLink.objects.count() == 1
    assert not chat.web_prompts.exists()
