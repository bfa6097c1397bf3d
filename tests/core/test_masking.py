"""Secrets an agent prints are masked before koruweb stores, indexes or pushes them
(activity/core/masking.py, applied at the boundary): each known shape, in each field an agent
controls, never reaches the database, the search, the export or the page."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from activity.core.masking import mask, mask_junction
from activity.live import boundary
from activity.live.ingest import ingest
from activity.models import Chat
from activity.review import search
from activity.wire.frames import runner_frame
from tests import factories, frames

# Fake secrets, built in pieces so no scanner takes this file for a leak. Each: its shape, the
# text as an agent prints it, and the part of it that must never be stored.
AWS_ID = "AKIA" + "Q3XAMPLE7KOR4WBZ"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "zEXAMPLEKY"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2" + "hV1oKkq5xT9rZp0nLk8w"
PASSWORD = "Tr0ub4dor-" + "x9Qm"
BASIC = "YWRtaW46" + "aHVudGVyMng="
HF = "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz" + "2Xc4V"
SENDGRID = "Zx8Cv6Bn4Mq2We0Rt8Yu6Io4Pa2Sd0Fg8Hj6Kl4Zx8Cv" + "6Bn"
NPM = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6" + "q7R8"
SLACK_HOOK = "Vb7Nm3Qw9Er5" + "Ty1Ui8Op4As2"
DISCORD_HOOK = "Hj5Kl8Zx2Cv6Bn9Mq3We7Rt1Yu4Io0Pa-" + "Sd_Fg"
ENCODED_KEY = base64.b64encode(b"sk-ant-api03-" + b"Pq2Wm8Xz4Ks7Jd1Lv6Nb3Hc9T-AA").decode()
HEX_TOKEN = (b"ghp_" + b"R8t2Y6u0I4o9P3a7S1d5F8g2H6j0K4l8Z3x7").hex()
ENCODED_PEM = base64.b64encode(
    f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n".encode()
).decode()
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
    # The shapes of issue 22: key/value forms, command lines, URLs, more vendors, encodings.
    ("yaml password", "password: " + PASSWORD, PASSWORD),
    ("json password", '{"user": "app", "password": "' + PASSWORD + '"}', PASSWORD),
    ("python dict password", "{'password': '" + PASSWORD + "'}", PASSWORD),
    ("camel-case json key", '{"clientSecret": "' + PASSWORD + '"}', PASSWORD),
    ("toml secret", 'client_secret = "' + PASSWORD + '"', PASSWORD),
    ("env key with a colon", "OPENAI_API_KEY: " + PASSWORD, PASSWORD),
    ("api key header", "X-Api-Key: " + PASSWORD, PASSWORD),
    ("basic authorization header", "Authorization: Basic " + BASIC, BASIC),
    ("token flag", "gh auth login --token " + PASSWORD, PASSWORD),
    ("curl -u", "curl -u admin:" + PASSWORD + " https://api.example.com", PASSWORD),
    ("curl --user", "curl --user admin:" + PASSWORD + " https://x.example.com", PASSWORD),
    ("password in a url", "postgres://app:" + PASSWORD + "@db.internal:5432/app", PASSWORD),
    ("user:password@host", "mysql admin:" + PASSWORD + "@db.example.com:3306", PASSWORD),
    ("gitlab token", "glpat-" + "Xk2Lm9Qw4Er7Ty1Ui3Op", "Xk2Lm9Qw4Er7Ty1Ui3Op"),
    ("hugging face token", "hf_" + HF, HF),
    ("sendgrid key", "SG." + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5O" + "." + SENDGRID, SENDGRID),
    ("npm token", "npm_" + NPM, NPM),
    (
        "slack webhook",
        "https://hooks.slack.com/services/T0AB1CD2E/B0FG3HI4J/" + SLACK_HOOK,
        SLACK_HOOK,
    ),
    (
        "discord webhook",
        "https://discord.com/api/webhooks/112233445566778899/" + DISCORD_HOOK,
        DISCORD_HOOK,
    ),
    ("base64 anthropic key", ENCODED_KEY, ENCODED_KEY[24:48]),
    ("hex github token", HEX_TOKEN, HEX_TOKEN[40:72]),
    (
        "percent-encoded openai key",
        "%73k-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8",
        "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8",
    ),
    ("base64 private key", "client-key-data: " + ENCODED_PEM, ENCODED_PEM[60:100]),
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


# --- the shapes of issue 22: what stays, what is kept, encodings, junctions ----------------


@pytest.mark.parametrize(
    "text",
    [
        "password: \nuser: app",
        "password: null\ntoken: ~\napi_key: None",
        '{"password": "", "token": null, "secret": false}',
        "password: ${DB_PASSWORD}\ntoken: $GITHUB_TOKEN\nAPI_KEY=%API_KEY%",
        'password: "{{ vault_db_password }}"\nclient_secret: !vault |',
        "password: <redacted>\ntoken: [REDACTED]\napi_key: ***\nsecret: xxxx",
        "api_key = os.environ['OPENAI_API_KEY']\ntoken = get_token()\nkey: process.env.KEY",
        "def login(user: str, password: str) -> None:\n    token: Optional[str] = None",
        "PWD=/home/me/project\nOLDPWD=/home/me",
        'sort_key = name\n{"key": "ctrl+s", "command": "save"}\nprimary_key: id',
        "max_tokens: 100\ntoken_type: bearer\nsecret_name: my-app-secret",
        "The password is stored in the vault. Set the password: it must be long.",
        "Contact:bob@example.com, mailto:alice@example.org, git@github.com:org/repo.git",
        "docker run -u 1000:1000 img; git push -u origin main; chown --user www:www",
        "the hf_hub_download helper; npm_config_cache; SG.Ready; glob patterns",
        "https://hooks.slack.com/services/ and https://discord.com/api/webhooks/ (docs)",
        "100% done, 50%off, a%20b, encodeURIComponent('%73')",
        "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk)",
    ],
    ids=[
        "empty values",
        "null values",
        "empty json values",
        "references",
        "templates and yaml tags",
        "placeholders",
        "code that reads a secret",
        "type annotations",
        "working directories",
        "keys that are not secret",
        "words that end like secret keys",
        "prose",
        "e-mail addresses",
        "uid:gid and user:group",
        "names that start like tokens",
        "webhook docs",
        "percent signs",
        "a base64 image",
    ],
)
def test_text_that_only_looks_like_a_new_shape_is_left_as_it_is(text):
    assert mask(text) == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ('{"password": "hunter2x"}', '{"password": "********"}'),
        ("  db_password: 'hunter2x'  # prod", "  db_password: '********'  # prod"),
        ("X-Api-Key: abc123", "X-Api-Key: ******"),
        ("SECRET_KEY_BASE=abc123", "SECRET_KEY_BASE=******"),
        ("Authorization: Bearer abc123", "Authorization: Bearer ******"),
        ('curl -H "Authorization: Token abc123" x', 'curl -H "Authorization: Token ******" x'),
        ("curl -u admin:abc123 x", "curl -u admin:****** x"),
        ("redis://:abc123@cache:6379", "redis://:******@cache:6379"),
        ("glpat-" + "Xk2Lm9Qw4Er7Ty1Ui3Op", "glpat-" + "*" * 20),
        ("npm_" + NPM, "npm_" + "*" * 36),
        (
            "https://discord.com/api/webhooks/42/" + "Hj5Kl8Zx2Cv6",
            "https://discord.com/api/webhooks/42/" + "*" * 12,
        ),
        ("%73k-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8", "%73k-proj-" + "*" * 24),
    ],
)
def test_a_mask_keeps_the_key_and_the_prefix_and_hides_only_the_value(text, masked):
    assert mask(text) == masked


def test_a_quoted_value_cut_at_the_end_of_a_chunk_is_masked_but_an_open_quote_in_prose_is_not():
    assert mask('{"password": "hunt') == '{"password": "****'
    assert mask('the password: "hunt\nmore') == 'the password: "hunt\nmore'


@pytest.mark.parametrize("prefix", [b"sk-ant-api03-", b"ghp_", b"AKIA"])
@pytest.mark.parametrize(
    "lead", [b"", b"=", b"k=\n"], ids=["aligned", "one byte in", "two bytes in"]
)
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["std", "url"])
def test_a_base64_token_is_masked_at_each_alignment(prefix, lead, encode):
    secret = b"ABCDEFGHIJKLMNOP" if prefix == b"AKIA" else b"Xq9Lm2Vb7Nc4Zt8Kp3Wd6Rg1Yh5Uj0Ik"
    encoded = encode(lead + prefix + secret + b"\n").decode()
    first, last = len(lead + prefix), len(lead + prefix + secret)  # the secret's bytes
    kept, hidden = 8 * first // 6, -(-8 * last // 6)  # the characters with none / any of them
    masked = mask(f"data: {encoded} end")
    assert masked == f"data: {encoded[:kept]}" + "*" * (hidden - kept) + f"{encoded[hidden:]} end"


@pytest.mark.parametrize("upper", [False, True])
def test_a_hex_token_is_masked_in_either_case(upper):
    encoded = (b"xoxb-" + b"2739184650-Vb7Nm3Qw9Er5Ty").hex()
    encoded = encoded.upper() if upper else encoded
    assert mask(encoded) == encoded[:10] + "*" * (len(encoded) - 10)


@pytest.mark.parametrize(
    "text",
    [
        "mot de passe — password: pässwörd ✓",
        '{"clé": "valeur", "api_key": "ключ-секрет-9"} ✓',
        "naïve curl -u admin:pässwörd https://x.example.com ✓",
        "⚠ postgres://app:pässwörd@db.internal:5432/app ✓",
        "→ hf_" + HF + " ←",
        "→ " + base64.b64encode(b"sk-ant-api03-" + b"Pq2Wm8Xz4Ks7Jd1Lv6Nb3Hc9T").decode() + " ←",
        "é%73k-proj-" + "Yh7Ud2Ws9Qe4Rt6Lp1Mk3Nb8é",
        "日本 https://hooks.slack.com/services/T0AB1CD2E/B0FG3HI4J/" + SLACK_HOOK + " 日本",
    ],
)
def test_each_new_shape_keeps_the_byte_size_and_the_text_around_it(text):
    masked = mask(text)
    assert masked != text
    assert len(masked.encode()) == len(text.encode())
    assert masked[:2] == text[:2] and masked[-1] == text[-1]


@pytest.mark.parametrize(("name", "text", "hidden"), SECRETS, ids=IDS)
def test_masking_masked_text_changes_nothing(name, text, hidden):
    once = mask(f"before {text} after")
    assert mask(once) == once


FRAGMENTS = [text for _, text, _ in SECRETS] + [
    "password: ",
    " ",
    "\n",
    ":",
    "=",
    '"',
    "'",
    "@",
    "://",
    "-u ",
    "é",
    "日本",
    "Bearer ",
    "token",
    "%",
    "==",
]


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_any_mix_of_shapes_is_masked_to_its_byte_size_and_masked_again_unchanged(parts):
    text = "".join(parts)
    once = mask(text)
    assert len(once.encode()) == len(text.encode())
    assert mask(once) == once


@pytest.mark.parametrize(
    ("stored", "new", "kept"),
    [
        ("password: " + "Tr0ub4dor", "-x9Qm and more", " and more"),
        ('{"api_key": "' + "Tr0ub4dor", '-x9Qm", "user": "app"}', '", "user": "app"}'),
        ("curl -u admin:" + "Tr0ub4dor", "-x9Qm https://x", " https://x"),
        ("SG." + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5O." + SENDGRID[:30], SENDGRID[30:] + " ok", " ok"),
        (
            "hook https://hooks.slack.com/services/T0AB1CD2E/B0FG",
            "3HI4J/" + SLACK_HOOK + " ok",
            " ok",
        ),
        ("data " + ENCODED_KEY[:40], ENCODED_KEY[40:] + " ok", " ok"),
    ],
    ids=["yaml value", "json value", "curl password", "sendgrid key", "slack webhook", "base64"],
)
def test_a_new_chunk_that_continues_a_masked_value_is_masked_to_where_the_value_ends(
    stored, new, kept
):
    stored_masked, new_masked = mask_junction(mask(stored), mask(new))
    assert new_masked.endswith(kept)
    assert set(new_masked[: -len(kept)]) == {"*"}
    assert len(stored_masked) == len(stored)


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
def test_the_runners_hello_is_not_masked():
    # The ids an answer repeats are masked like the rest: tests/live/test_boundary.py.
    token = "koru_" + "Jx3_kP9-vQ2mW7zR5tY1uN8bC4dF6gH0jL"
    hello = boundary.load(json.dumps({"type": "hello", "secret": token}))
    assert hello["secret"] == token
