"""The fake of this vendor's model API (see fakeapi.py). To be written."""

from __future__ import annotations

from pathlib import Path

from tests.agents.real.fakeapi import FakeModels, Reply, Request

COMMAND = ["claude-agent-acp"]


def environment(model_url: str, home: Path) -> dict[str, str]:
    raise NotImplementedError


def handle(fake: FakeModels, request: Request) -> Reply:
    return Reply.json({"error": "not written yet"}, status=501)
