"""Secrets an agent prints are masked before koruweb stores, indexes or pushes them
(activity/secrets.py, applied at the boundary): each known shape, in each field an agent
controls, never reaches the database, the search, the export or the page."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import connection

from activity import boundary, search
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import Chat
from activity.secrets import mask, mask_junction
from tests import factories, frames

# Fake secrets, built in pieces so no scanner takes this file for a leak. Each: its shape, the
# text as an agent prints it, and the part of it that must never be stored.
AWS_ID = "AKIA" + "Q3XAMPLE7KOR4WBZ"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "zEXAMPLEKY"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2" + "hV1oKkq5xT9rZp0nLk8w"
SECRETS: list[tuple[str, str, str]] = [
    ("aws access key id", f"aws {AWS_ID} ok", AWS_ID[4:]),
    ("aws secret key next to its id", f"{AWS_ID} {AWS_SECRET}", AWS_SECRET),
    ("openai key", "sk-" + "Tz4kQ9mW2xR7vL1nB8cD5fG3hJ6", "Tz4kQ9mW2xR7vL1nB8cD5fG3hJ6"),
    ("openai project key", "sk-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8", "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8"),
    (
        "anthropic key",
        "sk-ant-api03-" + "Pq2Wm8Xz4Ks7Jd1Lv6Nb3Hc9T-AA",
        "Pq2Wm8Xz4Ks7Jd1Lv6Nb3Hc9T",
    ),
    (
        "google key",
        "AIza" + "SyD4f8Hj2Kl6Mn0Pq3Rs7Tu1Vw5Xy9Zb2C",
        "SyD4f8Hj2Kl6Mn0Pq3Rs7Tu1Vw5Xy9Zb2C",
    ),
    (
        "github token",
        "ghp_" + "R8t2Y6u0I4o9P3a7S1d5F8g2H6j0K4l8Z3x7",
        "R8t2Y6u0I4o9P3a7S1d5F8g2H6j0K4l8Z3x7",
    ),
    (
        "github fine-grained token",
        "github_pat_" + "11ABQ7Z3Y0aB4cD8eF2gH6_iJ0kL4mN8oP",
        "11ABQ7Z3Y0aB4cD8eF2gH6",
    ),
    ("slack token", "xoxb-" + "2739184650-Vb7Nm3Qw9Er5Ty", "2739184650-Vb7Nm3Qw9Er5Ty"),
    ("stripe key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "koruweb token",
        "koru_" + "Jx3_kP9-vQ2mW7zR5tY1uN8bC4dF6gH0jL",
        "Jx3_kP9-vQ2mW7zR5tY1uN8bC4dF6gH0jL",
    ),
    (
        "json web token",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJrb3J1d2ViLXRlc3QifQ." + "Xq9Lm2Vb7Nc4Zt8Kp3Wd6Rg1",
        "Xq9Lm2Vb7Nc4Zt8Kp3Wd6Rg1",
    ),
    ("bearer header", "Authorization: Bearer " + "q8Zt3Lr9Xw2Kp7Vn5Hm", "q8Zt3Lr9Xw2Kp7Vn5Hm"),
    (
        "pem private key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\nAbCd==\n-----END RSA PRIVATE KEY-----",
        PEM_BODY,
    ),
    ("env KEY=value line", "OPENAI_API_KEY=" + "hunter2-v3ry-s3cret", "hunter2-v3ry-s3cret"),
    (
        "export KEY=value line",
        "export DB_PASSWORD=" + "Corr3ct-H0rse-B4ttery",
        "Corr3ct-H0rse-B4ttery",
    ),
]
IDS = [name for name, _, _ in SECRETS]


@pytest.mark.parametrize(("name", "text", "hidden"), SECRETS, ids=IDS)
def test_each_secret_shape_is_masked_to_the_same_byte_size(name, text, hidden):
    masked = mask(f"before\n{text}\nafter")
    assert hidden not in masked
    assert len(masked.encode()) == len(f"before\n{text}\nafter".encode())
    assert masked.startswith("before\n") and masked.endswith("\nafter")


def test_a_mask_keeps_a_recognisable_prefix():
    assert mask("sk-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8") == "sk-proj-" + "*" * 24
    assert mask("export GITHUB_TOKEN=abc123") == "export GITHUB_TOKEN=******"
    assert mask(AWS_ID) == "AKIA" + "*" * 16


def test_a_non_ascii_secret_is_masked_byte_for_byte():
    assert mask("PASSWORD=pässwörd") == "PASSWORD=" + "*" * len("pässwörd".encode())


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b on main",
        "the run 8a1f3c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b ended",
        "![chart](iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk.png)",
        "KEY_COUNT=3\nMONKEY=1\nPATH=/usr/bin\nif token == expected:",
        "a Bearer authentication scheme; the sk-learn docs; ask-me-anything",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----",
    ],
    ids=["git sha", "uuid", "base64 image name", "ordinary assignments", "prose", "public key"],
)
def test_ordinary_text_is_left_as_it_is(text):
    assert mask(text) == text


def test_a_private_key_cut_before_its_end_is_masked_to_its_last_line():
    cut = mask(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\nAbCd\nThen the agent went on.")
    assert PEM_BODY not in cut and "AbCd" not in cut and cut.endswith("\nThen the agent went on.")


@pytest.mark.parametrize(("name", "text", "hidden"), SECRETS, ids=IDS)
def test_a_secret_split_anywhere_between_two_chunks_is_masked(name, text, hidden):
    for cut in range(1, len(text)):
        stored, new = mask_junction(mask("says " + text[:cut]), mask(text[cut:] + " ok"))
        assert hidden not in stored + new, cut
        assert len((stored + new).encode()) == len(f"says {text} ok".encode())


def test_a_chunk_after_a_masked_secret_keeps_its_own_text():
    stored, new = mask_junction(mask("key sk-" + "Tz4kQ9mW2xR7vL1nB8cD5fG3hJ6"), " and then more")
    assert new == " and then more" and stored.startswith("key sk-***")


# --- through ingest: every field an agent controls ----------------------------------------


def send(chat_id: uuid.UUID, *raw: dict[str, Any]) -> None:
    """Frames as the pipeline applies them: their text through the boundary, then ingest."""
    ingest(chat_id, [runner_frame.validate_python(boundary.load(json.dumps(r))) for r in raw])


def everywhere(chat_id: uuid.UUID, secret: str) -> None:
    """``secret`` in the prompt, the four agent_* fields and titles, the reply, thoughts, a
    plan, a permission request and a question."""
    text = f"first\n{secret}\nlast"
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    send(
        chat_id,
        frames.turn_started(1, attempt, reply, prompt=text, title=text),
        frames.say(2, text),
        frames.update(
            3,
            {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}},
        ),
        frames.update(4, {"sessionUpdate": "plan", "entries": [entry(text)]}),
        frames.tool_call(
            5,
            "c1",
            text,
            kind="execute",
            rawInput={"command": text, "env": {"TOKEN": secret}},
            content=[{"type": "content", "content": {"type": "text", "text": text}}],
        ),
        frames.tool_call(6, "c2", "Read .env", rawOutput={"stdout": text}),
        frames.permission(7, 1, "c3", text),
        frames.elicitation(8, 2, frames.CLAUDE_QUESTION, message=text),
        frames.update(9, {"sessionUpdate": "session_info_update", "title": text}),
    )


def entry(text: str) -> dict[str, str]:
    return {"content": text, "priority": "high", "status": "pending"}


def database_text() -> str:
    """Every row of every table, search indexes included, as text."""
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from the schema
            dump.append(repr(cursor.fetchall()))
    return "\n".join(dump)


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "text", "hidden"), SECRETS, ids=IDS)
def test_a_secret_in_any_field_reaches_no_store_search_export_or_page(
    name, text, hidden, acme, acme_approver, as_approver
):
    chat = factories.run(acme)
    everywhere(chat.pk, text)
    assert Chat.objects.get(pk=chat.pk).current_attempt is not None
    assert "first" in database_text()  # the fields were stored…
    assert hidden not in database_text()  # … without the secret
    assert search.search(acme_approver, hidden) == []
    export = b"".join(as_approver.get(f"/api/chats/{chat.pk}/tool-activity").streaming_content)
    assert b"first" in export and hidden.encode() not in export
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert "first" in page and hidden not in page


@pytest.mark.django_db
def test_the_runners_hello_and_the_ids_an_answer_repeats_are_not_masked():
    token = "koru_" + "Jx3_kP9-vQ2mW7zR5tY1uN8bC4dF6gH0jL"
    hello = boundary.load(json.dumps({"type": "hello", "secret": token}))
    assert hello["secret"] == token
    acp = frames.acp(2, {"jsonrpc": "2.0", "id": token, "method": "x", "params": {"t": token}})
    acp["message"]["params"]["options"] = [{"optionId": token, "name": token}]
    loaded = boundary.load(json.dumps(acp))
    assert loaded["message"]["id"] == token
    assert loaded["message"]["params"]["options"][0]["optionId"] == token
    assert loaded["message"]["params"]["t"] == "koru_" + "*" * 34
    assert loaded["message"]["params"]["options"][0]["name"] != token
    outcome = boundary.load(json.dumps(frames.outcome(3, 1, token) | {"request_id": token}))
    assert outcome["request_id"] == token and outcome["outcome"]["optionId"] == token
