"""``manage.py agent`` and ``manage.py agent host``: ``koruweb agent`` and ``koruweb host`` in a
checkout of the server (``activity/runner/cli.py``), with the same flags, help and exit codes."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from activity.runner import cli, host
from activity.runner.main import run


class Command(BaseCommand):
    help = cli.AGENT_HELP
    # The runner needs no database, no migrations and no checks: it runs on a laptop.
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def run_from_argv(self, argv: list[str]) -> None:
        if argv[2:3] == ["host"]:  # manage.py agent host …: offer agents to start from the web
            raise SystemExit(host.main(argv[3:], prog="manage.py agent host"))
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_agent_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            runner_options = cli.agent_options(options)
        except cli.Usage as usage:
            raise CommandError(str(usage)) from None
        code = run(runner_options)
        if code:
            raise SystemExit(code)
