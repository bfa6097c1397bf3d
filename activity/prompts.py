"""What a permission request or a question offers a person: pure, from ACP to ``live``.

``choices`` come from ``session/request_permission`` options, in the agent's order, each with its
intent. ``questions`` come from an ``elicitation/create`` form schema; Claude Code's
AskUserQuestion arrives as ``question_<i>`` properties with a ``question_<i>_custom`` free-text
companion, which becomes that question's ``allow_other``.
"""

from __future__ import annotations

from typing import Any

from activity.contract import ChoiceIntent, LiveChoice, LiveQuestion, LiveQuestionOption, bound
from activity.protocol import CreateElicitation, PermissionOption

LABEL_CHARS = 512
CUSTOM_SUFFIX = "_custom"


def choices(options: list[PermissionOption]) -> list[LiveChoice]:
    return [
        LiveChoice(
            id=option.option_id,
            intent=ChoiceIntent.from_kind(option.kind),
            label=bound(option.name, LABEL_CHARS) or option.option_id,
        )
        for option in options
    ]


def questions(request: CreateElicitation) -> list[LiveQuestion]:
    schema = request.requested_schema
    if schema is None:
        return []
    props = schema.properties
    several = sum(1 for name in props if not _is_custom(name, props)) > 1
    result = []
    for name, prop in props.items():
        if _is_custom(name, props):
            continue
        options, multi = _options(prop)
        free_text = prop.get("type") == "string" and not options
        asked = prop.get("description") if several else request.message or prop.get("description")
        result.append(
            LiveQuestion(
                id=name,
                header=_text(prop.get("title")),
                question=_text(asked) or _text(prop.get("title")) or name,
                options=options,
                allow_other=free_text or f"{name}{CUSTOM_SUFFIX}" in props,
                secret=_is_secret(prop),
                multi_select=multi,
            )
        )
    return result


def _is_custom(name: str, props: dict[str, dict[str, Any]]) -> bool:
    return name.endswith(CUSTOM_SUFFIX) and name.removesuffix(CUSTOM_SUFFIX) in props


def _is_secret(prop: dict[str, Any]) -> bool:
    return bool(prop.get("secret") or prop.get("writeOnly") or prop.get("format") == "password")


def _text(value: Any) -> str | None:
    return bound(value, LABEL_CHARS) if isinstance(value, str) and value else None


def _options(prop: dict[str, Any]) -> tuple[list[LiveQuestionOption], bool]:
    multi = prop.get("type") == "array"
    source = prop.get("items", {}) if multi and isinstance(prop.get("items"), dict) else prop
    titled = source.get("oneOf") or source.get("anyOf")
    if isinstance(titled, list):
        return [
            # The label is the value the answer sends back (``const``).
            LiveQuestionOption(label=str(o["const"]), description=_text(o.get("description")))
            for o in titled
            if isinstance(o, dict) and "const" in o
        ], multi
    if isinstance(source.get("enum"), list):
        return [LiveQuestionOption(label=str(v)) for v in source["enum"]], multi
    if prop.get("type") == "boolean":
        return [LiveQuestionOption(label="Yes"), LiveQuestionOption(label="No")], False
    return [], multi
