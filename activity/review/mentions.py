"""Comments in Markdown, and ``@username`` mentions that reach the member's inbox.

A comment is rendered by the replies' own sanitiser (``markdown.render_markdown``: markdown-it
with raw HTML off, then nh3). Mentions are found in what that rendered: in text, never inside
code, a code block or a link, so ``@alice`` in backticks mentions nobody. A mention of a member
of the run's workspace is kept as a ``Mention`` (the member's inbox lists it until they open or
dismiss it) and shown highlighted; a mention of anyone else is left as plain text and nothing
is kept. A member who mentions themselves is highlighted but not notified.

Highlighting walks the sanitised HTML's text and wraps a mention in ``<span class="mention">``,
then cleans the result again with nh3, letting only that one class through: whatever the walk
did, no markup a person wrote survives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from html import escape
from html.parser import HTMLParser
from typing import Any

import nh3
from django.db import models
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from activity.core.contract import bound
from activity.core.masking import mask
from activity.live import chats
from activity.live.work import ChatChange
from activity.models import Comment, ToolActivity
from activity.models.accounts import Membership
from activity.models.mentions import Mention
from activity.show.markdown import ALLOWED_TAGS, render_markdown

# Django's usernames are letters, digits and @ . + - _ (so "@ada@example.com" names the member
# ada@example.com); a mention ends before a trailing dot ("thanks @alice.") and is not the
# middle of an e-mail address (bob@example.com).
MENTION = re.compile(r"(?<![\w@.+-])@([\w.@+-]*[\w+-])")
SKIP = {"code", "pre", "a"}  # no mentions inside these
INBOX_MENTIONS = 50  # the most an inbox lists
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}


class _Walk(HTMLParser):
    """Re-emits sanitised HTML as it came, passing the text outside ``SKIP`` tags through
    ``text`` (which gets it unescaped and returns HTML)."""

    def __init__(self, text: Callable[[str], str]) -> None:
        super().__init__(convert_charrefs=True)
        self.text = text
        self.out: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.append(self.get_starttag_text() or "")
        self.skipping += tag in SKIP

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        self.out.append(f"</{tag}>")
        if tag in SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        self.out.append(escape(data, quote=False) if self.skipping else self.text(data))


def _walk(html: str, text: Callable[[str], str]) -> str:
    walk = _Walk(text)
    walk.feed(html)
    walk.close()
    return "".join(walk.out)


def mentioned_names(text: str) -> list[str]:
    """The ``@names`` a comment's Markdown mentions, in order, each once."""
    found: dict[str, str] = {}

    def collect(data: str) -> str:
        for match in MENTION.finditer(data):
            found.setdefault(match[1].casefold(), match[1])
        return ""

    _walk(render_markdown(text), collect)
    return list(found.values())


def render(text: str, names: Iterable[str]) -> SafeString:
    """A comment as safe HTML, each mention of one of ``names`` (members) highlighted."""
    members = {name.casefold() for name in names}

    def highlight(data: str) -> str:
        parts, last = [], 0
        for match in MENTION.finditer(data):
            if match[1].casefold() not in members:
                continue
            parts += [escape(data[last : match.start()], quote=False)]
            parts += [f'<span class="mention">@{escape(match[1])}</span>']
            last = match.end()
        return "".join(parts) + escape(data[last:], quote=False)

    html: str = render_markdown(text)
    if members:
        html = nh3.clean(
            _walk(html, highlight),
            tags=ALLOWED_TAGS | {"span"},
            attributes=ATTRIBUTES,
            allowed_classes={"span": {"mention"}},
            url_schemes={"http", "https", "mailto"},
            link_rel="noopener noreferrer nofollow",
        )
    return mark_safe(html)  # noqa: S308 - cleaned by nh3


def comment_html(comment: Comment) -> SafeString:
    """What the page shows of a comment: its Markdown, its members' mentions highlighted (the
    ``mentions`` are prefetched by ``reads.with_prompts``)."""
    return render(comment.text, [m.name for m in comment.mentions.all()])


