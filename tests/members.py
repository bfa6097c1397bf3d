"""The people every test talks about, and their workspace (a pytest plugin of ``conftest.py``).

- ``acme``: the workspace they work in (slug ``acme``, name "Acme").
- ``acme_admin`` (carol): admin of Acme: manages its members, tokens and runs.
- ``acme_approver`` (alice): approver of Acme: answers the agents' prompts.
- ``acme_viewer`` (bob): viewer of Acme: watches, may answer nothing.
- ``outsider`` (charlie): admin of another workspace, ``globex``, and of nothing in Acme.

``as_admin``, ``as_approver``, ``as_viewer`` and ``as_outsider`` are Django test clients logged
in as each. Each person is made only when a test asks for them. Tests need the database (their
``django_db`` mark). (``workspace`` and ``approver`` are the real agents' fixtures, in
``tests/agents/real/fixtures.py``: hence ``acme`` and ``acme_approver``.)
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from activity.models import Membership, Role, Workspace


def member(workspace: Workspace, name: str, role: Role) -> User:
    """A new user, ``name``, with ``role`` in ``workspace``."""
    user = User.objects.create_user(name)  # no password: tests log in with force_login
    Membership.objects.create(workspace=workspace, user=user, role=role)
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def acme() -> Workspace:
    """The workspace the people work in (slug ``acme``, name "Acme")."""
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex() -> Workspace:
    """Another workspace: the outsider's."""
    return Workspace.objects.create(slug="globex", name="Globex")


@pytest.fixture
def acme_admin(acme: Workspace) -> User:
    """carol, admin of Acme: manages its members, tokens and runs."""
    return member(acme, "carol", Role.ADMIN)


@pytest.fixture
def acme_approver(acme: Workspace) -> User:
    """alice, approver of Acme: answers the agents' prompts."""
    return member(acme, "alice", Role.APPROVER)


@pytest.fixture
def acme_viewer(acme: Workspace) -> User:
    """bob, viewer of Acme: watches, may answer nothing."""
    return member(acme, "bob", Role.VIEWER)


@pytest.fixture
def outsider(globex: Workspace) -> User:
    """charlie, admin of Globex and of nothing in Acme."""
    return member(globex, "charlie", Role.ADMIN)


@pytest.fixture
def as_admin(acme_admin: User) -> Client:
    """A test client logged in as the admin, carol."""
    return logged_in(acme_admin)


@pytest.fixture
def as_approver(acme_approver: User) -> Client:
    """A test client logged in as the approver, alice."""
    return logged_in(acme_approver)


@pytest.fixture
def as_viewer(acme_viewer: User) -> Client:
    """A test client logged in as the viewer, bob."""
    return logged_in(acme_viewer)


@pytest.fixture
def as_outsider(outsider: User) -> Client:
    """A test client logged in as the outsider, charlie."""
    return logged_in(outsider)
