"""``koruweb host``'s command line: a host declared by ``--config host.toml`` (``hostconfig``)
or, for a quick start, by ``--agent NAME=COMMAND`` and ``--root DIR``; a bad one is ``Usage``
(the host exits 3). What the host does with it is ``host.py``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
from dataclasses import dataclass
from typing import NoReturn

from pydantic import ValidationError

from activity.runner import hostconfig
from activity.runner.hostconfig import Agent, absolute_command
from activity.runner.link import TOKEN_VARIABLE
from activity.wire.hostframes import MAX_RUNS, HostAgent

MAX_RUNS_DEFAULT = 4  # runs a host runs at once unless --max-runs says otherwise
DESCRIPTION = "Offer agents to start from the web, on this machine."


class Usage(Exception):
    """A bad command line (exit 3)."""


@dataclass
class HostOptions:
    server: str
    token: str
    name: str
    agents: dict[str, Agent]
    roots: list[str]
    connect_timeout: float = 30.0
    max_runs: int = MAX_RUNS_DEFAULT


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Usage(message)


def parse(argv: list[str], prog: str = "koruweb host") -> HostOptions:
    parser = Parser(prog=prog, description=DESCRIPTION)
    parser.add_argument("--server", required=True, help="ws://HOST:PORT of koruweb")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_VARIABLE) or None,
        help=f"a host token of the workspace (or in ${TOKEN_VARIABLE}, kept out of ps)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a host.toml declaring the host: its name, max_runs, roots and [agents.NAME] "
        "tables (label, command, web_modes); --name and --max-runs given here win over it",
    )
    parser.add_argument("--agent", action="append", default=[], metavar="NAME=COMMAND")
    parser.add_argument("--root", action="append", default=[], metavar="DIR")
    parser.add_argument("--name", help="the host's name (default: the machine's)")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help=f"the most runs this host runs at once (default {MAX_RUNS_DEFAULT}); a start "
        "beyond them is refused",
    )
    args = parser.parse_args(argv)
    if not args.server.startswith(("ws://", "wss://")):
        raise Usage(f"--server {args.server!r}: use ws://HOST:PORT or wss://HOST")
    if not args.token:
        raise Usage(f"give a host token: ${TOKEN_VARIABLE} (or --token, which ps shows)")
    if args.max_runs is not None and not 1 <= args.max_runs <= MAX_RUNS:
        raise Usage(f"--max-runs {args.max_runs}: give 1 to {MAX_RUNS}")
    if args.config is not None:
        if args.agent or args.root:
            raise Usage(
                f"--config {args.config} declares the agents and roots: give them there, "
                "not with --agent or --root"
            )
        try:
            config = hostconfig.load(args.config)
        except hostconfig.BadConfig as bad:
            raise Usage(str(bad)) from None
        agents, roots = config.agents, config.roots
        name, max_runs = args.name or config.name, args.max_runs or config.max_runs
    elif not args.agent or not args.root:
        raise Usage("give --config host.toml, or --agent NAME=COMMAND and --root DIR")
    else:
        agents, roots = [flag_agent(spec) for spec in args.agent], flag_roots(args.root)
        name, max_runs = args.name, args.max_runs
    return HostOptions(
        args.server,
        args.token,
        name or socket.gethostname()[:100],
        {agent.name: agent for agent in agents},
        roots,
        args.connect_timeout,
        max_runs or MAX_RUNS_DEFAULT,
    )


def flag_agent(spec: str) -> Agent:
    """``--agent NAME=COMMAND``: no label (its name stands in), no web modes."""
    name, _, command = spec.partition("=")
    try:
        words = shlex.split(command)
        HostAgent(name=name.strip(), command=command)
    except (ValueError, ValidationError):
        raise Usage(f"--agent {spec!r}: use NAME=COMMAND, NAME in letters, digits, ._-") from None
    program = shutil.which(words[0]) if words else None
    if program is None:
        raise Usage(f"--agent {spec!r}: the command {words[:1]!r} was not found")
    return Agent(name.strip(), absolute_command(program, words))


def flag_roots(roots: list[str]) -> list[str]:
    for root in roots:
        if not os.path.isdir(root):
            raise Usage(f"--root {root!r} is not a directory")
    return [os.path.abspath(root) for root in roots]
