"""``koruweb``: the runner's command, which installs without the server (``pip install
koruweb``: no Django, no database).

    koruweb agent --server ws://HOST:PORT --token TOKEN [options] -- AGENT_COMMAND [ARGS...]
    KORUWEB_TOKEN=HOST_TOKEN koruweb host --server ws://HOST:PORT --agent NAME=COMMAND --root DIR

``agent`` runs an ACP agent and streams its turns to koruweb (``main.py``); ``host`` offers
agents to start from the web (``host.py``). In a checkout of the server, ``manage.py agent`` and
``manage.py agent host`` are the same commands (the management command is built from
``add_agent_arguments`` and ``agent_options``). ``python -m activity.runner.cli`` is ``koruweb``
too: the host starts its runners that way, with the interpreter it runs on.

Exit codes: those of ``main.py`` and ``host.py``; for ``agent``, 2 for a command line argparse
refuses and 1 for one it takes that still cannot run (no agent command, a ``--server`` that is
no ws:// URL, no token), as ``manage.py agent`` has always exited.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from activity.runner import host, saved
from activity.runner.link import TOKEN_VARIABLE, say
from activity.runner.main import run
from activity.runner.options import Options
from activity.runner.web import MAX_MODES, NAME_CHARS
from activity.wire.frames import PROTOCOL_VERSION, package_version
from activity.wire.hostframes import HANDOFF_BYTES, Resume, RunHandoff

AGENT_HELP = (
    "Run an ACP agent and stream it to koruweb: "
    "agent --server ws://HOST:PORT --token TOKEN [options] -- AGENT_COMMAND [ARGS...]"
)
USAGE = """\
usage: koruweb agent --server ws://HOST:PORT --token TOKEN [options] -- AGENT_COMMAND [ARGS...]
       KORUWEB_TOKEN=HOST_TOKEN koruweb host --server ws://HOST:PORT --agent NAME=COMMAND --root DIR

  agent   run an ACP agent and stream its turns to koruweb
  host    offer agents to start from the web, on this machine

