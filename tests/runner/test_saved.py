"""What a runner keeps for ``koruweb agent --resume`` (activity/runner/saved.py) and how the
command line reads it: the file is the owner's alone, the new secret is kept before the hello
(a resume that fails after it is retried with the same one), and the run resumes only against
the server it ran on."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import pytest

from activity.runner import cli, saved
from activity.runner.options import Options

SERVER = "ws://127.0.0.1:8000"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KORUWEB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def kept_run(chat_id: uuid.UUID, cwd: Path) -> None:
    options = Options(server=SERVER, token="t", command=["claude-agent-acp"], cwd=str(cwd))
    saved.keep(chat_id, options, "sess-1", "s" * 43, "a" * 40)


def resume_options(ref: str, *more: str) -> Options:
    parsed = cli.agent_parser().parse_args(
        ["--server", SERVER, "--token", "t", "--resume", ref, *more]
    )
    return cli.agent_options(vars(parsed))


def test_a_kept_run_is_the_owners_alone_and_names_what_a_resume_needs(state, tmp_path):
    chat_id = uuid.uuid4()
    kept_run(chat_id, tmp_path)
    path = state / "runs" / f"{chat_id}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["session_id"] == "sess-1"


def test_resume_takes_the_runs_command_and_directory_and_keeps_its_new_secret_first(
    state, tmp_path
):
    chat_id = uuid.uuid4()
    kept_run(chat_id, tmp_path)
    options = resume_options(f"http://127.0.0.1:8000/chats/{chat_id}/")
    assert options.chat_id == chat_id and options.command == ["claude-agent-acp"]
    assert options.cwd == str(tmp_path)
    assert options.resume is not None and options.resume.secret == "s" * 43
    assert options.resume.session_id == "sess-1" and options.resume.base == "a" * 40
    pending = json.loads((state / "runs" / f"{chat_id}.json").read_text())["pending"]
    assert options.resume_secret == pending and len(pending) >= 32
    # the runner died after the server took the resume: the next one gives the same secret
    assert resume_options(str(chat_id)).resume_secret == pending


def test_resume_refuses_another_server_and_a_run_that_did_not_run_here(state, tmp_path):
    chat_id = uuid.uuid4()
    kept_run(chat_id, tmp_path)
    parsed = cli.agent_parser().parse_args(
        ["--server", "ws://elsewhere:8000", "--token", "t", "--resume", str(chat_id)]
    )
    with pytest.raises(cli.Usage, match="that run ran on ws://127.0.0.1:8000"):
        cli.agent_options(vars(parsed))
    with pytest.raises(cli.Usage, match="did not run on this machine"):
        resume_options(str(uuid.uuid4()))
    with pytest.raises(cli.Usage, match="give the run's id or its page's address"):
        resume_options("yesterday's run")