def record(comment: Comment, workspace_id: Any) -> list[Mention]:
    """Keep the mentions of the run's workspace's members in a new comment; others are
    ignored. The author's own mention is kept as already seen: highlighted, never notified."""
    wanted = {name.casefold() for name in mentioned_names(comment.text)}
    if not wanted:
        return []
    members = Membership.objects.filter(workspace_id=workspace_id).values_list(
        "user_id", "user__username"
    )
    now = timezone.now()
    found = [
        Mention(
            comment=comment,
            user_id=user_id,
            name=username,
            created_at=now,
            seen_at=now if user_id == comment.author_id else None,
        )
        for user_id, username in members
        if username.casefold() in wanted
    ]
    return Mention.objects.bulk_create(found)


def _waiting(user: Any) -> models.QuerySet[Mention]:
    from activity.people import access

    return Mention.objects.filter(
        user_id=user.pk,
        seen_at__isnull=True,
        comment__tool__chat__in=access.visible_chats(user),
    )


def waiting(user: Any) -> models.QuerySet[Mention]:
    """The mentions waiting for this person (``waiting_count``'s), as a query to count along
    with others (review/queue.py ``waiting_counts``)."""
    return _waiting(user)


def member_names(workspace_id: Any) -> list[str]:
    """The usernames a comment in this workspace's runs may mention, for completion."""
    members = Membership.objects.filter(workspace_id=workspace_id)
    return sorted(members.values_list("user__username", flat=True), key=str.casefold)


def waiting_for(user: Any) -> list[Mention]:
    """The mentions a person has not opened or dismissed, newest first, in runs they still
    see (a member who left a workspace is not reminded of its runs)."""
    if not user.is_authenticated:
        return []
    waiting = (
        _waiting(user)
        .select_related("comment__author", "comment__tool__chat__workspace")
        .prefetch_related("comment__mentions")
    )
    return list(waiting.order_by("-created_at")[:INBOX_MENTIONS])


def newest(user: Any) -> Mention | None:
    """The mention that waits for this person that came last (``waiting_for``'s first)."""
    if not user.is_authenticated:
        return None
    waiting = _waiting(user).select_related("comment__author", "comment__tool__chat")
    return waiting.order_by("-created_at").first()


def waiting_count(user: Any) -> int:
    """How many mentions wait for this person (``waiting_for``'s, uncapped)."""
    return _waiting(user).count() if user.is_authenticated else 0


def own(mention_id: int, user: Any) -> Mention | None:
    """The person's own mention, in a run they still see; None otherwise."""
    from activity.people import access

    return (
        Mention.objects.filter(
            pk=mention_id, user_id=user.pk, comment__tool__chat__in=access.visible_chats(user)
        )
        .select_related("comment")
        .first()
    )


def mark_seen(mention_id: int, user: Any) -> Mention | None:
    """The person's own mention, marked as seen; None if it is not theirs or in a run they no
    longer see."""
    mention = own(mention_id, user)
    if mention is not None and mention.seen_at is None:
        mention.seen_at = timezone.now()
        mention.save(update_fields=["seen_at"])
    return mention


COMMENT_CHARS = 4000


def add_comment(row: ToolActivity, author: Any, text: str) -> ChatChange:
    """A member's comment on a call: shown under it, live; the members it mentions are told.

    What a person types is masked like what an agent sends (issue 22): a key pasted into a
    comment would otherwise be kept, pushed, exported and shown to every member. Masked before
    it is cut, so a cut never leaves the start of a secret too short to be recognised."""
    with chats.change(row.chat_id) as work:
        comment = Comment.objects.create(
            tool=row, author=author, text=bound(mask(text), COMMENT_CHARS) or ""
        )
        found = record(comment, work.chat.workspace_id)
        work.mentioned += [m.user_id for m in found if m.seen_at is None]
        work.touch(row, "version")
    return work.done
