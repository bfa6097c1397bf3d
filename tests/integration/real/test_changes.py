"""The whole change of a run with the real claude-agent-acp, offline against the fake Anthropic
API, in a git working tree whose hooks, fsmonitor and filters would write a file if anything ran
them: the run's diff is the change against its start (docs/protocol.md#the-whole-change)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from activity.models import Chat, InferenceAttempt, Prompt, TurnDiff
from tests.agents.real import anthropic
from tests.agents.real.fakeapi import Call, FakeModels, Say
from tests.agents.real.harness import RealRun, WebUser, eventually, isolated_env
from tests.liveserver import Server

pytestmark = pytest.mark.django_db(transaction=True)
SECONDS = 60
# Each trap logs who ran git: the first process above it that is not git itself (claude runs
# git for its own context, and its git runs filters; the runner's never may).
TRAP = """#!/bin/sh
pid=$PPID
while :; do
  cmd=$(tr '\\0' ' ' < /proc/$pid/cmdline)
  case "${{cmd%% *}}" in
    */git|git|/bin/sh|sh) pid=$(awk '/^PPid:/ {{print $2}}' /proc/$pid/status) ;;
    *) break ;;
  esac
done
echo "$cmd" >> {log}
case "$1" in --filter) cat ;; --textconv) cat "$2" ;; esac
"""


def git(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Ann", "-c", "user.email=ann@example.com", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def repository(project: Path, log: Path) -> None:
    """The project under git, its every trap set: hooks (by core.hooksPath), an fsmonitor, a
    clean filter and a textconv, each of which logs who ran git if anything runs it."""
    (project / "doomed.txt").write_text("gone soon\n")
    (project / ".gitattributes").write_text("*.txt filter=trap diff=trap\n")
    hooks = project / ".hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-index-change", "post-checkout", "fsmonitor", "trap"):
        (hooks / hook).write_text(TRAP.format(log=log))
        (hooks / hook).chmod(0o755)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "start")
    for key, value in (
        ("core.hooksPath", ".hooks"),
        ("core.fsmonitor", str(hooks / "fsmonitor")),
        ("filter.trap.clean", f"{hooks / 'trap'} --filter"),
        ("diff.trap.textconv", f"{hooks / 'trap'} --textconv"),
    ):
        git(project, "config", key, value)
    git(project, "status", "--porcelain")  # the traps work: this git is this test's
    assert log.exists() and log.read_text().strip(), "the traps never ran"
    log.unlink()


def test_a_claude_runs_whole_change_is_its_diff_against_the_start_and_nothing_in_git_runs(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    approver: WebUser,
    project: Path,
    tmp_path: Path,
) -> None:
    log = tmp_path / "who-ran-git.log"
    repository(project, log)
    index = (project / ".git" / "index").read_bytes()
    home = tmp_path / "home"
    env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
    flags = ("--cwd", str(project), "--mode", "acceptEdits")
    run = RealRun(
        koruweb_server.ws_url, agent_token, list(anthropic.COMMAND), env, *flags, stdin=True
    )
    try:
        tag = fake_models.script(
            Call("Write", {"file_path": str(project / "new.txt"), "content": "brand new\n"}),
            Call("Read", {"file_path": str(project / "notes.txt")}),  # claude edits what it read
            Call(
                "Edit",
                {
                    "file_path": str(project / "notes.txt"),
                    "old_string": "second line",
                    "new_string": "second line, edited",
                },
            ),
            Call("Bash", {"command": "rm doomed.txt", "description": "Remove the doomed file"}),
            Say("Three changes."),
        )
        run.send(f"Change the project {tag}")

        def changed() -> TurnDiff | None:
            """The turn's changes, once it ended; every permission claude asks for, allowed."""
            assert run.process.poll() is None, run.stderr[-4000:]
            for prompt in Prompt.objects.filter(chat_id=run.chat_id, closed_at=None):
                if prompt.answered_at is None:
                    approver.choose(prompt, "allow_once")
            return TurnDiff.objects.filter(chat_id=run.chat_id).first()

        diff = eventually(changed, SECONDS, "the turn's changes")
        turn = InferenceAttempt.objects.get(pk=diff.attempt_id)
        assert tag in turn.prompt and turn.stop_reason == "end_turn"
        files = {file["path"]: (file["added"], file["removed"]) for file in diff.run_files}
        assert files == {"new.txt": (1, 0), "notes.txt": (1, 1), "doomed.txt": (0, 1)}
        assert diff.turn_files == diff.run_files  # one turn: the run's change is the turn's
        assert "+brand new" in diff.run_diff and "+second line, edited" in diff.run_diff
        assert "deleted file mode" in diff.run_diff and "-gone soon" in diff.run_diff
        assert (diff.run_cut_bytes, diff.skipped) == (0, 0)
        chat = Chat.objects.get(pk=run.chat_id)
        assert chat.changed == {"files": 3, "added": 2, "removed": 2}
        assert turn.changed == chat.changed and len(chat.changes_base) == 40

        ran = log.read_text().splitlines() if log.exists() else []  # claude runs git itself
        assert not [line for line in ran if "manage.py" in line], ran  # the runner's git: none
        assert (project / ".git" / "index").read_bytes() == index  # the user's index untouched
        assert (
            git(project, "stash", "list") == "" and git(project, "log", "--format=%s") == "start\n"
        )
        code, err = run.finish()
        assert code == 0, err
    finally:
        if run.process.poll() is None:
            run.kill()
