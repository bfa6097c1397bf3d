"""Comments in Markdown, and ``@name`` mentions that reach the mentioned member's inbox: kept
only for members of the run's workspace, highlighted, counted on *Inbox* on every page (live),
until the person opens or dismisses them — and only they can."""

from __future__ import annotations

import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import connections

from activity.models import Comment, Mention, Role, ToolActivity, Workspace
from activity.push.pushes import render_changes
from activity.review import mentions
from tests import factories, frames
from tests.members import logged_in, member
from tests.push.test_inbox import needs_socket, said

pytestmark = pytest.mark.django_db


def a_call(workspace: Workspace) -> ToolActivity:
    chat = factories.run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), prompt="Tidy the build"),
        frames.tool_call(2, "c1", "Run make clean", kind="execute", status="completed"),
    )
    return ToolActivity.objects.get(chat=chat)


def comment(author: User, row: ToolActivity, text: str) -> int:
    response = logged_in(author).post(
        f"/tools/{row.pk}/comments", {"text": text}, HTTP_HX_REQUEST="true"
    )
    return response.status_code


# --- Markdown and the names it mentions -------------------------------------------------------


def test_a_comment_reads_as_markdown_and_no_markup_a_person_wrote_survives():
    text = "**Why** `rm`?\n\n<script>alert(1)</script> [x](javascript:alert(1))"
    html = mentions.render(text, [])
    assert "<strong>Why</strong>" in html and "<code>rm</code>" in html
    assert "<script" not in html and "&lt;script&gt;" in html  # shown, as text
    assert "href" not in html  # a javascript: link is no link


def test_only_mentions_in_text_count_never_in_code_links_or_an_email_address():
    text = "@alice and @Bob.\n\n`@carol` [@dave](https://x.example) mail ed@example.com @alice"
    assert mentions.mentioned_names(text) == ["alice", "Bob"]


def test_a_members_mention_is_highlighted_and_anyone_elses_is_left_as_text():
    html = mentions.render("@alice look, @nobody <b>too</b>", ["alice"])
    assert '<span class="mention">@alice</span>' in html
    assert "@nobody" in html and '<span class="mention">@nobody' not in html
    assert "<b>" not in html


def test_a_highlighted_comment_still_lets_no_class_or_tag_of_the_writer_through():
    text = '@alice <span class="mention">fake</span> <img src=x onerror=1>'
    html = mentions.render(text, ["alice"])
    assert html.count('<span class="mention">') == 1  # the writer's own span is text
    assert "<img" not in html and "&lt;img src=x onerror=1&gt;" in html  # shown as text


# --- who is told ----------------------------------------------------------------------------


def test_a_mentioned_member_finds_the_comment_in_their_inbox(acme, acme_approver, acme_viewer):
    row = a_call(acme)
    assert comment(acme_viewer, row, "@alice is `make clean` safe here?") == 204
    page = logged_in(acme_approver).get("/inbox/").content.decode()
    assert "<bdi>bob</bdi></strong> mentioned you on" in page
    assert "Run make clean" in page and "<code>make clean</code>" in page
    assert 'aria-hidden="true">1</span>' in page  # the count on Inbox, on every page
    assert "(1) Inbox" in page


def test_nobody_outside_the_workspace_the_writer_or_an_unknown_name_is_told(
    acme, acme_approver, outsider
):
    row = a_call(acme)
    comment(acme_approver, row, "@charlie @alice @ghost see this")
    assert not Mention.objects.filter(user=outsider).exists()  # charlie is of Globex
    mine = Mention.objects.get(user=acme_approver)
    assert mine.seen_at is not None  # highlighted, never in her own inbox
    assert mentions.waiting_for(acme_approver) == []
    page = logged_in(acme_approver).get(f"/chats/{row.chat_id}/").content.decode()
    assert 'class="mention">@alice' in page


