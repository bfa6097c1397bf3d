"""The frames between a runner and the server over ``/ws/agent/``
(docs/protocol.md#the-runners-socket). JSON objects, each with a ``type``.

Runner → server: ``hello`` first (the runner's ``PROTOCOL_VERSION``, the chat id, the runner's
secret and the highest seq the runner believes acknowledged), then numbered frames: ``seq``
counts from 1 per chat and ``at`` is the runner's own clock in epoch ms, so a resend never
shifts a time.

Runner → server also: ``session_info`` (what the run lets the web do, the agent's modes and
commands, its session), ``web_refused`` (a web request the runner would not carry out) and
``changes`` (what the agent changed in the run's git working tree, at each turn's end).

Server → runner: ``orders.py`` (acknowledgements, errors, answers and the web's requests).
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    UUID4,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
)

MAX_FRAME_BYTES = 1024 * 1024  # Daphne's default message limit; the runner cuts below it
# The runner's protocol, in every ``hello`` and ``host_hello``: the server serves this one only
# (docs/protocol.md#the-protocol-version). Raise it when a frame changes in a way the other side
# of an older release would misread.
PROTOCOL_VERSION = 1
CLOSE_REASON_BYTES = 123  # the longest reason a close frame carries (RFC 6455)

# Close codes of the sockets (docs/protocol.md#close-codes). Daphne can send only 1000 and 3000–4999
# (docs/gotchas.md#daphne-sends-only-some-close-codes), so every code koruweb uses is a
# 4xxx, listed here with what the other side does on it.
CLOSE_PROTOCOL = 4400  # no hello first (or in time), or frames lost: the runner reconnects, resends
CLOSE_UNAUTHORIZED = 4401  # no, bad or revoked credentials: the runner stops (exit 2)
CLOSE_FORBIDDEN = 4403  # not yours (another workspace's chat): the runner stops (exit 2)
# A browser's socket (revoke.py) closes with 4401 when its session logged out or ended (its page
# says "Signed out"), with 4403 when its person may no longer see its chat ("No longer a member
# of …"), and with 4410 when its chat was deleted ("This run was deleted"): none reconnects.
CLOSE_GONE = 4410
CLOSE_TOO_LARGE = 4413  # a frame over MAX_FRAME_BYTES: the runner cuts it to half, resends
# A hello of another protocol than ``PROTOCOL_VERSION``, or of none: the runner and the host
# stop (exit 2) and say the reason, which names the runner to install (``upgrade_reason``).
CLOSE_UPGRADE = 4426
# Too many: an agent token's new chats within a minute, or a person's or a token's sockets open
# at once (activity/sockets/floods.py). The reason says the limit and, when it knows, when to try
# again ("retry in N s", ``rate_reason``): the runner and the host wait at least that long (the
# runner: ``retry_after``), then reconnect; nothing it sent was refused, so it is no strike.
CLOSE_RATE = 4429
# On 4400, 4413 and 4500 the runner reconnects and resends; the same frame refused on three
# connections in a row stops it (exit 7).
CLOSE_SERVER_ERROR = 4500  # the server failed on what it got: reconnect and resend
# The server's database or channel layer (Redis) is away: nothing was refused. The runner
# reconnects with backoff and resends, however often; a page reconnects and catches up.
CLOSE_UNAVAILABLE = 4503

# Numbers are range-checked against the columns they reach: a seq is the chat's last_seq and
# a time is a bigint; cut bytes add up into a row's result_bytes (a bigint) over many chunks.
BIGINT_MAX = 2**63 - 1
MAX_CUT_BYTES = 2**53
Seq = Annotated[StrictInt, Field(ge=1, le=BIGINT_MAX)]
Millis = Annotated[StrictInt, Field(ge=-(2**63), le=BIGINT_MAX)]
RequestId = StrictStr | StrictInt
REQUEST_KEY_CHARS = 200  # Prompt.request_id: a request id as stored (``request_key``)


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


Secret = Annotated[StrictStr, Field(min_length=32, max_length=200)]
SESSION_ID_CHARS = 200  # the longest agent session id kept (Chat.agent_session_id)


class Hello(Strict):
    """``secret``: the runner's proof that the chat is its own, made with the chat id
    (``secrets.token_urlsafe(32)``) and sent in every hello. The server keeps its hash from the
    hello that makes the chat and refuses a hello without it (``CLOSE_FORBIDDEN``).

    ``protocol``: the runner's ``PROTOCOL_VERSION``; the server refuses a hello of any other, or
    of none, before it reads the rest (``CLOSE_UPGRADE``)."""

    type: Literal["hello"] = "hello"
    protocol: StrictInt = PROTOCOL_VERSION
    chat_id: UUID4
    secret: Secret | None = Field(default=None, repr=False)
    acked: Annotated[StrictInt, Field(ge=0, le=BIGINT_MAX)] = 0
    # A runner that resumes the chat (``koruweb agent --resume``, or a host's Resume): the
    # chat's secret from now on. Its ``secret`` is the one the chat has; the server takes it
    # only while no runner of the chat is connected, and never makes a chat for it
    # (docs/protocol.md#resuming-a-run).
    resume: Secret | None = Field(default=None, repr=False)


class Numbered(Strict):
    seq: Seq
    at: Millis


class TurnStarted(Numbered):
    type: Literal["turn_started"] = "turn_started"
    attempt_id: UUID4
    message_id: UUID4
    agent_name: str = ""
    agent_version: str = ""
    prompt: str = ""
    title: str | None = None
    mode: Annotated[str, Field(max_length=100)] | None = None  # the session's mode, if known
    web_prompt_id: UUID4 | None = None  # the web message (``WebPrompt.id``) this turn runs


Name = Annotated[StrictStr, Field(min_length=1, max_length=100)]
Said = Annotated[StrictStr, Field(max_length=500)]
WEB_PROMPT_CHARS = 100_000  # the longest message a person may send an agent from the web


class Mode(Strict):
    id: Name
    name: Annotated[StrictStr, Field(max_length=100)] = ""
    description: Said = ""


class Command(Strict):
    """One of the agent's slash commands (ACP ``available_commands_update``)."""

    name: Name
    description: Said = ""
    hint: Annotated[StrictStr, Field(max_length=200)] = ""  # what its input is, if it takes one


