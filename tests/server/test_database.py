"""The database connection a request gets is one that works (team mode's PostgreSQL pool)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, connections
from psycopg_pool import ConnectionPool

from koruweb import dbpool
from tests.liveserver import database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the pool is PostgreSQL's (make test's 2nd pass)"
    ),
]
NAME = "koruweb-pool-test"


def end_every_session() -> None:
    """As a database restart does (to the pool's sessions only: the test's own live on)."""
    with psycopg.connect(database_url(), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [NAME],
        )


def test_pooled_connections_the_database_ended_are_all_replaced_when_the_first_is_found_dead(
    monkeypatch,
):
    """The pool as settings.py configures it (Django hands OPTIONS["pool"] to psycopg_pool): a
    request never gets a connection the server ended while it sat in the pool, and finding
    one replaces all that died with it — not one per retry, each retry waiting twice as long."""
    options = {**connection.settings_dict["OPTIONS"]["pool"], "min_size": 3}
    assert options["check"] is dbpool.check
    found_dead: list[object] = []

    def check(conn: object) -> None:  # settings' check, counting the dead it hands to a retry
        try:
            dbpool.check(conn)
        except Exception:
            found_dead.append(conn)
            raise

    options["check"] = check
    with ConnectionPool(
        database_url(), kwargs={"application_name": NAME}, open=True, **options
    ) as pool:
        pool.wait()
        monkeypatch.setattr(type(connections["default"]), "pool", property(lambda self: pool))
        held = [pool.getconn() for _ in range(3)]
        before = {conn.info.backend_pid for conn in held}
        for conn in held:
            pool.putconn(conn)
        end_every_session()
        with pool.connection() as given:
            assert given.execute("SELECT 1").fetchone() == (1,)
            assert given.info.backend_pid not in before
        assert len(found_dead) == 1  # the two others were replaced with it, at once
