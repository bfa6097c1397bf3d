"""What a runner is asked to do (``koruweb agent``'s command line, made by ``cli.py``, or a
host's handoff), and the page of its run."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from activity.wire.hostframes import Resume


@dataclass
class Options:
    server: str
    token: str
    command: list[str]
    title: str | None = None
    cwd: str = field(default_factory=os.getcwd)
    mode: str | None = None
    connect_timeout: float = 30.0
    prompts: list[str] = field(default_factory=list)
    allow_web: bool = False  # take prompts, cancels and mode switches from the web
    web_modes: list[str] = field(default_factory=list)  # the modes the web may switch to
    stay: bool = False  # with prompts: keep serving the web once they have run
    chat_id: uuid.UUID | None = None  # the run's chat, when a host was told it (else a new one)
    from_host: bool = False  # started by a host: its page is printed once the session started
    # Take chat ``chat_id``'s agent session up again (``--resume``, or a host's Resume) rather
    # than start one: its session id and the chat's secret now (docs/protocol.md#resuming-a-run).
    resume: Resume | None = None
    resume_secret: str | None = None  # the chat's secret once resumed, kept before the hello

    @property
    def stays(self) -> bool:
        """Whether the runner keeps serving the web once its own prompts are done."""
        return self.allow_web and (self.stay or not self.prompts)


def page_url(server: str, chat_id: uuid.UUID) -> str:
    base = server.rstrip("/")
    base = "https://" + base[6:] if base.startswith("wss://") else base
    base = "http://" + base[5:] if base.startswith("ws://") else base
    return f"{base}/chats/{chat_id}/"