def test_a_comment_that_holds_a_secret_still_mentions_and_the_inbox_shows_it_masked(
    acme, acme_approver, acme_viewer
):
    key = "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert comment(acme_viewer, a_call(acme), f"@alice the log shows {key} and {token}") == 204
    assert Mention.objects.filter(user=acme_approver, seen_at__isnull=True).exists()
    page = logged_in(acme_approver).get("/inbox/").content.decode()
    assert '<span class="mention">@alice</span> the log shows OPENAI_API_KEY=***' in page
    assert "abcdefghijklmnopqrstuvwxyz0123" not in page and token not in page


def test_the_same_name_twice_in_one_comment_is_one_mention(acme, acme_approver, acme_viewer):
    comment(acme_viewer, a_call(acme), "@alice, and again @ALICE")
    assert Mention.objects.filter(user=acme_approver).count() == 1


def test_the_comment_every_viewer_is_pushed_shows_its_markdown_and_the_mention(
    acme, acme_approver, acme_viewer
):
    row = a_call(acme)
    version = row.chat.version
    comment(acme_viewer, row, "**@alice** look")
    pushed, _ = render_changes(row.chat_id, version)
    assert '<strong><span class="mention">@alice</span></strong>' in pushed


# --- opening and dismissing -----------------------------------------------------------------


def test_opening_a_mention_goes_to_the_call_and_takes_it_out_of_the_inbox(
    acme, acme_approver, acme_viewer
):
    row = a_call(acme)
    comment(acme_viewer, row, "@alice ?")
    mention = Mention.objects.get(user=acme_approver)
    alice = logged_in(acme_approver)
    assert alice.get(f"/mentions/{mention.pk}/")["Location"] == f"/tools/{row.pk}/"
    assert mentions.waiting_for(acme_approver) == []
    assert "Nobody has mentioned you" in alice.get("/inbox/").content.decode()


def test_a_dismissed_mention_leaves_the_inbox(acme, acme_approver, acme_viewer):
    comment(acme_viewer, a_call(acme), "@alice ?")
    mention = Mention.objects.get(user=acme_approver)
    alice = logged_in(acme_approver)
    assert alice.get(f"/mentions/{mention.pk}/dismiss").status_code == 405  # a POST only
    assert alice.post(f"/mentions/{mention.pk}/dismiss")["Location"] == "/inbox/"
    assert mentions.waiting_count(acme_approver) == 0


def test_only_the_mentioned_person_may_open_or_dismiss_their_mention(
    acme, acme_approver, acme_viewer, outsider
):
    comment(acme_viewer, a_call(acme), "@alice ?")
    mention = Mention.objects.get(user=acme_approver)
    for someone in (acme_viewer, outsider):
        client = logged_in(someone)
        assert client.get(f"/mentions/{mention.pk}/").status_code == 404
        assert client.post(f"/mentions/{mention.pk}/dismiss").status_code == 404
    assert mentions.waiting_count(acme_approver) == 1


def test_a_member_who_left_the_workspace_is_no_longer_reminded_of_its_runs(
    acme, acme_approver, acme_viewer
):
    comment(acme_viewer, a_call(acme), "@alice ?")
    acme_approver.memberships.all().delete()
    assert mentions.waiting_count(acme_approver) == 0
    mention = Mention.objects.get(user=acme_approver)
    assert logged_in(acme_approver).get(f"/mentions/{mention.pk}/").status_code == 404
    mention.refresh_from_db()
    assert mention.seen_at is None  # a refused open changes nothing


def test_a_deleted_comment_takes_its_mentions_with_it(acme, acme_approver, acme_viewer):
    comment(acme_viewer, a_call(acme), "@alice ?")
    Comment.objects.all().delete()
    assert not Mention.objects.exists()