class SessionInfo(Numbered):
    """What the run lets the web do, and what the agent offers: sent once the agent's session
    has started, and again whenever any of it changes (a mode switched, new commands).

    ``allow_web``: the runner takes prompts, cancels and mode switches from the web
    (``--allow-web``). ``web_modes``: the modes the web may switch to (``--web-modes``; empty:
    none). ``modes``/``mode``: the agent's modes and the current one. ``commands``: its slash
    commands. ``stays``: the runner keeps serving the web after its own prompts are done.
    """

    type: Literal["session_info"] = "session_info"
    allow_web: StrictBool = False
    web_modes: Annotated[list[Name], Field(max_length=50)] = []
    modes: Annotated[list[Mode], Field(max_length=50)] = []
    mode: Name | None = None
    commands: Annotated[list[Command], Field(max_length=200)] = []
    stays: StrictBool = False
    # The agent's session (what a resume names), and whether the agent can take it up again
    # (``session/resume`` or ``session/load``) and close it (``session/close``), as its
    # ``initialize`` advertised. Optional: an older runner says none of them.
    session_id: Annotated[StrictStr, Field(max_length=SESSION_ID_CHARS)] = ""
    resumable: StrictBool = False
    closable: StrictBool = False


class WebRefused(Numbered):
    """The runner would not do what the web asked (``id`` of a ``WebPromptFrame``,
    ``WebCancel`` or ``WebMode``): it was not started with ``--allow-web``, the mode is not in
    ``--web-modes``, the agent refused it. ``reason`` is for the person who asked."""

    type: Literal["web_refused"] = "web_refused"
    id: UUID4
    reason: Said


class Acp(Numbered):
    """One raw ACP message from the agent, in wire order."""

    type: Literal["acp"] = "acp"
    message: dict[str, Any]
    cut_bytes: Annotated[StrictInt, Field(ge=0, le=MAX_CUT_BYTES)] = 0  # bytes cut to fit


class PromptOutcome(Numbered):
    """What the agent was told for its request ``request_id``.

    A permission: ``{"outcome": "selected", "optionId": …}`` or ``{"outcome": "cancelled"}``.
    A question: ``{"action": "accept" | "decline" | "cancel"}`` (never the answer's content).
    """

    type: Literal["prompt_outcome"] = "prompt_outcome"
    request_id: RequestId
    outcome: dict[str, Any]


class TurnEnded(Numbered):
    type: Literal["turn_ended"] = "turn_ended"
    attempt_id: UUID4
    stop_reason: Annotated[str, Field(min_length=1, max_length=64)]
    usage: dict[str, Any] | None = None
    error: Annotated[str, Field(max_length=2000)] | None = None  # the agent's, if it failed


