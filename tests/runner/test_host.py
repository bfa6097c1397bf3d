"""An agent host's side: the directories it offers (real temp dirs and symlinks), what it
refuses to start (past ``--max-runs`` too), how it hands a runner its token, chat, prompt and
title (on standard input: nothing of them on a command line or in an environment), and the
bounds of what it sends."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from activity.runner import cli, hostoptions
from activity.runner import host as host_process
from activity.runner.hostconfig import Agent
from activity.runner.hostdirs import Outside, listing, real_roots, resolve
from activity.runner.link import TOKEN_VARIABLE, RetryLater
from activity.wire.frames import CLOSE_RATE, PROTOCOL_VERSION, rate_reason
from activity.wire.hostframes import MAX_ENTRIES, HostHello, Listing, RunHandoff, Start, Started

ROOT = "/srv/projects"
HELLO = {
    "type": "host_hello",
    "protocol": PROTOCOL_VERSION,
    "name": "build-box",
    "agents": [{"name": "sdk", "command": "python sdk_agent.py"}],
    "roots": [ROOT],
}


# --- the directories a host offers -------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> dict[str, str]:
    """A root with ``app/src`` in it, a secret directory beside it, and a symlink out of it."""
    root = tmp_path / "projects"
    (root / "app" / "src").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (root / "escape").symlink_to(tmp_path / "secret")
    (root / "inside").symlink_to(root / "app")
    return real_roots([str(root)])


def the_root(roots: dict[str, str]) -> str:
    return next(iter(roots))


def test_a_normal_subdirectory_resolves_to_its_real_path(disk):
    root = the_root(disk)
    assert resolve(disk, root, "app/src") == os.path.join(disk[root], "app", "src")


def test_the_root_itself_is_offered(disk):
    root = the_root(disk)
    assert resolve(disk, root, "") == disk[root]


def test_dot_dot_out_of_a_root_is_refused_in_words(disk):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), "app/../../secret")


def test_a_symlink_out_of_a_root_is_refused(disk):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), "escape")


def test_a_symlink_that_stays_inside_the_root_is_followed(disk):
    root = the_root(disk)
    assert resolve(disk, root, "inside/src") == os.path.join(disk[root], "app", "src")


def test_an_absolute_path_elsewhere_is_refused(disk, tmp_path):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), str(tmp_path / "secret"))


def test_a_root_the_host_was_not_given_is_refused(disk, tmp_path):
    with pytest.raises(Outside, match="not one of this host's directories"):
        resolve(disk, str(tmp_path), "")


def test_a_listing_is_one_level_directories_first_without_hidden_ones_or_escapes(disk):
    root = the_root(disk)
    Path(disk[root], "Notes.md").write_text("hi")
    Path(disk[root], ".git").mkdir()
    entries, more = listing(disk, root, "")
    assert [(e.name, e.dir) for e in entries] == [
        ("app", True),
        ("inside", True),
        ("Notes.md", False),
    ]
    assert more == 0


def test_a_listing_is_bounded_and_counts_what_it_left_out(tmp_path):
    for n in range(MAX_ENTRIES + 20):
        (tmp_path / f"d{n:04}").mkdir()
    for n in range(30):
        (tmp_path / f"f{n:02}.txt").write_text("")
    roots = real_roots([str(tmp_path)])
    entries, more = listing(roots, str(tmp_path), "")
    assert len(entries) == MAX_ENTRIES and all(e.dir for e in entries)
    assert more == 50


# --- the host process refuses what it was not given -------------------------------------------


def host_with(roots: list[str], max_runs: int = 4) -> host_process.Host:
    options = hostoptions.HostOptions(
        server="ws://127.0.0.1:1",
        token="t",
        name="box",
        agents={"sdk": Agent("sdk", ["true"], "SDK agent", ["default", "auto"])},
        roots=roots,
        max_runs=max_runs,
    )
    return host_process.Host(options)


def start_frame(
    agent: str,
    root: str,
    path: str = "",
    prompt: str = "basic",
    title: str | None = None,
    token: str = "t",
) -> Start:
    return Start(
        id=uuid.uuid4(),
        agent=agent,
        root=root,
        path=path,
        chat_id=uuid.uuid4(),
        prompt=prompt,
        title=title,
        token=token,
    )


def reported(host: host_process.Host) -> list[Started]:
    return [Started.model_validate_json(text) for text in host.outbox if '"started"' in text]


async def test_the_host_refuses_an_agent_it_was_not_given_and_starts_nothing(tmp_path):
    host = host_with([str(tmp_path)])
    await host.start(start_frame("bash", str(tmp_path)))
    reported = Started.model_validate_json(host.outbox[0])
    assert reported.error is not None and "offers no agent “bash”" in reported.error
    assert "sdk" in reported.error and not host.runners


async def test_the_host_refuses_to_start_outside_its_roots(disk):
    host = host_with(list(disk))
    await host.start(start_frame("sdk", the_root(disk), "escape"))
    reported = Started.model_validate_json(host.outbox[0])
    assert reported.error is not None and "outside" in reported.error and not host.runners


def test_an_agent_command_that_is_not_there_is_a_bad_command_line(tmp_path):
    code = host_process.main(
        ["--server", "ws://x", "--token", "t", "--agent", "a=no-such-agent-xyz", "--root", "."]
    )
    assert code == 3


def test_every_string_and_list_a_host_sends_is_bounded():
    listing = {"type": "listing", "id": str(uuid.uuid4()), "root": ROOT}
    too_many = [{"name": f"d{n}", "dir": True} for n in range(MAX_ENTRIES + 1)]
    for bad in (
        {**listing, "entries": too_many},
        {**listing, "entries": [{"name": "x" * 256}]},
        {**listing, "path": "p" * 5000},
    ):
        with pytest.raises(ValidationError):
            Listing.model_validate(bad)
    with pytest.raises(ValidationError):
        HostHello.model_validate({**HELLO, "agents": [{"name": "rm -rf /", "command": "x"}]})
    with pytest.raises(ValidationError):
        HostHello.model_validate({**HELLO, "roots": []})


async def test_a_start_beyond_max_runs_is_refused_back_as_a_failed_start(tmp_path):
    host = host_with([str(tmp_path)], max_runs=2)
    host.active |= {uuid.uuid4(), uuid.uuid4()}  # two runs under way
    frame = start_frame("sdk", str(tmp_path))
    await host.start(frame)
    [refused] = reported(host)
    assert refused.id == frame.id and refused.error is not None
    assert "runs 2 runs already" in refused.error and "--max-runs 2" in refused.error
    assert frame.id not in host.active and not host.runners


def test_a_host_limited_by_the_server_waits_the_time_it_is_told_and_says_so(tmp_path, capsys):
    host = host_with([str(tmp_path)])
    reason = rate_reason("at most 5 sockets open at once per host token", 12.5)
    with pytest.raises(RetryLater) as asked:
        host.closed(CLOSE_RATE, reason)
    assert asked.value.seconds == 13
    assert f"the server limits this host (4429: {reason})" in capsys.readouterr().err


def test_the_hello_says_which_process_it_is_its_most_runs_and_the_runs_it_runs_now(tmp_path):
    host = host_with([str(tmp_path)], max_runs=3)
    running = uuid.uuid4()
    host.active.add(running)
    hello = host.hello()
    assert hello.max_runs == 3 and hello.runs == [running]
    assert hello.instance == host.instance and host_with([str(tmp_path)]).instance != host.instance


def test_the_hello_carries_each_agents_label_and_web_modes_and_an_older_hello_still_reads():
    hello = host_with(["/srv"]).hello()
    [agent] = hello.agents
    assert (agent.name, agent.label, agent.web_modes) == ("sdk", "SDK agent", ["default", "auto"])
    assert agent.command == "true"  # shown to the workspace's admins, never on New run
    older = HostHello.model_validate(HELLO)  # a host from before labels and web modes
    assert older.agents[0].label == "" and older.agents[0].web_modes == []
    newer = {**HELLO, "agents": [{"name": "sdk", "command": "x", "icon": "a field it lacks"}]}
    assert HostHello.model_validate(newer).agents[0].name == "sdk"  # fields it lacks: ignored


@pytest.mark.parametrize("path", ["a\x00b", "x" * 300], ids=["nul", "name-too-long"])
async def test_a_start_the_host_cannot_carry_out_is_reported_failed_at_once(tmp_path, path):
    host = host_with([str(tmp_path)])
    frame = start_frame("sdk", str(tmp_path), path)
    await asyncio.wait_for(host.start(frame), 5)
    [failed] = reported(host)
    assert failed.id == frame.id and failed.error and not host.active and not host.runners


def test_the_host_takes_its_token_from_koruweb_token(monkeypatch):
    monkeypatch.setenv(TOKEN_VARIABLE, "koru_from_the_environment")
    options = hostoptions.parse(["--server", "ws://x", "--agent", "a=true", "--root", "."])
    assert options.token == "koru_from_the_environment" and options.max_runs == 4
    monkeypatch.delenv(TOKEN_VARIABLE)
    with pytest.raises(hostoptions.Usage, match=TOKEN_VARIABLE):
        hostoptions.parse(["--server", "ws://x", "--agent", "a=true", "--root", "."])
    assert host_process.main(["--server", "ws://x", "--agent", "a=true", "--root", "."]) == 3


@pytest.mark.parametrize("most", ["0", "1001"])
def test_max_runs_out_of_bounds_is_a_bad_command_line(monkeypatch, most):
    monkeypatch.setenv(TOKEN_VARIABLE, "t")
    code = host_process.main(
        ["--server", "ws://x", "--agent", "a=true", "--root", ".", "--max-runs", most]
    )
    assert code == 3


# A stand-in for the runner: what it was handed on stdin, its argv and its environment go to
# the file in argv[1]'s place (``FAKE_RUNNER_OUT``), then it prints its run's page and waits.
FAKE_RUNNER = """
import json, os, sys
handed = sys.stdin.readline()
out = {"stdin": handed, "argv": sys.argv, "env": dict(os.environ), "rest": sys.stdin.read()}
with open(os.environ["FAKE_RUNNER_OUT"], "w") as f:
    json.dump(out, f)
