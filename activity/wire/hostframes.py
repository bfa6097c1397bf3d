"""The frames between an agent host and the server over ``/ws/host/`` (issue 16: start a run
from the web on your own machine). JSON objects, each with a ``type``; every string and list
is bounded.

Host → server: ``host_hello`` first (its name, the agents it offers, its roots); then a
``listing`` of a directory it was asked for, ``started`` when a runner it started has its chat
(or could not start), ``exited`` when that runner ends.

Server → host: ``welcome`` (the hello was taken), ``list`` (one level of ``path`` under
``root``), ``start`` (run one of its agents in ``path`` under ``root`` with a first prompt,
as a runner with the per-run agent ``token``).

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

from activity.wire.frames import PROTOCOL_VERSION

MAX_ENTRIES = 300  # the most entries one listing carries (directories first)
MAX_AGENTS = 50
MAX_ROOTS = 50
PATH_CHARS = 4096  # PATH_MAX on Linux
FIRST_PROMPT_CHARS = 30_000  # a command-line argument: 4 bytes a character stays under 128 KiB
TOKEN_CHARS = 200

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
    """One agent the host offers: its name, and its command line as shown to people."""

    name: AgentName
    command: Annotated[StrictStr, Field(max_length=1000)] = ""


class HostHello(Strict):
    """``protocol``: the host's ``frames.PROTOCOL_VERSION`` (the runner's, which it starts); the
    server refuses a hello of any other, or of none (``frames.CLOSE_UPGRADE``)."""

    type: Literal["host_hello"] = "host_hello"
    protocol: StrictInt = PROTOCOL_VERSION
    name: HostName
    agents: Annotated[list[HostAgent], Field(min_length=1, max_length=MAX_AGENTS)]
    roots: Annotated[list[Root], Field(min_length=1, max_length=MAX_ROOTS)]


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


class Start(Strict):
    type: Literal["start"] = "start"
    id: UUID4
    agent: AgentName
    root: Root
    path: Path = ""
    prompt: Annotated[StrictStr, Field(min_length=1, max_length=FIRST_PROMPT_CHARS)]
    title: Annotated[StrictStr, Field(max_length=200)] | None = None
    token: Annotated[StrictStr, Field(min_length=1, max_length=TOKEN_CHARS)] = Field(repr=False)


ServerToHost = Welcome | ListDir | Start
to_host: TypeAdapter[ServerToHost] = TypeAdapter(
    Annotated[ServerToHost, Field(discriminator="type")]
)
