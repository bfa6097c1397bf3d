"""The ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koruweb.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: the routing pulls in models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from activity.sockets.origins import OriginValidator  # noqa: E402
from activity.sockets.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Every socket but the runner's and the host's must come from the page's own exact
        # origin (docs/gotchas.md#the-origin-check-ignores-scheme-and-port).
        "websocket": OriginValidator(URLRouter(websocket_urlpatterns)),
    }
)

# What start-up made (Django, the app registry, the partials every push renders) lives as long
# as the process. Frozen, it is never walked again by a full collection, which otherwise paused
# the server ~65 ms every few seconds under load (bench/README.md).
from django.template.loader import get_template  # noqa: E402

get_template("activity/pushed/parts.html")
gc.collect()
gc.freeze()