chat = json.loads(handed)["chat_id"]
print(f"http://127.0.0.1:1/chats/{chat}/", flush=True)
sys.stdin.close()
import time
while True:
    time.sleep(1)
"""


async def test_the_runner_gets_its_token_prompt_and_title_on_stdin_never_in_argv_or_environ(
    tmp_path, monkeypatch
):
    out = tmp_path / "handed.json"
    monkeypatch.setenv("FAKE_RUNNER_OUT", str(out))
    monkeypatch.setenv(TOKEN_VARIABLE, "koru_the_hosts_own_token")
    monkeypatch.setattr(host_process, "RUNNER", [sys.executable, "-c", FAKE_RUNNER])
    host = host_with([str(tmp_path)])
    frame = start_frame(
        "sdk",
        str(tmp_path),
        prompt="the secret plan\x00 of the day",
        title="Title words",
        token="koru_the_runs_own_token",
    )
    task = asyncio.create_task(host.start(frame))
    try:
        await handed_over(host, frame, out)
    finally:
        await host.stop_runners()
        await asyncio.wait_for(task, 10)
    assert not host.active


async def handed_over(host: host_process.Host, frame: Start, out: Path) -> None:
    for _ in range(200):
        if reported(host):
            break
        await asyncio.sleep(0.05)
    [started] = reported(host)
    assert started.chat_url == f"http://127.0.0.1:1/chats/{frame.chat_id}/"
    [process] = host.runners.values()
    shown = b"".join(
        Path(f"/proc/{process.pid}/{name}").read_bytes() for name in ("cmdline", "environ")
    )
    for secret in (frame.token, "koru_the_hosts_own_token", "secret plan", "Title words"):
        assert secret.encode() not in shown, secret
    handed = json.loads(out.read_text())
    assert RunHandoff.model_validate_json(handed["stdin"]) == RunHandoff(
        token=frame.token, chat_id=frame.chat_id, prompt=frame.prompt, title=frame.title
    )
    assert handed["rest"] == "" and TOKEN_VARIABLE not in handed["env"]
    assert "--from-host" in handed["argv"] and "--prompt" not in " ".join(handed["argv"])
    argv = handed["argv"]
    assert argv[argv.index("--web-modes") + 1] == "default,auto"  # the agent's declared modes


def test_a_runner_from_a_host_reads_its_handoff_from_stdin(monkeypatch):
    chat_id = uuid.uuid4()
    handoff = RunHandoff(token="koru_run", chat_id=chat_id, prompt="do it", title="T")
    read, write = os.pipe()
    os.write(write, handoff.model_dump_json().encode() + b"\n")
    os.close(write)
    monkeypatch.setattr(sys, "stdin", os.fdopen(read, "r"))
    parsed = cli.agent_parser().parse_args(
        ["--server", "ws://x", "--from-host", "--allow-web", "--stay", "--", "agent"]
    )
    options = cli.agent_options(vars(parsed))
    assert (options.token, options.chat_id, options.prompts, options.title) == (
        "koru_run",
        chat_id,
        ["do it"],
        "T",
    )


def test_a_runner_from_a_host_without_a_handoff_is_a_usage_error(monkeypatch):
    read, write = os.pipe()
    os.write(write, b"not json\n")
    os.close(write)
    monkeypatch.setattr(sys, "stdin", os.fdopen(read, "r"))
    assert cli.agent(["--server", "ws://x", "--from-host", "--", "agent"]) == 1


# --- koruweb host --config host.toml ------------------------------------------------------------

GOOD_CONFIG = """
name = "build-box"
max_runs = 2
roots = ["code", "~"]

