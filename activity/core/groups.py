"""Every channel-layer group koruweb uses, with what its members are and what they receive."""

from __future__ import annotations

import uuid

# Superusers' inbox sockets: told of every workspace's prompts.
INBOX_ALL = "inbox-all"


def chat(chat_id: uuid.UUID | str) -> str:
    """The rooms of a chat's viewers, one per server process (``broadcast.Room``); each
    receives ``{"type": "chat.push", "text": <push JSON>}``."""
    return f"chat-{chat_id}"


def runner(chat_id: uuid.UUID | str) -> str:
    """The socket of the runner that owns a chat — only the one whose hello carried the chat's
    secret, and only its latest (``pipeline.RunnerSession.take_answers``); receives
    ``{"type": "runner.answer", "text": <answer frame>}``."""
    return f"runner-{chat_id}"


def token(token_id: int) -> str:
    """The sockets of the runners that use one agent token; told ``token.revoked``."""
    return f"token-{token_id}"


def inbox(workspace_id: uuid.UUID | str) -> str:
    """The inbox sockets of the people who may answer in a workspace, and their pages' needs
    sockets (the header's count, ``needs.py``); told ``inbox.changed`` when a prompt there
    opens, is answered or closes, with ``"needs"``: the workspace's count, rendered once."""
    return f"inbox-{workspace_id}"


def person(user_id: int) -> str:
    """The needs sockets of one person's pages; told ``mentions.changed`` with ``"text"``:
    ``{"mentions": n, "reviews": m, "said": words or absent}`` when a comment mentions them or
    they open or dismiss a mention, or a run's review is assigned to them, opened or given
    (``needs.tell_mentions``)."""
    return f"person-{user_id}"


def session(digest: str) -> str:
    """Every browser socket (chat page, inbox, needs) opened with one login session, named by a
    digest of its key (``revoke.digest``), never the key itself; told ``session.ended`` when the
    session logs out: they close (``revoke.py``)."""
    return f"session-{digest}"


def access(user_id: int) -> str:
    """Every browser socket of one person; told ``access.changed`` — ``{"workspace", "name",
    "removed"}`` — when one of their memberships is made, changed or removed: each checks its
    access again, once (``revoke.py``)."""
    return f"access-{user_id}"


def viewers(chat_id: uuid.UUID | str) -> str:
    """The chat page sockets of one chat themselves (its pushes go to their rooms, ``chat``);
    told ``chat.deleted`` when the chat is deleted: they close (``revoke.py``)."""
    return f"viewers-{chat_id}"


# Superusers' runs-list sockets: told of every workspace's runs.
RUNS_ALL = "runs-all"


def runs(workspace_id: uuid.UUID | str) -> str:
    """The runs-list sockets of a workspace's members (any role); receive ``{"type":
    "runs.changed", "text": <JSON>}`` with a run's line, rendered once (``needs.py``)."""
    return f"runs-{workspace_id}"


def share(link_id: int) -> str:
    """The sockets of the pages open on one share link (``sockets/shared.py``); told
    ``share.ended`` — ``{"why": words}`` — when the link is revoked: they close."""
    return f"share-{link_id}"
