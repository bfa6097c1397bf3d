"""The HTTP side: views, one module per family of pages (``views`` for the runs list, a chat and
the inbox; ``drive``, ``hosts``, ``invites``, ``mentions``, ``output``, ``review``, ``search``,
``workspaces``), ``urls``, ``notfound`` (one "not found" for everything a person may not see)
and ``requests`` (the request type views get). Views are short: they check, call a part, and
announce what they committed.

May import: every part but ``activity.sockets``.
"""
