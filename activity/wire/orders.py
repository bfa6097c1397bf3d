"""The frames the server sends a runner over ``/ws/agent/`` (docs/protocol.md#server-to-runner):
the way back along the data path. A cumulative ``ack`` (everything up to ``seq`` is committed);
an ``error`` that names what was wrong with frame ``seq`` and also acknowledges it; an
``answer`` to the agent's request ``request_id``; and, to a runner started with
``--allow-web``, a person's ``prompt``, ``cancel`` or ``set_mode``; to a host's runner,
``stop``. What a runner sends is ``frames.py``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import UUID4, Field, StrictStr, TypeAdapter

from activity.wire.frames import WEB_PROMPT_CHARS, Name, RequestId, Strict


class Ack(Strict):
    type: Literal["ack"] = "ack"
    seq: int


class Error(Strict):
    type: Literal["error"] = "error"
    seq: int | None
    error: str


class Answer(Strict):
    type: Literal["answer"] = "answer"
    request_id: RequestId
    outcome: dict[str, Any]


class WebPromptFrame(Strict):
    """A person's message to the agent: the runner starts a turn with it (``TurnStarted``
    with ``web_prompt_id``), once, however often it is sent (a reconnect sends it again until
    the turn has started); a runner busy with a turn runs it after."""

    type: Literal["prompt"] = "prompt"
    id: UUID4
    text: Annotated[StrictStr, Field(min_length=1, max_length=WEB_PROMPT_CHARS)]
    by: Annotated[StrictStr, Field(max_length=150)] = ""  # who sent it (a user name)


class WebCancel(Strict):
    """Cancel turn ``attempt_id`` (``session/cancel``); its open prompts end cancelled."""

    type: Literal["cancel"] = "cancel"
    id: UUID4
    attempt_id: UUID4
    by: Annotated[StrictStr, Field(max_length=150)] = ""


class WebMode(Strict):
    """Switch the agent to ``mode``, which must be one of the runner's ``--web-modes``."""

    type: Literal["set_mode"] = "set_mode"
    id: UUID4
    mode: Name
    by: Annotated[StrictStr, Field(max_length=150)] = ""


class WebStop(Strict):
    """End the run: cancel its turn, close the agent's session (``session/close`` where the
    agent offers it) and exit. Sent to a host's runner only (the server offers it for runs a
    host started)."""

    type: Literal["stop"] = "stop"
    id: UUID4
    by: Annotated[StrictStr, Field(max_length=150)] = ""


ServerFrameType = Ack | Error | Answer | WebPromptFrame | WebCancel | WebMode | WebStop
ServerFrame = Annotated[ServerFrameType, Field(discriminator="type")]
server_frame: TypeAdapter[ServerFrameType] = TypeAdapter(ServerFrame)
