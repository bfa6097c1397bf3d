"""The runner's tests: the runner is the program people install on their laptops, without Django's
database (or Django at all: ``koruweb agent``). A test here that asks for the database fails."""

from __future__ import annotations

import pytest

DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


@pytest.fixture(autouse=True)
def _no_database(request: pytest.FixtureRequest) -> None:
    asked = DATABASE_FIXTURES & set(request.fixturenames)
    if asked or request.node.get_closest_marker("django_db"):
        pytest.fail(
            f"the runner has no database: {request.node.nodeid} asks for {asked or 'django_db'}"
        )