[agents.demo]
label = "Demo agent"
command = "python3 tools/agent.py --fast"
web_modes = ["default", "auto"]

[agents.plain]
command = ["python3", "-c", "pass"]
"""


def write_config(tmp_path: Path, text: str) -> str:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "tools").mkdir(exist_ok=True)
    (tmp_path / "tools" / "agent.py").write_text("")
    path = tmp_path / "host.toml"
    path.write_text(text)
    return str(path)


def test_a_config_file_declares_the_hosts_name_roots_and_agents_with_labels_and_web_modes(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # relative paths are taken from where the host starts
    config = write_config(tmp_path, GOOD_CONFIG)
    options = hostoptions.parse(["--server", "ws://x", "--token", "t", "--config", config])
    assert (options.name, options.max_runs) == ("build-box", 2)
    assert options.roots == [str(tmp_path / "code"), os.path.expanduser("~")]
    demo, plain = options.agents["demo"], options.agents["plain"]
    python3 = shutil.which("python3")
    # Made absolute: a run works in a directory of its own.
    assert demo.command == [python3, str(tmp_path / "tools" / "agent.py"), "--fast"]
    assert (demo.label, demo.web_modes) == ("Demo agent", ["default", "auto"])
    assert (plain.label, plain.web_modes, plain.command[1:]) == ("", [], ["-c", "pass"])
    flags = ["--name", "other", "--max-runs", "3"]  # the command line wins over the file
    options = hostoptions.parse(["--server", "ws://x", "--token", "t", "--config", config, *flags])
    assert (options.name, options.max_runs) == ("other", 3)


BAD_CONFIGS = {
    "not-toml": ("roots = [", "not TOML"),
    "unknown-key": ("root = 'x'\n" + GOOD_CONFIG, "host.toml: root: unknown key"),
    "unknown-agent-key": (
        GOOD_CONFIG.replace('label = "Demo agent"', 'mode = "auto"'),
        "host.toml: agents.demo.mode: unknown key (it takes: label, command, web_modes)",
    ),
    "max-runs-type": (
        GOOD_CONFIG.replace("max_runs = 2", 'max_runs = "2"'),
        "host.toml: max_runs: give a whole number from 1 to 1000",
    ),
    "no-command": (
        GOOD_CONFIG.replace('command = ["python3", "-c", "pass"]', 'label = "Plain"'),
        "host.toml: agents.plain.command: missing",
    ),
    "command-not-found": (
        GOOD_CONFIG.replace("python3 tools", "no-such-agent-acp tools"),
        "host.toml: agents.demo.command: the command 'no-such-agent-acp' was not found",
    ),
    "command-type": (
        GOOD_CONFIG.replace('["python3", "-c", "pass"]', "42"),
        "host.toml: agents.plain.command: give a string or a list of strings",
    ),
    "root-not-a-directory": (
        GOOD_CONFIG.replace('"code"', '"tools/agent.py"'),
        "host.toml: roots[0]: 'tools/agent.py' is not a directory",
    ),
    "no-roots": (GOOD_CONFIG.replace('roots = ["code", "~"]', ""), "host.toml: roots: missing"),
    "no-agents": ('roots = ["code"]', "host.toml: agents: missing"),
    "web-modes-type": (
        GOOD_CONFIG.replace('["default", "auto"]', '"auto"'),
        "host.toml: agents.demo.web_modes: give a list of the agent's mode ids",
    ),
    "label-type": (
        GOOD_CONFIG.replace('"Demo agent"', "true"),
        "host.toml: agents.demo.label: give one line of at most 100 characters",
    ),
    "agent-name": (
        GOOD_CONFIG.replace("[agents.plain]", '[agents."rm -rf"]'),
        "host.toml: agents.rm -rf: an agent's name is letters, digits and ._-",
    ),
}


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=list(BAD_CONFIGS))
def test_a_bad_config_file_is_a_bad_command_line_naming_the_file_and_the_key(
    tmp_path, monkeypatch, capsys, case
):
    monkeypatch.chdir(tmp_path)
    text, said = BAD_CONFIGS[case]
    config = write_config(tmp_path, text)
    assert host_process.main(["--server", "ws://x", "--token", "t", "--config", config]) == 3
    err = capsys.readouterr().err
    assert said in err and config in err, err


def test_a_missing_config_file_and_a_config_mixed_with_agent_flags_are_refused(tmp_path, capsys):
    missing = str(tmp_path / "nowhere.toml")
    assert host_process.main(["--server", "ws://x", "--token", "t", "--config", missing]) == 3
    assert f"{missing}: no such file" in capsys.readouterr().err
    config = write_config(tmp_path, GOOD_CONFIG)
    mixed = ["--config", config, "--agent", "a=true"]
    assert host_process.main(["--server", "ws://x", "--token", "t", *mixed]) == 3
    assert "not with --agent or --root" in capsys.readouterr().err
    assert host_process.main(["--server", "ws://x", "--token", "t"]) == 3
    assert "give --config host.toml, or --agent NAME=COMMAND and --root DIR" in (
        capsys.readouterr().err
    )
