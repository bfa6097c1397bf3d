"""A new user's first minutes, as README.md tells them: the demo, a token, the runner's link.

The README's ``create_agent_token`` line, run as written after ``make run``'s set-up, makes a
token whose runs the demo login sees at the address the runner prints; anyone else gets a plain
"Not found, or not yours" page (never Django's debug page, DEBUG on or off); ``make run`` keeps
one demo token however often it runs.
"""

from __future__ import annotations

import re
import shlex
import stat
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from activity.management.commands.demo_setup import token_file
from activity.models import AgentToken, Membership, Role, Workspace
from activity.runner.options import page_url
from tests import frames
from tests.factories import run
from tests.liveserver import BASE_DIR
from tests.members import logged_in

pytestmark = pytest.mark.django_db
README = BASE_DIR / "README.md"
NOT_FOUND = "Not found, or not yours"
DEBUG_PAGE_SIGNS = ("Using the URLconf", "DEBUG = True", "technical_404", "Raised by:")


@pytest.fixture(autouse=True)
def private_var(settings, tmp_path: Path) -> Path:
    """Where the demo token is kept: this test's own, never the developer's var/."""
    var = tmp_path / "var"
    settings.VAR_DIR = var
    return var


def readme_commands(name: str) -> list[list[str]]:
    """Every ``manage.py <name>`` (or ``koruweb <name>``) line of README.md's ``sh`` blocks, as
    words after it."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    found = []
    for line in lines:
        words = shlex.split(line.split("#")[0])
        if words[:3] == [".venv/bin/python", "manage.py", name]:
            found.append(words[3:])
        elif words[:2] == ["koruweb", name]:
            found.append(words[2:])
    return found


def demo_login() -> User:
    call_command("demo_setup", stdout=open("/dev/null", "w"))  # noqa: SIM115
    return User.objects.get(username="demo")


def titled(workspace: Workspace, title: str) -> uuid.UUID:
    return run(workspace, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title=title)).pk


# --- the README's example --------------------------------------------------------------------


def test_the_readmes_token_example_makes_runs_the_demo_login_sees_at_the_printed_address(capsys):
    demo = demo_login()
    capsys.readouterr()
    [words] = readme_commands("create_agent_token")
    call_command("create_agent_token", *words)
    token = capsys.readouterr().out.strip()
    found = AgentToken.find(token)
    assert found is not None
    chat_id = titled(found.workspace, "My first run")
    runner = [w for w in readme_commands("agent") if "--token" in w and "host" not in w][0]
    server = runner[runner.index("--server") + 1]
    address = page_url(server, chat_id)
    assert address.startswith("http://127.0.0.1:8000/chats/")
    response = logged_in(demo).get(address.removeprefix("http://127.0.0.1:8000"))
    assert response.status_code == 200
    assert "My first run" in response.content.decode()


def test_the_token_pages_command_line_is_the_one_the_readme_uses(as_admin, acme):
    readme = [w for w in readme_commands("agent") if "--token" in w and "host" not in w][0]
    assert readme[:2] == ["--server", "ws://127.0.0.1:8000"]
    html = as_admin.post("/workspaces/acme/tokens/create", {"name": "laptop"}).content.decode()
    plain = re.search(r'id="plain-token">(koru_[\w-]+)<', html)
    assert plain is not None
    command = f"koruweb agent --server ws://testserver --token {plain[1]} -- AGENT"
    assert f'<pre class="copy" id="token-command">{command}</pre>' in html


def test_a_token_for_a_new_workspace_can_make_its_admin_or_says_nobody_sees_its_runs(capsys):
    alice = User.objects.create_user("alice")
    call_command("create_agent_token", "Team Rocket", name="ci")
    assert "Nobody is a member of team-rocket" in capsys.readouterr().err
    call_command("create_agent_token", "Jet", name="ci", admin="alice")
    err = capsys.readouterr().err
    assert "alice is an admin of jet" in err and "Nobody" not in err
    assert Membership.objects.get(user=alice, workspace__slug="jet").role == Role.ADMIN
    with pytest.raises(Exception, match="no user named 'nobody'"):
        call_command("create_agent_token", "Jet", name="ci", admin="nobody")


# --- not found, or not yours -----------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False], ids=["debug-on", "debug-off"])
def test_a_run_opens_for_every_member_and_is_plainly_not_found_for_anyone_else(
    settings, debug, acme, acme_admin, acme_approver, acme_viewer, outsider
):
    settings.DEBUG = debug
    chat_id = titled(acme, "Acme's secret run")
    for person in (acme_admin, acme_approver, acme_viewer):
        assert logged_in(person).get(f"/chats/{chat_id}/").status_code == 200
    stranger = logged_in(outsider)
    for path in (f"/chats/{chat_id}/", f"/chats/{uuid.uuid4()}/", "/no/such/page/"):
        response = stranger.get(path)
        html = response.content.decode()
        assert response.status_code == 404, path
        assert NOT_FOUND in html and "Acme's secret run" not in html
        assert not [sign for sign in DEBUG_PAGE_SIGNS if sign in html], path
        assert "invite you" in html and 'href="/workspaces/"' in html  # what to do next


def test_not_found_for_htmx_is_one_line_not_a_whole_page(settings, acme, outsider):
    settings.DEBUG = True
    chat_id = titled(acme, "Acme's secret run")
    response = logged_in(outsider).post(
        f"/chats/{chat_id}/messages", {"text": "hi"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 404
    assert response.content.decode() == f'<span class="refused">{NOT_FOUND}.</span>'


def test_an_address_missing_its_slash_is_still_redirected_before_any_not_found(settings, as_viewer):
    settings.DEBUG = True
    response = as_viewer.get("/inbox")
    assert response.status_code == 301 and response["Location"] == "/inbox/"


# --- one demo token --------------------------------------------------------------------------


def test_make_run_reuses_one_private_demo_token_while_it_works(capsys):
    call_command("demo_setup")
    first = capsys.readouterr().out.strip()
    call_command("demo_setup")
    assert capsys.readouterr().out.strip() == first
    demo = Workspace.objects.get(slug="demo")
    assert AgentToken.objects.active().filter(workspace=demo).count() == 1
    kept = token_file()
    assert kept.read_text().strip() == first
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_revoked_demo_token_is_replaced_and_never_comes_back(capsys):
    call_command("demo_setup")
    first = capsys.readouterr().out.strip()
    found = AgentToken.find(first)
    assert found is not None
    found.revoked_at = found.created_at
    found.save()
    call_command("demo_setup")
    second = capsys.readouterr().out.strip()
    assert second != first and AgentToken.find(first) is None and AgentToken.find(second)
    assert AgentToken.objects.active().filter(workspace__slug="demo").count() == 1


def test_a_lost_demo_token_file_leaves_one_active_demo_token(capsys):
    call_command("demo_setup")
    first = capsys.readouterr().out.strip()
    token_file().unlink()
    call_command("demo_setup")
    second = capsys.readouterr().out.strip()
    assert AgentToken.find(first) is None and AgentToken.find(second) is not None
    assert AgentToken.objects.active().filter(workspace__slug="demo").count() == 1