# --- live -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_mentioned_persons_pages_hear_the_count_and_who_mentioned_them(acme):
    alice = await database_sync_to_async(member)(acme, "alice", Role.APPROVER)
    bob = await database_sync_to_async(member)(acme, "bob", Role.VIEWER)
    dave = await database_sync_to_async(member)(acme, "dave", Role.VIEWER)
    row = await database_sync_to_async(a_call)(acme)
    alices, daves = await needs_socket(alice), await needs_socket(dave)
    try:
        assert (await alices.receive_json_from())["mentions"] == 0
        await daves.receive_json_from()
        assert await database_sync_to_async(comment)(bob, row, "@alice have a look") == 204
        heard = await said(alices, lambda m: "mentions" in m and "counts" not in m)
        assert heard == {
            "mentions": 1,
            "reviews": 0,
            "said": "bob mentioned you in Fix the flaky test",
        }
        assert await daves.receive_nothing(timeout=0.3)  # dave was not mentioned

        mention = await database_sync_to_async(Mention.objects.get)(user=alice)
        client = await database_sync_to_async(logged_in)(alice)
        await database_sync_to_async(client.post)(f"/mentions/{mention.pk}/dismiss")
        assert await said(alices, lambda m: "mentions" in m) == {"mentions": 0, "reviews": 0}
    finally:
        await alices.disconnect()
        await daves.disconnect()
        await database_sync_to_async(connections.close_all)()


def test_a_member_whose_username_is_an_email_address_is_mentioned_by_all_of_it(acme, acme_viewer):
    ada = member(acme, "ada@example.com", Role.VIEWER)
    member(acme, "ada", Role.VIEWER)
    comment(acme_viewer, a_call(acme), "@ada@example.com, have a look")
    assert [m.user for m in Mention.objects.all()] == [ada]


def test_a_link_from_another_site_goes_to_the_call_but_leaves_the_mention_waiting(
    acme, acme_approver, acme_viewer
):
    row = a_call(acme)
    comment(acme_viewer, row, "@alice ?")
    mention = Mention.objects.get(user=acme_approver)
    alice = logged_in(acme_approver)
    opened = alice.get(f"/mentions/{mention.pk}/", headers={"Sec-Fetch-Site": "cross-site"})
    assert opened["Location"] == f"/tools/{row.pk}/"
    assert mentions.waiting_count(acme_approver) == 1  # only she empties her inbox
    alice.get(f"/mentions/{mention.pk}/", headers={"Sec-Fetch-Site": "same-origin"})
    assert mentions.waiting_count(acme_approver) == 0


def test_an_inbox_with_more_mentions_than_it_lists_says_how_many_wait(
    acme, acme_approver, acme_viewer, settings
):
    settings.COMMENTS_PER_MINUTE = mentions.INBOX_MENTIONS + 2  # one person writes them all
    row = a_call(acme)
    for n in range(mentions.INBOX_MENTIONS + 2):
        comment(acme_viewer, row, f"@alice look ({n})")
    page = logged_in(acme_approver).get("/inbox/").content.decode()
    assert page.count('class="inbox-item mention-item"') == mentions.INBOX_MENTIONS
    assert f"The {mentions.INBOX_MENTIONS} newest of {mentions.INBOX_MENTIONS + 2}" in page
    assert f"({mentions.INBOX_MENTIONS + 2}) Inbox" in page  # the count is all of them


def test_the_31st_comment_in_a_minute_is_refused_with_429_and_says_why(
    acme, acme_approver, acme_viewer
):
    row = a_call(acme)
    assert [comment(acme_viewer, row, f"look ({n})") for n in range(30)] == [204] * 30
    bob = logged_in(acme_viewer)
    refused = bob.post(f"/tools/{row.pk}/comments", {"text": "one more"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 429
    assert (
        "You have written 30 comments within a minute, the most one person may: wait a minute "
        "and try again."
    ) in refused.content.decode()
    plain = bob.post(f"/tools/{row.pk}/comments", {"text": "without htmx"})
    assert plain.status_code == 429 and plain["Content-Type"].startswith("text/plain")
    assert Comment.objects.filter(tool=row).count() == 30
    assert comment(acme_approver, row, "someone else still may") == 204  # counted per person
