"""What a permission request or a question offers a person, and what it asked: pure.

``choices`` come from ``session/request_permission`` options, in the agent's order, each with its
intent. ``questions`` come from an ``elicitation/create`` form schema; Claude Code's
AskUserQuestion arrives as ``question_<i>`` properties with a ``question_<i>_custom`` free-text
companion, which becomes that question's ``allow_other``.

What a permission request asked is kept as one bounded string, the row's ``agent_summary``
(docs/architecture.md#the-toolactivity-contract), readable as it is in the JSON export and
shown again, in parts, on every page after the answer — even once the agent's "User refused
permission" has replaced the call's output:

    <its title, and a v2 request's description>

    Command, in <working directory>:
    ```sh
    <the command line, when the call runs one>
    ```

    <what the request showed: text, and a unified diff for a change>

``summary`` writes it, ``asked`` reads it back into its parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from activity.core.contract import (
    ChoiceIntent,
    Limits,
    LiveChoice,
    LiveQuestion,
    LiveQuestionOption,
    ToolApproval,
    bound,
)
from activity.core.render import command_line, render_content
from activity.wire.acp import META_CWD, CreateElicitation, PermissionOption, RequestPermission

if TYPE_CHECKING:
    from activity.models import Prompt

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


# --- what a permission request asked -----------------------------------------------------------

# Where agents say which directory a command runs in: codex ``cwd``, gemini ``dir_path`` (older
# ``directory``); claude runs it in the session's directory, which its runner adds (``META_CWD``).
CWD_KEYS = ("cwd", "workdir", "working_directory", "dir_path", "directory")
COMMAND_BLOCK = re.compile(
    r"(?:\A|\n\n)Command(?:, in (?P<cwd>[^\n]*))?:\n(?P<ticks>`{3,})sh\n"
    r"(?P<command>.*?)(?:\n(?P=ticks)(?=\n\n|\Z)|\Z)",
    re.DOTALL,
)
DIFF_START = re.compile(r"^--- [^\n]*\n\+\+\+ ", re.MULTILINE)
DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(?P<path>[^\n\t]+)", re.MULTILINE)


def summary(request: RequestPermission, label: str | None, limits: Limits) -> str | None:
    """What the request asked: its words, the command it would run and where, and what it
    showed. Its words alone fit the short bound; with a command or a change shown, the whole
    fits the content bound, so a useful diff is kept."""
    call = request.call
    if request.title:
        words = f"{request.title}\n{request.description}" if request.description else request.title
    else:
        words = (call.title if call else None) or label or ""
    command, where = command_of(request)
    shown = render_content(call.content) if call is not None and call.content else ""
    parts = [words]
    if command:
        parts.append(command_block(command, where))
    if shown:
        parts.append(shown)
    text = "\n\n".join(part for part in parts if part)
    if not text:
        return None
    return bound(text, limits.content_chars if len(parts) > 1 else limits.short_chars)


def command_of(request: RequestPermission) -> tuple[str | None, str | None]:
    """The command a request would run, and its directory when the agent says."""
    subject = request.subject or {}
    if subject.get("type") == "command":
        cwd = subject.get("cwd")
        return command_line(subject.get("command")), cwd if isinstance(cwd, str) else None
    call = request.call
    raw = call.raw_input if call is not None else None
    if not isinstance(raw, dict):
        return None, None
    command = command_line(raw.get("command", raw.get("cmd")))
    if command is None:
        return None, None
    dirs = [raw.get(key) for key in CWD_KEYS]
    meta = (request.meta or {}).get(META_CWD)
    cwd = next((d for d in [*dirs, meta] if isinstance(d, str) and d.strip()), None)
    return command, cwd


def command_block(command: str, cwd: str | None) -> str:
    where = f", in {' '.join(cwd.split())}" if cwd else ""
    return f"Command{where}:\n{fence(command, 'sh')}"


def fence(text: str, info: str = "") -> str:
    """A Markdown code block that no backticks inside can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


@dataclass(frozen=True)
class Asked:
    """A request's ``agent_summary`` in its parts, for a page or the transcript."""

    title: str = ""
    command: str | None = None
    cwd: str | None = None
    text: str = ""  # what the request showed besides a change (claude: the command's purpose)
    diff: str | None = None  # a unified diff: the change it asked to make

    @property
    def files(self) -> list[str]:
        """The files the change touches, in its order."""
        found = (m.group("path").strip() for m in DIFF_FILE.finditer(self.diff or ""))
        return list(dict.fromkeys(f for f in found if f != "/dev/null"))

    @property
    def shows(self) -> bool:
        """Whether it shows more than its title: a command, a change, or text."""
        return bool(self.command or self.diff or self.text)

    def __bool__(self) -> bool:
        return bool(self.title or self.shows)


def asked(text: str | None) -> Asked:
    """Read a summary ``summary`` wrote (or an older one: its words, then what it showed)."""
    if not text:
        return Asked()
    block = COMMAND_BLOCK.search(text)
    after = block.end() if block else 0
    diff = DIFF_START.search(text, after)
    head_end = block.start() if block else (diff.start() if diff else len(text))
    head, rest = text[:head_end].strip("\n"), ""
    if not block:  # the words, then what was shown; with a command, the words may be a command
        head, _, rest = head.partition("\n\n")
    middle = text[after : diff.start() if diff else len(text)] if block else ""
    return Asked(
        title=head.strip(),
        command=block.group("command") if block else None,
        cwd=(block.group("cwd") or None) if block else None,
        text="\n\n".join(p.strip("\n") for p in (rest, middle) if p.strip()),
        diff=text[diff.start() :].rstrip("\n") if diff else None,
    )


def asked_markdown(view: Asked) -> str:
    """What was asked, as Markdown (the transcript)."""
    parts = [view.title] if view.title else []
    if view.command is not None:
        parts.append(f"Command, in `{view.cwd}`:" if view.cwd else "Command:")
        parts.append(fence(view.command, "sh"))
    if view.text:
        parts.append(fence(view.text, "text"))
    if view.diff:
        parts.append(fence(view.diff, "diff"))
    return "\n\n".join(parts)


def questions_markdown(questions: list[dict[str, Any]]) -> str:
    """A question's questions and what they offered, as a Markdown list (the transcript)."""
    lines = []
    for question in questions:
        offered = [str(option.get("label", "")) for option in question.get("options", [])]
        if question.get("allow_other"):
            offered.append("other" if offered else "free text")
        header = f"**{question['header']}** " if question.get("header") else ""
        lines.append(f"- {header}{question.get('question', '')} ({' · '.join(offered)})")
    return "\n".join(lines)


REFUSING = frozenset({ChoiceIntent.REJECT_ONCE, ChoiceIntent.REJECT_ALWAYS})


def verdict(prompt: Prompt) -> str:
    """``refused``, ``allowed`` or ``asked``: what the answer did with what was asked, from the
    moment it is given (the agent may not have heard it yet: ``outcome`` still empty)."""
    if prompt.outcome == ToolApproval.DENIED:
        return "refused"
    if prompt.outcome == ToolApproval.APPROVED:
        return "allowed"
    if prompt.outcome or prompt.answered_at is None:
        return "asked"
    answer = prompt.answer or {}
    if prompt.kind == "question":
        return "refused" if answer.get("action") == "decline" else "allowed"
    chosen = next((c for c in prompt.choices if c.get("id") == answer.get("optionId")), None)
    if chosen is None:
        return "asked"
    return "refused" if ChoiceIntent.from_kind(chosen.get("intent")) in REFUSING else "allowed"
