"""The WebSocket side: ``consumers`` (thin relays: the runner's and the host's sockets),
``browsers`` (a chat page's socket), ``shared`` (a share link's page), ``inbox`` (the sockets
that tell a person what waits for them), ``pipeline`` (a runner's session: hello, batches,
heartbeat), ``watchdog`` (ends turns of runners gone too long), ``revoke`` (sockets closed the
moment access goes), ``floods`` (what one person or token may open, and how fast), ``beats``
(one heartbeat per process renews every open socket), ``signin`` (who a browser's socket
belongs to), ``origins`` and ``routing``.

May import: every part but ``activity.web``.
"""
