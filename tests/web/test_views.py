"""Pages: the runs list and a chat, for members only, with agent text made safe."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from activity.models import AgentToken, Prompt
from activity.push import pushes
from activity.templatetags.koruweb import isolate, unbidi
from tests import frames
from tests.factories import run

pytestmark = pytest.mark.django_db


def test_the_runs_list_asks_for_a_login(client):
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_runs_list_shows_a_members_runs_newest_first_and_hides_others(as_viewer, acme, globex):
    older = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Older run"))
    newer = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Newer run"))
    run(globex, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Secret run"))
    html = as_viewer.get("/").content.decode()
    assert html.index(str(newer.pk)) < html.index(str(older.pk))
    assert "Secret run" not in html
    assert "running" in html and "live" in html


def test_a_chat_page_shows_the_reply_safely_and_the_rows_in_order(as_viewer, acme):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, attempt, reply, prompt="Please <b>fix</b> it"),
        frames.say(2, "**Done** <script>alert('x')</script>"),
        frames.tool_call(3, "c1", "Read README.md", kind="read", status="completed"),
        frames.tool_call(
            4,
            "c2",
            "Edit a.py",
            kind="edit",
            content=[{"type": "diff", "path": "/w/a.py", "oldText": "a\n", "newText": "b\n"}],
        ),
    )
    html = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    assert "<strong>Done</strong>" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "Please &lt;b&gt;fix&lt;/b&gt; it" in html
    assert html.index("Read README.md") < html.index("Edit a.py")
    assert '<td class="mk">\N{MINUS SIGN}</td><td class="code"><span class="n">a</span>' in html
    assert '<td class="mk">+</td><td class="code"><span class="n">b</span>' in html
    assert f'data-version="{chat.version}"' in html


def test_a_chat_is_not_found_for_someone_outside_its_workspace(as_outsider, acme):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    assert as_outsider.get(f"/chats/{chat.pk}/").status_code == 404


def test_a_superuser_sees_every_chat(client, acme):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    client.force_login(User.objects.create_superuser("root", password=None))
    assert client.get(f"/chats/{chat.pk}/").status_code == 200


def test_pages_carry_a_strict_content_security_policy(as_viewer, acme):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    policy = as_viewer.get(f"/chats/{chat.pk}/")["Content-Security-Policy"]
    assert "script-src 'self' 'nonce-" in policy and "unsafe-inline" not in policy


def test_create_agent_token_makes_the_workspace_and_prints_a_token_that_works(capsys):
    call_command("create_agent_token", "Team Rocket", name="ci")
    token = capsys.readouterr().out.strip()
    found = AgentToken.find(token)
    assert found is not None and found.workspace.slug == "team-rocket"
    assert token not in {found.digest, found.hint}  # only a hash is kept


def test_a_pushed_prompt_form_has_no_token_but_a_link_to_a_page_of_its_own_with_one(
    acme, as_approver
):
    chat = run(
        acme,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.permission(2, 7, "c1", "Delete build/"),
    )
    prompt = Prompt.objects.get(chat=chat)
    pushed, _ = pushes.render_changes(chat.pk, 0)
    assert "csrfmiddlewaretoken" not in pushed
    assert f'href="/prompts/{prompt.pk}/answer"' in pushed
    own_page = as_approver.get(f"/prompts/{prompt.pk}/answer").content.decode()
    assert 'name="csrfmiddlewaretoken"' in own_page and "Delete build/" in own_page


# --- right-to-left tricks: text shown as written ------------------------------------------

RLO = "\N{RIGHT-TO-LEFT OVERRIDE}"
PDI = "\N{POP DIRECTIONAL ISOLATE}"
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def tab_title(html: str) -> str:
    found = re.search(r"<title>(.*?)</title>", html, re.S)
    assert found is not None
    return found[1]


def test_a_title_that_overrides_its_direction_is_isolated_on_the_runs_list_and_its_page(
    as_viewer, acme
):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title=f"{RLO}gnp.exe"))
    runs = as_viewer.get("/").content.decode()
    assert f'<a href="/chats/{chat.pk}/"><bdi>gnp.exe</bdi></a>' in runs
    assert "<bdi>Acme</bdi>" in runs  # the workspace's name too
    page = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    assert "<h1><bdi>gnp.exe</bdi></h1>" in page
    assert tab_title(page) == "gnp.exe · koruweb"  # no markup there: the control is left out
    turn = as_viewer.get(f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/").content.decode()
    assert "<bdi>gnp.exe</bdi></a>" in turn and not BIDI_CONTROLS & set(tab_title(turn))
    assert RLO not in runs + page + turn


def test_a_pushed_call_label_and_prompt_are_isolated_as_on_the_page(as_viewer, acme):
    chat = run(
        acme,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), prompt=f"Open {RLO}fdp.txt"),
        frames.tool_call(2, "c1", f"Read {RLO}txt.exe", kind="read", status="completed"),
    )
    pushed, _ = pushes.render_changes(chat.pk, 0)
    page = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    for html in (pushed, page):
        assert "<bdi>Read txt.exe</bdi></summary>" in html
        assert "<bdi>Open fdp.txt</bdi></div>" in html


def test_isolated_text_keeps_everything_but_the_direction_controls_and_is_escaped():
    tricks = f"{PDI}{RLO}gnp.exe a \N{RIGHT-TO-LEFT ISOLATE}b{PDI} c{PDI}"
    assert isolate(tricks) == "<bdi>gnp.exe a b c</bdi>"
    assert isolate("שלום") == "<bdi>שלום</bdi>"  # right-to-left words keep their own direction
    assert isolate("<b>&") == "<bdi>&lt;b&gt;&amp;</bdi>"  # still escaped


def test_text_for_a_tab_title_keeps_everything_but_the_direction_controls():
    text = "".join(sorted(BIDI_CONTROLS)) + "שלום <run>"
    assert unbidi(text) == "שלום <run>"
