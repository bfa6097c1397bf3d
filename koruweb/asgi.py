"""The ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koruweb.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: the routing pulls in models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from activity.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
