"""The working set of one write to a chat: what a batch loaded, made and changed.

Every writer of a chat fills a ``Work`` inside ``chats.change`` (which holds the chat's row
lock), then ``write`` saves it once: new objects in bulk, each changed object once, and the
chat's version bumped once, so every push and resync can say exactly what changed.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections, router
from django.db.models import Field, Model

from activity.core.contract import Limits
from activity.models import Chat, InferenceAttempt, Message, Prompt, ToolActivity

INSERT_ORDER = (InferenceAttempt, Message, ToolActivity, Prompt)
# Which of the chat's per-kind versions a change to an object moves (Chat.turns_version, …).
# A prompt shows in its row or, about no row, in its turn's head.
KIND_VERSIONS: dict[type[Model], tuple[str, ...]] = {
    InferenceAttempt: ("turns_version",),
    Message: ("replies_version",),
    ToolActivity: ("rows_version",),
    Prompt: ("turns_version", "rows_version"),
}


FACET_FIELDS = {"status", "agent_kind", "approval"}  # a call's fields the filter bar counts


class FrameError(Exception):
    """A frame that cannot be applied; its message is sent back to the runner."""


@dataclass(frozen=True)
class ChatChange:
    """What one write did to a chat: versions ``since`` → ``version`` (equal: nothing)."""

    chat_id: uuid.UUID
    workspace_id: uuid.UUID
    since: int
    version: int
    prompts_changed: bool = False  # a prompt opened, was answered or closed: inboxes change
    listed: bool = False  # what the runs list shows of it changed (head, a turn, a prompt)
    mentioned: tuple[int, ...] = ()  # people a new comment mentions: their inboxes change

    @property
    def changed(self) -> bool:
        return self.version > self.since

    @classmethod
    def gone(cls, chat: Chat) -> ChatChange:
        """A chat that was deleted: nothing to push, but its open prompts left the inboxes."""
        version = chat.version
        return cls(chat.pk, chat.workspace_id, version, version, prompts_changed=True, listed=True)


@dataclass
class Work:
    """The in-memory working set of one batch."""

    chat: Chat
    limits: Limits
    rows: dict[str, ToolActivity] = field(default_factory=dict)  # by the agent's toolCallId
    absent: set[str] = field(default_factory=set)  # toolCallIds known to have no row yet
    prompts: dict[str, Prompt] = field(default_factory=dict)  # by request key
    new: list[Model] = field(default_factory=list)
    new_ids: set[int] = field(default_factory=set)
    dirty: dict[int, tuple[Model, set[str]]] = field(default_factory=dict)
    meta_changed: bool = False
    mentioned: list[int] = field(default_factory=list)  # user ids, see ChatChange.mentioned
    result: ChatChange | None = None  # set by chats.change once the write is done

    @property
    def done(self) -> ChatChange:
        """What the write did; only after the ``chats.change`` block."""
        if self.result is None:
            raise RuntimeError("the change is read after its chats.change block")
        return self.result

    def add(self, *objs: Model) -> None:
        self.new += objs
        self.new_ids.update(map(id, objs))

    def touch(self, obj: Model, *fields: str) -> None:
        if not fields or id(obj) in self.new_ids:
            return
        self.dirty.setdefault(id(obj), (obj, set()))[1].update(fields)

    def touch_meta(self, *fields: str) -> None:
        self.touch(self.chat, *fields)
        self.meta_changed = True

    def attempt(self) -> InferenceAttempt:
        attempt = self.chat.current_attempt
        if attempt is None:
            raise FrameError("no turn has started in this chat yet")
        return attempt

    def attempt_of(self, prompt: Prompt) -> InferenceAttempt:
        current = self.chat.current_attempt
        if current is not None and current.pk == prompt.attempt_id:
            return current
        return InferenceAttempt.objects.get(pk=prompt.attempt_id)

    def reply(self, attempt: InferenceAttempt) -> Message:
        return attempt.reply

    def row(self, tool_call_id: str) -> ToolActivity | None:
        if tool_call_id in self.absent:
            return None  # the batch's preload already looked
        if tool_call_id not in self.rows:
            found = ToolActivity.objects.filter(chat=self.chat, tool_call_id=tool_call_id).first()
            if found is None:
                return None
            self.rows[tool_call_id] = found
        return self.rows[tool_call_id]

    def prompt(self, key: str) -> Prompt | None:
        if key not in self.prompts:
            found = Prompt.objects.filter(chat=self.chat, request_id=key).first()
            if found is None:
                return None
            self.prompts[key] = found
        return self.prompts[key]

    @property
    def changed(self) -> bool:
        return bool(self.new or self.dirty)

    @property
    def prompts_changed(self) -> bool:
        touched = [*self.new, *(obj for obj, _ in self.dirty.values())]
        return any(isinstance(obj, Prompt) for obj in touched)

    @property
    def listed(self) -> bool:
        """Whether the runs list's line of the chat changed: its head (title, runner), a turn
        started or ended, a prompt opened or closed (its "needs you" marker)."""
        touched = [*self.new, *(obj for obj, _ in self.dirty.values())]
        return self.meta_changed or any(isinstance(o, InferenceAttempt | Prompt) for o in touched)


def write(work: Work, since: int) -> None:
    """Save what the working set changed, under one new chat version."""
    chat = work.chat
    kinds: set[str] = set()
    if work.changed:
        chat.version = since + 1
        for obj in [*work.new, *(obj for obj, _ in work.dirty.values())]:
            kinds.update(KIND_VERSIONS.get(type(obj), ()))
        if _facets_changed(work):
            kinds.add("facets_version")
        for name in kinds:
            setattr(chat, name, chat.version)
        for obj in work.new:
            obj.version = obj.created_version = chat.version  # type: ignore[attr-defined]
        for obj, fields in work.dirty.values():
            if obj is not chat:
                obj.version = chat.version  # type: ignore[attr-defined]
                fields.add("version")
        if work.meta_changed:
            chat.meta_version = chat.version
    for model in INSERT_ORDER:
        batch = [obj for obj in work.new if type(obj) is model]
        if batch:
            cast(Any, model.objects).bulk_create(batch)
    columns = {"version", "meta_version", "last_seq", *kinds, *_chat_fields(work)}
    update([*((obj, f) for obj, f in work.dirty.values() if obj is not chat), (chat, columns)])


def update(changed: list[tuple[Model, set[str]]]) -> None:
    """Save each object's ``fields``: one UPDATE statement per model and set of fields, run for
    every such object at once (``executemany``). ``Model.save(update_fields=…)`` would compile
    the same statement again for each object, the most of a batch's time in ingest (bench/cycle.py
    counts it). The objects were loaded in this transaction, under the chat's lock, so each
    UPDATE finds its row; no model of a chat's sends save signals or sets fields on save."""
    groups: dict[tuple[type[Model], tuple[str, ...]], list[Model]] = defaultdict(list)
    for obj, fields in changed:
        groups[(type(obj), tuple(sorted(fields)))].append(obj)
    for (model, names), objs in groups.items():
        meta = model._meta
        by_name: dict[str, Field[Any, Any]] = {}
        for column in meta.concrete_fields:
            by_name[column.name] = by_name[column.attname] = column
        chosen = [by_name[name] for name in names]
        connection = connections[router.db_for_write(model)]
        quote = connection.ops.quote_name
        assignments = ", ".join(f"{quote(_column(f))} = %s" for f in chosen)
        pk = meta.pk
        assert pk is not None
        sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(_column(pk))} = %s"
        rows = [
            [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in chosen]
            + [pk.get_db_prep_value(obj.pk, connection)]
            for obj in objs
        ]
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)


def _facets_changed(work: Work) -> bool:
    """Whether the change moves what the filter bar counts or points at (``filters.panel``):
    a new call or prompt, a call's status, kind or approval, any change to a prompt."""
    if any(isinstance(obj, ToolActivity | Prompt) for obj in work.new):
        return True
    return any(
        isinstance(obj, Prompt) or (isinstance(obj, ToolActivity) and fields & FACET_FIELDS)
        for obj, fields in work.dirty.values()
    )


def _column(f: Field[Any, Any]) -> str:
    assert f.column is not None  # a concrete field's
    return f.column


def _chat_fields(work: Work) -> list[str]:
    entry = work.dirty.get(id(work.chat))
    return sorted(entry[1]) if entry else []
