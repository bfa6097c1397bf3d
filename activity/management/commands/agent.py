from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from activity.runner import host
from activity.runner.main import Options, run


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
        parser.add_argument("--token", required=True, help="an agent token of the workspace")
        parser.add_argument("--title", help="the run's title (default: the first prompt)")
        parser.add_argument("--cwd", default=".", help="the agent's working directory")
        parser.add_argument("--mode", help="a session mode, e.g. 'default' to be asked")
        parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS")
        parser.add_argument(
            "--prompt", action="append", default=[], help="a turn's prompt (repeatable)"
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
            )
        )
        if code:
            raise SystemExit(code)
