"""WebSocket routes: the runner's socket (token auth) and the browsers' (session auth, Origin)."""

from __future__ import annotations

from django.urls import path

from activity.sockets.browsers import ViewerConsumer
from activity.sockets.consumers import AgentConsumer, HostConsumer
from activity.sockets.inbox import InboxConsumer, NeedsConsumer
from activity.sockets.shared import SharedConsumer
from activity.sockets.signin import SignedIn

websocket_urlpatterns = [
    # Runners send no Origin: they stay outside the Origin check and present a token instead.
    path("ws/agent/", AgentConsumer.as_asgi()),
    path("ws/host/", HostConsumer.as_asgi()),  # an agent host: a host token
    path(
        "ws/chats/<uuid:chat_id>/",
        SignedIn(ViewerConsumer.as_asgi()),
    ),
    path("ws/inbox/", SignedIn(InboxConsumer.as_asgi())),
    # A page open on a share link: no session, the link's token (activity/review/shares.py).
    path("ws/shared/<str:token>/", SharedConsumer.as_asgi()),
    # Every page: the header's count of prompts waiting, and the runs list's lines (needs.py).
    path("ws/needs/", SignedIn(NeedsConsumer.as_asgi())),
]
