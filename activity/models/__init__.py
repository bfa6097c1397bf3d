"""koruweb's durable records, one module per kind, every model re-exported here.

``chats`` (workspaces, chats, turns, replies), ``calls`` (ToolActivity rows, prompts, comments),
``accounts`` (memberships, agent tokens, hosts and their runs), ``invites``, ``mentions``,
``webprompts`` (a person's messages to a run), ``views`` (saved filters, run reviews,
who is asked to give them),
``shares`` (read-only links to a run), ``mail`` (addresses and mails), ``hooks``
(workspace webhooks) and ``devices``
(browsers that get notifications, and what is owed to each). The app label stays ``activity``
and the tables keep their names, so moving a model between these modules needs no migration.

May import: Django, ``activity.core`` (the contract's enums and bounds). Nothing above it.
"""

from __future__ import annotations

from activity.models.accounts import (
    AgentHost,
    AgentToken,
    HostRun,
    HostRunStatus,
    Membership,
    Role,
    TokenKind,
)
from activity.models.calls import Comment, Prompt, PromptKind, ToolActivity
from activity.models.chats import Chat, InferenceAttempt, Message, TurnDiff, Workspace
from activity.models.devices import Follow, Notice, NotifyPrefs, PushDevice
from activity.models.hooks import Delivery, HookEvent, HookFormat, Webhook
from activity.models.invites import Invite, InviteState
from activity.models.mail import EmailAddress, Mail, MailPrefs
from activity.models.mentions import Mention
from activity.models.shares import ShareLink
from activity.models.views import (
    ReviewAssignment,
    ReviewOutcome,
    RunReview,
    SavedView,
    ViewKind,
)
from activity.models.webprompts import WebPrompt, WebPromptStatus

__all__ = [
    "Webhook",
    "MailPrefs",
    "Mail",
    "HookFormat",
    "HookEvent",
    "EmailAddress",
    "Delivery",
    "AgentHost",
    "AgentToken",
    "Chat",
    "Comment",
    "Follow",
    "HostRun",
    "HostRunStatus",
    "InferenceAttempt",
    "Invite",
    "InviteState",
    "Membership",
    "Mention",
    "Message",
    "Notice",
    "NotifyPrefs",
    "Prompt",
    "PushDevice",
    "PromptKind",
    "ReviewAssignment",
    "ReviewOutcome",
    "Role",
    "RunReview",
    "SavedView",
    "ShareLink",
    "TokenKind",
    "ToolActivity",
    "TurnDiff",
    "ViewKind",
    "WebPrompt",
    "WebPromptStatus",
    "Workspace",
]
