"""The database connection a request gets is one that works (team mode's PostgreSQL pool)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from tests.liveserver import database_url

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the pool is PostgreSQL's (make test's 2nd pass)"
)


def test_a_pooled_connection_the_database_ended_is_replaced_before_a_query_uses_it():
    """The pool as settings.py configures it (Django hands OPTIONS["pool"] to psycopg_pool):
    a connection the server ended while it sat in the pool — a restart, terminated sessions —
    is not the one a request gets (it would answer "terminating connection": a 500)."""
    options = connection.settings_dict["OPTIONS"]["pool"]
    with ConnectionPool(database_url(), open=True, **options) as pool:
        with pool.connection() as used:
            backend = used.info.backend_pid
        with psycopg.connect(database_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [backend])
        with pool.connection() as given:
            assert given.execute("SELECT 1").fetchone() == (1,)
            assert given.info.backend_pid != backend
