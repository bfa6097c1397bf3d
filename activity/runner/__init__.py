"""The runner: the program people run next to their agents (``koruweb agent``, ``koruweb host``;
``manage.py agent`` is an alias). It spawns an ACP agent, numbers what it says into an outbox,
and streams it to the server over one WebSocket; ``demo_agent`` is the demo's agent.

May import: ``activity.wire`` and ``activity.core``. No Django: it installs without the server
(docs/architecture.md#parts-and-their-import-rules).
"""
