"""The frames between an agent host and the server over ``/ws/host/`` (issue 16: start a run
from the web on your own machine). JSON objects, each with a ``type``; every string and list
is bounded.

Host → server: ``host_hello`` first (its name, the agents it offers with their labels and web
modes, its roots, the most runs it runs at once and the runs it runs now); then a ``listing``
of a directory it was asked for, ``started`` when a runner it started has its chat (or could not
start), ``exited`` when that runner ends.

Server → host: ``welcome`` (the hello was taken), ``list`` (one level of ``path`` under
``root``), ``start`` (run one of its agents in ``path`` under ``root`` with a first prompt,
as a runner of chat ``chat_id`` with the per-run agent ``token``, which is good for that chat
only). The host hands its runner the token, the chat, the prompt and the title as one
``RunHandoff`` line on the runner's standard input, never on its command line or in its
environment (docs/protocol.md#the-hosts-socket).

A ``path`` is relative to its ``root`` ("" is the root itself); the host resolves it (symlinks
too) and refuses whatever is outside its roots. The host runs nothing but the commands it was
started with. Close codes are ``frames.CLOSE_*``: 4401 (not a host token, or revoked), 4403 and
4426 (a hello of another protocol) stop the host (exit 2).
"""

from __future__ import annotations

from typing import Annotated, Literal

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

from activity.wire.frames import PROTOCOL_VERSION, SESSION_ID_CHARS, Secret, TreeId

MAX_ENTRIES = 300  # the most entries one listing carries (directories first)
MAX_AGENTS = 50
MAX_ROOTS = 50
PATH_CHARS = 4096  # PATH_MAX on Linux
FIRST_PROMPT_CHARS = 30_000  # what the New run form takes; the runner reads it on its stdin
TITLE_CHARS = 200
TOKEN_CHARS = 200
MAX_RUNS = 1000  # the most runs a host may run at once (``koruweb host --max-runs``)
HANDOFF_BYTES = 1024 * 1024  # a runner's first line from its host: a prompt escaped 6 bytes a char
INSTANCE_CHARS = 64
LABEL_CHARS = 100  # an agent's name for people ("Claude Code")
MODE_CHARS, MAX_MODES = 100, 50  # frames.SessionInfo's bounds on mode ids