koruweb agent --help and koruweb host --help say more."""


class Usage(Exception):
    """A command line argparse takes that still cannot run: said, exit 1."""


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """``koruweb agent``'s flags (and ``manage.py agent``'s)."""
    parser.add_argument("--server", required=True, help="ws://HOST:PORT of koruweb")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_VARIABLE) or None,
        help=f"an agent token of the workspace (or in ${TOKEN_VARIABLE}, kept out of ps)",
    )
    parser.add_argument("--title", help="the run's title (default: the first prompt)")
    parser.add_argument(
        "--cwd", help="the agent's working directory (default: here; with --resume, the run's)"
    )
    parser.add_argument("--mode", help="a session mode, e.g. 'default' to be asked")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument(
        "--prompt", action="append", default=[], help="a turn's prompt (repeatable)"
    )
    web = parser.add_argument_group(
        "driving from the web",
        "People with the approver or admin role may prompt the agent from the run's page, "
        "cancel its turn and switch its mode, only when the runner allows it.",
    )
    web.add_argument(
        "--allow-web",
        action="store_true",
        help="take prompts, cancels and mode switches from the web (off by default); "
        "without --prompt, prompts come from standard input and from the web, and the "
        "runner keeps serving the web when its input ends (until Ctrl-C)",
    )
    web.add_argument(
        "--web-modes",
        type=mode_list,
        default=[],
        metavar="MODE,MODE",
        help="the agent's modes the web may switch to (default: none); a mode that "
        "bypasses permissions (claude's bypassPermissions, codex's full-access, gemini's "
        "yolo, copilot's …#autopilot) is offered only if listed here",
    )
    web.add_argument(
        "--stay",
        action="store_true",
        help="with --prompt: keep serving the web after those prompts instead of exiting",
    )
    parser.add_argument(
        "--from-host",
        action="store_true",
        help="read the token, the chat, the first prompt and the title from the first line of "
        "standard input, as `koruweb host` hands them (JSON): none of them on the command line "
        "or in the environment",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN",
        help="take a run that ran on this machine up again (its id or page address): the same "
        "agent session in the same run, once its runner is gone; the agent's command and "
        "directory default to the run's",
    )
    parser.add_argument("agent_command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")


def agent_options(parsed: Mapping[str, Any]) -> Options:
    """The runner's options from ``add_agent_arguments``' parsed flags; ``Usage`` if they
    cannot run."""
    command = list(parsed["agent_command"])
    if command and command[0] == "--":
        command = command[1:]
    server = parsed["server"]
    if not server.startswith(("ws://", "wss://")):
        raise Usage(f"--server {server!r}: use ws://HOST:PORT or wss://HOST")
    token, prompts, title = parsed["token"], parsed["prompt"], parsed["title"]
    cwd, chat_id, resume, resume_secret = parsed["cwd"], None, None, None
    if parsed.get("resume"):
        if parsed.get("from_host"):
            raise Usage("--resume and --from-host: a host says which run to resume")
        try:
            kept = saved.load(parsed["resume"])
        except saved.NotSaved as missing:
            raise Usage(str(missing)) from None
        if server.rstrip("/") != kept.server.rstrip("/"):
            raise Usage(f"--resume: that run ran on {kept.server}; give --server {kept.server}")
        command, cwd = command or kept.command, cwd or kept.cwd
        chat_id = uuid.UUID(kept.chat_id)
        resume = Resume(session_id=kept.session_id, secret=kept.secret, base=kept.base or None)
        resume_secret = kept.pending or secrets.token_urlsafe(32)
        try:  # kept before the hello: a resume that fails after it is retried with it
            saved.save(dataclasses.replace(kept, pending=resume_secret))
        except OSError as error:
            raise Usage(f"--resume: cannot keep the run's new secret: {error}") from None
    if not command:
        raise Usage("give the agent's command after --, e.g. -- claude-agent-acp")
    handoff = from_host() if parsed.get("from_host") else None
    if handoff is not None:
        token, title = handoff.token, handoff.title or title
        prompts = [handoff.prompt] if handoff.prompt else []
        chat_id, resume = handoff.chat_id, handoff.resume
    if not token:
        raise Usage(f"give an agent token: --token TOKEN, or ${TOKEN_VARIABLE}")
    for flag in ("web_modes", "stay"):
        if parsed[flag] and not parsed["allow_web"]:
            raise Usage(f"--{flag.replace('_', '-')} needs --allow-web")
    return Options(
        server=server,
        token=token,
        command=command,
        title=title,
        cwd=cwd or ".",
        mode=parsed["mode"],
        connect_timeout=parsed["connect_timeout"],
        prompts=prompts,
        allow_web=parsed["allow_web"],
        web_modes=parsed["web_modes"],
        stay=parsed["stay"],
        chat_id=chat_id,
        from_host=handoff is not None,
        resume=resume,
        resume_secret=resume_secret,
    )


def from_host() -> RunHandoff:
    """The first line of standard input, as the host that starts this runner hands it
    (``hostframes.RunHandoff``); ``Usage`` if it is not one."""
    line = sys.stdin.buffer.readline(HANDOFF_BYTES)
    try:
        return RunHandoff.model_validate_json(line)
    except ValidationError as error:
        where = ".".join(str(part) for part in error.errors()[0]["loc"]) or "line"
        raise Usage(
            f"--from-host: standard input's first line is no host's handoff ({where})"
        ) from None


def mode_list(text: str) -> list[str]:
    """``--web-modes a,b``: mode ids as the agent names them (checked against its modes once
    its session has started)."""
    modes = list(dict.fromkeys(mode.strip() for mode in text.split(",") if mode.strip()))
    if len(modes) > MAX_MODES or any(len(mode) > NAME_CHARS for mode in modes):
        raise argparse.ArgumentTypeError(
            f"at most {MAX_MODES} modes of at most {NAME_CHARS} characters each"
        )
    return modes


def agent_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koruweb agent", description=AGENT_HELP)
    add_agent_arguments(parser)
    return parser


def agent(argv: Sequence[str]) -> int:
    """``koruweb agent``: its exit code."""
    try:
        parsed = agent_parser().parse_args(argv)
    except SystemExit as stop:  # --help (0), or a command line argparse refuses (2)
        return stop.code if isinstance(stop.code, int) else 2
    try:
        options = agent_options(vars(parsed))
    except Usage as usage:
        say(str(usage))
        return 1
    return run(options)


def main(argv: list[str] | None = None) -> int:
    """``koruweb``: its exit code."""
    words = sys.argv[1:] if argv is None else argv
    match words[:1]:
        case ["agent"]:
            return agent(words[1:])
        case ["host"]:
            return host.main(words[1:], prog="koruweb host")
        case ["-h"] | ["--help"]:
            print(USAGE)
            return 0
        case ["--version"]:
            version = package_version() or "(version unknown)"
            print(f"koruweb {version}, runner protocol {PROTOCOL_VERSION}")
            return 0
    said = f"no such command {words[0]!r}\n" if words else ""
    print(f"koruweb: {said}{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
