"""The server's expected faults, and how they are logged.

A PostgreSQL session ended under a process, a database that is restarting, a Redis client
killed or a Redis restarting: koruweb expects these, and recovers from each (a runner resends
what was not acknowledged, a page catches up on its next push or heartbeat, docs/deploy.md). So
they are logged as one line at WARNING, saying what was being done and what failed. Anything
else is a bug and keeps its traceback at ERROR.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from redis.exceptions import RedisError

# The database away (its session ended, the server restarting), Redis away, a socket refused.
EXPECTED = (OperationalError, InterfaceError, RedisError, OSError)


def report(log: logging.Logger, doing: str, *args: object) -> None:
    """Log the exception being handled: one line at WARNING when it is an ``EXPECTED`` fault
    (``doing`` and what failed), its traceback at ERROR otherwise. Call it in an ``except``."""
    fault = sys.exc_info()[1]
    if isinstance(fault, EXPECTED):
        first = str(fault).strip().splitlines()[0] if str(fault).strip() else ""
        log.warning(f"{doing}: %s: %s", *args, type(fault).__name__, first)
    else:
        log.exception(doing, *args)
