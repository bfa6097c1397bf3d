"""The check of a pooled PostgreSQL connection before a request gets it
(docs/gotchas.md#pooled-postgresql-connections-can-be-dead).

psycopg_pool's own check replaces a dead connection, then waits before it takes the next one
from the pool — 1 s, 2 s, 4 s… — so after a database restart, a pool holding k dead connections
made the next request wait 2^k − 1 s (a 500 at the pool's timeout with 6). The connections idle
beside a dead one died with it: this check, on the first dead one, makes the pool check them
all at once (``ConnectionPool.check`` replaces the dead ones), so the one retry finds a live one.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from psycopg_pool import ConnectionPool


def check(conn: Any) -> None:
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        pool = getattr(connections[DEFAULT_DB_ALIAS], "pool", None)
        if isinstance(pool, ConnectionPool):
            pool.check()
        raise