TreeId = Annotated[StrictStr, Field(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]
CHANGES_FILES = 1000  # the most files a ``changes`` frame counts; more are left out


class FileCount(Strict):
    """One file of a change: lines added and removed (None for a binary file)."""

    path: Annotated[StrictStr, Field(min_length=1, max_length=4096)]
    added: Annotated[StrictInt, Field(ge=0, le=BIGINT_MAX)] | None = None
    removed: Annotated[StrictInt, Field(ge=0, le=BIGINT_MAX)] | None = None


class Change(Strict):
    """A diff between two snapshots of the run's working tree: its text (``diff``, cut to fit:
    ``cut_bytes`` were left out) and every file's counts (whole even when the text is cut; at
    most ``CHANGES_FILES``, ``more_files`` past them)."""

    diff: str = ""
    files: Annotated[list[FileCount], Field(max_length=CHANGES_FILES)] = []
    more_files: Annotated[StrictInt, Field(ge=0, le=2**31)] = 0
    cut_bytes: Annotated[StrictInt, Field(ge=0, le=BIGINT_MAX)] = 0


class Changes(Numbered):
    """What the agent changed in the run's git working tree, sent when a turn ends: ``turn``
    since that turn started, ``run`` since the run started (docs/protocol.md#the-whole-change).
    ``attempt_id`` None with ``outside``: the run has no snapshot to diff, and why (its
    directory is not in a git working tree, git failed). ``skipped``: files too big to
    snapshot, left out."""

    type: Literal["changes"] = "changes"
    attempt_id: UUID4 | None = None
    base: TreeId | None = None  # the run's start, as a git tree id (a resume takes it up)
    turn: Change | None = None
    run: Change | None = None
    outside: Annotated[StrictStr, Field(max_length=500)] | None = None
    skipped: Annotated[StrictInt, Field(ge=0, le=2**31)] = 0


NumberedFrame = TurnStarted | Acp | PromptOutcome | TurnEnded | SessionInfo | WebRefused | Changes
RunnerFrame = Annotated[NumberedFrame, Field(discriminator="type")]
runner_frame: TypeAdapter[NumberedFrame] = TypeAdapter(RunnerFrame)


class Refused(tuple[int, str]):
    """A numbered frame the server refused before applying it: ``(seq, what was wrong)``.

    ``from_agent``: it carried a message from the agent (an ``acp`` frame), so the turn counts
    it among the messages that could not be read.
    """

    from_agent: bool

    def __new__(cls, seq: int, error: str, *, from_agent: bool = False) -> Refused:
        refused = super().__new__(cls, (seq, error))
        refused.from_agent = from_agent
        return refused


def acp_parts(message: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A raw ACP message's ``params`` (empty unless an object) and its ``params.update``
    (None unless an object): the one place raw messages are walked by hand."""
    params = message.get("params") if isinstance(message, dict) else None
    params = params if isinstance(params, dict) else {}
    update = params.get("update")
    return params, update if isinstance(update, dict) else None


def seq_of(raw: Any) -> int | None:
    """The seq a frame claims, if it claims a usable one: an error frame acknowledges it."""
    seq = raw.get("seq") if isinstance(raw, dict) else None
    usable = isinstance(seq, int) and not isinstance(seq, bool) and 1 <= seq <= BIGINT_MAX
    return seq if usable else None


def request_key(request_id: str | int) -> str:
    """A JSON-RPC id as stored: 5 and "5" are different ids."""
    return f"n:{request_id}" if isinstance(request_id, int) else f"s:{request_id}"


def other_protocol(raw: Any, hello_type: str) -> bool:
    """Whether ``raw``, a first frame that is a hello of ``hello_type`` (or names no type), says
    another protocol than ``PROTOCOL_VERSION``, or none: a runner of another release, whose
    other frames the server need not read (``CLOSE_UPGRADE``)."""
    if not isinstance(raw, dict) or raw.get("type", hello_type) != hello_type:
        return False
    protocol = raw.get("protocol")
    return type(protocol) is not int or protocol != PROTOCOL_VERSION


@functools.cache
def package_version() -> str | None:
    """koruweb's version: the checkout's pyproject.toml beside this code, else the installed
    package's metadata; None if neither says."""
    try:
        with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as file:
            project = tomllib.load(file).get("project", {})
        if project.get("name") == "koruweb" and isinstance(project.get("version"), str):
            return str(project["version"])
    except (OSError, tomllib.TOMLDecodeError):
        pass
    try:
        return importlib.metadata.version("koruweb")
    except importlib.metadata.PackageNotFoundError:
        return None


def upgrade_reason() -> str:
    """The reason of a ``CLOSE_UPGRADE``: the protocol this server speaks and the runner to
    install, which the runner and the host print before they stop."""
    version = package_version()
    install = f"pip install 'koruweb=={version}'" if version else "pip install koruweb"
    reason = f"this koruweb server speaks runner protocol {PROTOCOL_VERSION}; install its runner: "
    reason += install
    return reason.encode()[:CLOSE_REASON_BYTES].decode(errors="ignore")


RETRY_AFTER = re.compile(r"retry in (\d{1,9}(?:\.\d{1,9})?) s\b")


def rate_reason(limit: str, seconds: float | None = None) -> str:
    """The reason of a ``CLOSE_RATE``: the limit in words, and when to try again, in whole
    seconds rounded up (or "later" when nobody knows: a socket's slot frees when one closes)."""
    when = "later" if seconds is None else f"in {max(0, math.ceil(seconds))} s"
    return f"{limit}; retry {when}".encode()[:CLOSE_REASON_BYTES].decode(errors="ignore")


def retry_after(reason: str) -> float | None:
    """The seconds a ``CLOSE_RATE``'s reason says to wait before trying again, or None."""
    found = RETRY_AFTER.search(reason)
    return float(found.group(1)) if found else None
