from __future__ import annotations

import argparse
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from activity.runner import host
from activity.runner.link import TOKEN_VARIABLE
from activity.runner.main import Options, run
from activity.runner.web import MAX_MODES, NAME_CHARS


class Command(BaseCommand):
    help = (
        "Run an ACP agent and stream it to koruweb: "
        "agent --server ws://HOST:PORT --token TOKEN [options] -- AGENT_COMMAND [ARGS...]"
    )
    # The runner needs no database, no migrations and no checks: it runs on a laptop.
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def run_from_argv(self, argv: list[str]) -> None:
        if argv[2:3] == ["host"]:  # manage.py agent host …: offer agents to start from the web
            raise SystemExit(host.main(argv[3:]))
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--server", required=True, help="ws://HOST:PORT of koruweb")
        parser.add_argument(
            "--token",
            default=os.environ.get(TOKEN_VARIABLE) or None,
            help=f"an agent token of the workspace (or in ${TOKEN_VARIABLE}, kept out of ps)",
        )
        parser.add_argument("--title", help="the run's title (default: the first prompt)")
        parser.add_argument("--cwd", default=".", help="the agent's working directory")
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
            "yolo) is offered only if listed here",
        )
        web.add_argument(
            "--stay",
            action="store_true",
            help="with --prompt: keep serving the web after those prompts instead of exiting",
        )
        parser.add_argument("agent_command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["agent_command"]
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            raise CommandError("give the agent's command after --, e.g. -- claude-agent-acp")
        server = options["server"]
        if not server.startswith(("ws://", "wss://")):
            raise CommandError(f"--server {server!r}: use ws://HOST:PORT or wss://HOST")
        if not options["token"]:
            raise CommandError(f"give an agent token: --token TOKEN, or ${TOKEN_VARIABLE}")
        for flag in ("web_modes", "stay"):
            if options[flag] and not options["allow_web"]:
                raise CommandError(f"--{flag.replace('_', '-')} needs --allow-web")
        code = run(
            Options(
                server=server,
                token=options["token"],
                command=command,
                title=options["title"],
                cwd=options["cwd"],
                mode=options["mode"],
                connect_timeout=options["connect_timeout"],
                prompts=options["prompt"],
                allow_web=options["allow_web"],
                web_modes=options["web_modes"],
                stay=options["stay"],
            )
        )
        if code:
            raise SystemExit(code)


def mode_list(text: str) -> list[str]:
    """``--web-modes a,b``: mode ids as the agent names them (checked against its modes once
    its session has started)."""
    modes = list(dict.fromkeys(mode.strip() for mode in text.split(",") if mode.strip()))
    if len(modes) > MAX_MODES or any(len(mode) > NAME_CHARS for mode in modes):
        raise argparse.ArgumentTypeError(
            f"at most {MAX_MODES} modes of at most {NAME_CHARS} characters each"
        )
    return modes