AgentName = Annotated[
    StrictStr, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
HostName = Annotated[StrictStr, Field(min_length=1, max_length=100)]
Path = Annotated[StrictStr, Field(max_length=PATH_CHARS)]
Root = Annotated[StrictStr, Field(min_length=1, max_length=PATH_CHARS)]
Said = Annotated[StrictStr, Field(max_length=2000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class HostAgent(Strict):
    """One agent the host offers: its name (the id ``start`` names), its command line (shown on
    the workspace's page to its admins), the name people pick it by (``label``; "" for a host
    older than it, or an agent declared with a flag: its name stands in) and the modes the web
    may switch its runs to (``web_modes``, passed to its runners as ``--web-modes``; [] for an
    older host). Both are optional: a server older than them ignores them."""

    name: AgentName
    command: Annotated[StrictStr, Field(max_length=1000)] = ""
    label: Annotated[StrictStr, Field(max_length=LABEL_CHARS)] = ""
    web_modes: Annotated[
        list[Annotated[StrictStr, Field(min_length=1, max_length=MODE_CHARS)]],
        Field(max_length=MAX_MODES),
    ] = []


class HostHello(Strict):
    """``protocol``: the host's ``frames.PROTOCOL_VERSION`` (the runner's, which it starts); the
    server refuses a hello of any other, or of none (``frames.CLOSE_UPGRADE``).

    ``instance``: made once per host process, so the server tells the same host reconnecting
    from a second host of the same name (refused while the first is online). ``max_runs``: the
    most runs it runs at once (``--max-runs``); it refuses a start beyond them. ``runs``: the
    ids of the ``start``s it runs now (starting or started): a run the server counts as running
    and this list leaves out has ended while the host was away, and its token is revoked. None
    (a host older than these fields): nothing is known, nothing is revoked."""

    type: Literal["host_hello"] = "host_hello"
    protocol: StrictInt = PROTOCOL_VERSION
    name: HostName
    agents: Annotated[list[HostAgent], Field(min_length=1, max_length=MAX_AGENTS)]
    roots: Annotated[list[Root], Field(min_length=1, max_length=MAX_ROOTS)]
    instance: Annotated[StrictStr, Field(min_length=1, max_length=INSTANCE_CHARS)] | None = None
    max_runs: Annotated[StrictInt, Field(ge=1, le=MAX_RUNS)] | None = None
    runs: Annotated[list[UUID4], Field(max_length=MAX_RUNS)] | None = None


class Entry(Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=255)]
    dir: StrictBool = False


class Listing(Strict):
    """One level of ``path`` under ``root`` (the ``list`` it answers has ``id``): directories
    first; ``more`` entries were left out past ``MAX_ENTRIES``. ``error``: why not."""

    type: Literal["listing"] = "listing"
    id: UUID4
    root: Root
    path: Path = ""
    entries: Annotated[list[Entry], Field(max_length=MAX_ENTRIES)] = []
    more: Annotated[StrictInt, Field(ge=0, le=2**31)] = 0
    error: Said | None = None


class Started(Strict):
    """The runner for ``start`` ``id`` has its chat (``chat_url``, the runner's first line),
    or could not start (``error``)."""

    type: Literal["started"] = "started"
    id: UUID4
    chat_url: Annotated[StrictStr, Field(max_length=2000)] | None = None
    error: Said | None = None


class Exited(Strict):
    type: Literal["exited"] = "exited"
    id: UUID4
    code: Annotated[StrictInt, Field(ge=-(2**31), le=2**31)]


HostFrameType = Listing | Started | Exited
host_frame: TypeAdapter[HostFrameType] = TypeAdapter(
    Annotated[HostFrameType, Field(discriminator="type")]
)


class Welcome(Strict):
    type: Literal["welcome"] = "welcome"
    page: Annotated[StrictStr, Field(max_length=2000)] = ""  # the workspace's page


class ListDir(Strict):
    type: Literal["list"] = "list"
    id: UUID4
    root: Root
    path: Path = ""


Prompt = Annotated[StrictStr, Field(min_length=1, max_length=FIRST_PROMPT_CHARS)]
Title = Annotated[StrictStr, Field(max_length=TITLE_CHARS)]
Token = Annotated[StrictStr, Field(min_length=1, max_length=TOKEN_CHARS)]


class Resume(Strict):
    """A run to take up again: the agent's session, and the chat's secret (which the server
    made when a person pressed Resume; the runner replaces it with its own at once)."""

    session_id: Annotated[StrictStr, Field(min_length=1, max_length=SESSION_ID_CHARS)]
    secret: Secret = Field(repr=False)
    base: TreeId | None = None  # the run's first snapshot: its whole change counts from it


class Start(Strict):
    """Start a runner of chat ``chat_id`` (the server makes the id: the run's ``token`` is good
    for that chat only) with a first ``prompt``; or, with ``resume``, a runner that takes the
    chat's agent session up again (no prompt: it waits for the web's)."""

    type: Literal["start"] = "start"
    id: UUID4
    agent: AgentName
    root: Root
    path: Path = ""
    chat_id: UUID4
    prompt: Prompt | None = Field(default=None, repr=False)
    title: Title | None = Field(default=None, repr=False)
    token: Token = Field(repr=False)
    resume: Resume | None = None


class RunHandoff(Strict):
    """What a host hands the runner it starts, as the first line of the runner's standard input
    (``koruweb agent --from-host``): nothing of it is on the runner's command line or in its
    environment, where ``ps`` and ``/proc/<pid>/environ`` would show it."""

    token: Token = Field(repr=False)
    chat_id: UUID4
    prompt: Prompt | None = Field(default=None, repr=False)
    title: Title | None = Field(default=None, repr=False)
    resume: Resume | None = None


ServerToHost = Welcome | ListDir | Start
to_host: TypeAdapter[ServerToHost] = TypeAdapter(
    Annotated[ServerToHost, Field(discriminator="type")]
)
