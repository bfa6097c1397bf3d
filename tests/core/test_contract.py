"""The ToolActivity contract (docs/architecture.md#the-toolactivity-contract): its fields, names and
types, and its bounds."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.management import call_command

from activity.core.contract import (
    ChoiceIntent,
    ToolActivityRecord,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
    bound,
    clean_text,
    tool_activity_json_schema,
)
from activity.core.merge import CallState
from activity.live.calls import state_of
from activity.models import ToolActivity
from tests import frames
from tests.factories import apply, make_turn, save_call

# The contract, field for field: (name, required, JSON type of a value, nullable).
SEED_FIELDS = [
    ("id", True, "uuid", False),
    ("attempt_id", True, "uuid", False),
    ("chat_id", True, "uuid", False),
    ("assistant_message_id", True, "uuid", False),
    ("tool_name", True, "string", False),
    ("read_only", True, "boolean", False),
    ("status", True, "ToolActivityStatus", False),
    ("approval", True, "ToolApproval", False),
    ("proposed_at", True, "integer", False),
    ("started_at", False, "integer", True),
    ("completed_at", False, "integer", True),
    ("result_bytes", False, "integer", True),
    ("error_code", False, "ToolErrorCode", True),
    ("target_workspace_id", False, "uuid", True),
    ("target_document_id", False, "uuid", True),
    ("error_message", False, "string", True),
    ("agent_label", False, "string", True),
    ("agent_summary", False, "string", True),
    ("agent_input", False, "string", True),
    ("agent_output", False, "string", True),
    ("text_offset", False, "integer", True),
    ("live", False, "AgentActivityLive", True),
]
SEED_ENUMS = {
    "ToolActivityStatus": {"proposed"},
    "ToolApproval": {"not_required"},
    "ToolErrorCode": {"permission_denied"},
}


def _types(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[set[str], set[str] | None]:
    """The JSON types a property allows, and the enum values if it is an enum."""
    options = prop.get("anyOf", [prop])
    types: set[str] = set()
    enum = None
    for option in options:
        if "$ref" in option:
            target = defs[option["$ref"].split("/")[-1]]
            types.add(target.get("type", "object"))
            enum = set(target["enum"]) if "enum" in target else enum
        else:
            types.add("uuid" if option.get("format") == "uuid" else option["type"])
    return types, enum


def test_the_json_schema_has_exactly_the_seeds_fields_in_its_order():
    schema = tool_activity_json_schema()
    assert list(schema["properties"]) == [name for name, *_ in SEED_FIELDS]
    assert set(schema["required"]) == {name for name, required, *_ in SEED_FIELDS if required}


@pytest.mark.parametrize(("name", "required", "kind", "nullable"), SEED_FIELDS)
def test_each_field_of_the_schema_has_the_seeds_type(name, required, kind, nullable):
    schema = tool_activity_json_schema()
    types, enum = _types(schema["properties"][name], schema.get("$defs", {}))
    assert ("null" in types) == nullable
    expected = {"uuid": "uuid", "string": "string", "boolean": "boolean", "integer": "integer"}
    if kind in SEED_ENUMS:
        assert enum is not None and SEED_ENUMS[kind] <= enum
    elif kind == "AgentActivityLive":
        assert "object" in types
    else:
        assert expected[kind] in types


def test_the_schema_bounds_sizes_and_offsets_as_unsigned():
    props = tool_activity_json_schema()["properties"]
    result_bytes = next(o for o in props["result_bytes"]["anyOf"] if o["type"] == "integer")
    text_offset = next(o for o in props["text_offset"]["anyOf"] if o["type"] == "integer")
    assert result_bytes["minimum"] == 0 and result_bytes["maximum"] == 2**64 - 1
    assert text_offset["minimum"] == 0 and text_offset["maximum"] == 2**32 - 1


def test_the_live_state_carries_choices_and_questions_with_the_seeds_fields():
    defs = tool_activity_json_schema()["$defs"]
    assert set(defs["LiveChoice"]["properties"]) == {"id", "intent", "label"}
    assert {"id", "header", "question", "options", "allow_other", "secret"} <= set(
        defs["LiveQuestion"]["properties"]
    )
    assert set(defs["LiveQuestionOption"]["properties"]) == {"label", "description"}
    assert set(ChoiceIntent.values) == {
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
        "other",
    }


def test_the_enums_are_the_designs_closed_sets():
    assert set(ToolStatus.values) == {"proposed", "running", "completed", "failed", "cancelled"}
    assert set(ToolApproval.values) == {
        "not_required",
        "pending",
        "approved",
        "denied",
        "cancelled",
    }
    assert set(ToolErrorCode.values) == {
        "permission_denied",
        "cancelled",
        "tool_failed",
        "agent_exited",
    }


def test_an_unknown_option_kind_means_the_other_intent():
    assert ChoiceIntent.from_kind("allow_once") is ChoiceIntent.ALLOW_ONCE
    assert ChoiceIntent.from_kind("approved-execpolicy-amendment") is ChoiceIntent.OTHER
    assert ChoiceIntent.from_kind(None) is ChoiceIntent.OTHER


@pytest.mark.django_db
def test_a_row_round_trips_to_the_exact_contract_json():
    reply = make_turn()
    state = CallState(
        tool_call_id="toolu_01",
        proposed_at=-5,  # before 1970: timestamps are signed
        text_offset=42,
        tool_name="Bash",
        status=ToolStatus.FAILED,
        approval=ToolApproval.DENIED,
        started_at=None,
        completed_at=1_700_000_000_123,
        result_bytes=7,
        error_code=ToolErrorCode.PERMISSION_DENIED,
        error_message="A person denied permission to run this tool.",
        agent_label="rm -rf build",
        agent_summary="rm -rf build",
        agent_input="rm -rf build",
        agent_output="refused",
    )
    row = save_call(reply, state)
    row.refresh_from_db()
    data = row.to_record().to_json()
    assert list(data) == [name for name, *_ in SEED_FIELDS]
    assert data == {
        "id": str(row.id),
        "attempt_id": str(reply.attempt_id),
        "chat_id": str(reply.chat_id),
        "assistant_message_id": str(reply.id),
        "tool_name": "Bash",
        "read_only": False,
        "status": "failed",
        "approval": "denied",
        "proposed_at": -5,
        "started_at": None,
        "completed_at": 1_700_000_000_123,
        "result_bytes": 7,
        "error_code": "permission_denied",
        "target_workspace_id": None,
        "target_document_id": None,
        "error_message": "A person denied permission to run this tool.",
        "agent_label": "rm -rf build",
        "agent_summary": "rm -rf build",
        "agent_input": "rm -rf build",
        "agent_output": "refused",
        "text_offset": 42,
        "live": None,
    }
    assert ToolActivityRecord.model_validate(data).to_json() == data
    assert state_of(row) == state


@pytest.mark.django_db
def test_a_rows_id_is_a_fresh_uuid4_not_the_agents_call_id():
    reply = make_turn()
    apply(reply.chat_id, frames.tool_call(2, "00000000-0000-4000-8000-000000000000", "Read"))
    row = ToolActivity.objects.get(chat_id=reply.chat_id)
    assert row.id.version == 4
    assert str(row.id) != row.tool_call_id


@pytest.mark.django_db
def test_export_chat_prints_the_chats_rows_in_order_with_live_null(capsys):
    reply = make_turn()
    apply(
        reply.chat_id,
        frames.tool_call(2, "a", "Read README.md"),
        frames.tool_call(3, "b", "Run tests"),
    )
    first, second = ToolActivity.objects.filter(chat_id=reply.chat_id).order_by("position")
    assert (first.tool_call_id, second.tool_call_id) == ("a", "b")
    apply(make_turn("other").chat_id, frames.tool_call(2, "c", "Read"))
    call_command("export_chat", str(reply.chat_id))
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [str(first.id), str(second.id)]
    assert all(r["live"] is None for r in rows)
    for r in rows:
        ToolActivityRecord.model_validate(r)


@pytest.mark.django_db
def test_export_chat_explains_an_unknown_or_malformed_chat_id():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no chat"):
        call_command("export_chat", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="not a chat id"):
        call_command("export_chat", "42")


def test_bounding_multibyte_text_cuts_between_characters_and_shows_the_cut():
    text = "日本語のテキスト🙂" * 50
    cut = bound(text, 100)
    assert cut is not None and len(cut) == 100
    assert "more characters cut" in cut
    assert text.startswith(cut[: cut.index("…")])
    cut.encode("utf-8")  # whole characters only: encodes without error


def test_bounding_keeps_text_that_fits_and_none():
    assert bound("short", 100) == "short"
    assert bound("x" * 100, 100) == "x" * 100
    assert bound(None, 100) is None


@pytest.mark.parametrize("limit", [64, 65, 100, 512, 16_384])
@pytest.mark.parametrize("length", [65, 101, 999, 10_000, 100_000])
def test_bounded_text_never_exceeds_its_limit(limit, length):
    cut = bound("é" * length, limit)
    assert cut is not None and len(cut) <= limit


def test_text_a_database_cannot_store_is_cleaned():
    assert clean_text("a\x00b") == "ab"
    cleaned = clean_text("x\ud83dy")
    assert cleaned[0] == "x" and cleaned[-1] == "y" and "\ufffd" in cleaned
    cleaned.encode("utf-8")  # a lone surrogate would raise here
