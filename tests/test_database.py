"""The database connection a request gets is one that works (team mode's PostgreSQL pool)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from activity.models import Workspace
from tests.liveserver import database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the pool is PostgreSQL's (make test's 2nd pass)"
    ),
]


def test_a_pooled_connection_the_database_ended_is_replaced_before_a_query_uses_it():
    Workspace.objects.create(slug="acme", name="Acme")
    connection.ensure_connection()
    backend = connection.connection.info.backend_pid
    connection.close()  # back to the pool, where the database's restart finds it
    with psycopg.connect(database_url(), autocommit=True) as admin:  # ends every other session
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert Workspace.objects.get().slug == "acme"  # not "terminating connection": a 500
    assert connection.connection.info.backend_pid != backend
