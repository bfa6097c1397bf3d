"""The live path: the one way to change a chat (``chats.change`` with its ``work.Work``) and
everything that changes one. ``boundary`` turns a frame's text into a storable value, ``ingest``
applies a batch of frames (``calls``, ``turns``, ``notes``, ``usage``); ``drive`` (a person's
messages, cancels and modes), ``answers`` (answers to prompts), ``presence`` (whether the runner
is there) and the agent hosts (``hosts``: a host's socket session; ``host_asks``: what the web
asks of one; ``run_tokens``: a started run's token, revoked when it ends) change chats from the
web's side; ``faults`` says which failures are expected. A writer returns its ``ChatChange`` and
never pushes: the caller announces it (``activity.push.broadcast``).

May import: ``activity.models``, ``activity.core``, ``activity.wire``.
"""
