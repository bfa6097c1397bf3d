"""``koruweb host --config host.toml``: a host declared in a file (TOML, read with ``tomllib``).

    name = "build-box"          # optional: the machine's name
    max_runs = 4                # optional: the most runs at once (default 4)
    roots = ["~/code"]          # the directories runs may work under

    [agents.claude]
    label = "Claude Code"       # optional: the name people see (default: the agent's name)
    command = "claude-agent-acp"  # a string (split as a shell would) or a list of words
    web_modes = ["default", "plan"]  # optional: the modes the web may switch it to

An agent's table name is its id (letters, digits, ``._-``). ``web_modes`` follows the runner's
``--web-modes`` (docs/protocol.md#the-hosts-socket): none by default, a mode that bypasses
permissions only if named, and one the agent does not have fails the run's start with the
agent's own modes. Relative paths (roots, a command's program and its arguments that are files)
are taken from where the host starts, as the flags' are. Anything else in the file — an unknown
key, a wrong type, an agent without a command, a command not found, a root that is not a
directory — is a ``BadConfig`` naming the file and the key (the host exits 3).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from activity.wire.hostframes import (
    LABEL_CHARS,
    MAX_AGENTS,
    MAX_MODES,
    MAX_ROOTS,
    MAX_RUNS,
    MODE_CHARS,
    HostAgent,
)

HOST_KEYS = ("name", "max_runs", "roots", "agents")
AGENT_KEYS = ("label", "command", "web_modes")


class BadConfig(Exception):
    """The file cannot declare a host: what is wrong, and where."""


@dataclass
class Agent:
    """One agent the host offers: its id, the name people see, its command (absolute program)
    and the modes the web may switch it to."""

    name: str
    command: list[str]
    label: str = ""
    web_modes: list[str] = field(default_factory=list)


@dataclass
class HostConfig:
    roots: list[str]
    agents: list[Agent]
    name: str | None = None
    max_runs: int | None = None


def load(path: str) -> HostConfig:
    """The host ``path`` declares; ``BadConfig`` if it declares none."""
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        raise BadConfig(f"{path}: no such file") from None
    except OSError as error:
        raise BadConfig(f"{path}: cannot be read ({error.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BadConfig(f"{path}: not TOML: {error}") from None
    return Reader(path).host(data)


class Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def bad(self, key: str, said: str) -> BadConfig:
        return BadConfig(f"{self.path}: {key}: {said}")

    def known(self, table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        for key in table:
            if key not in keys:
                takes = ", ".join(keys)
                raise self.bad(f"{where}{key}", f"unknown key (it takes: {takes})")

    def host(self, data: dict[str, Any]) -> HostConfig:
        self.known(data, HOST_KEYS, "")
        name = data.get("name")
        if name is not None and not (isinstance(name, str) and 0 < len(name.strip()) <= 100):
            raise self.bad("name", "give a string of 1 to 100 characters")
        max_runs = data.get("max_runs")
        if max_runs is not None and (
            type(max_runs) is not int or not 1 <= max_runs <= MAX_RUNS  # bool is no number
        ):
            raise self.bad("max_runs", f"give a whole number from 1 to {MAX_RUNS}")
        return HostConfig(
            self.roots(data.get("roots")), self.agents(data.get("agents")), name, max_runs
        )

    def roots(self, roots: Any) -> list[str]:
        if roots is None:
            raise self.bad(
                "roots", 'missing: list the directories runs may work under, roots = ["~/code"]'
            )
        if not isinstance(roots, list) or not roots or len(roots) > MAX_ROOTS:
            raise self.bad("roots", f"give a list of 1 to {MAX_ROOTS} directories")
        found = []
        for n, root in enumerate(roots):
            if not isinstance(root, str) or not root:
                raise self.bad(f"roots[{n}]", "give a directory's path as a string")
            path = os.path.expanduser(root)
            if not os.path.isdir(path):
                raise self.bad(f"roots[{n}]", f"{root!r} is not a directory")
            found.append(os.path.abspath(path))
        return found

    def agents(self, agents: Any) -> list[Agent]:
        if agents is None:
            raise self.bad("agents", "missing: declare an agent, [agents.NAME] with its command")
        if not isinstance(agents, dict) or not agents or len(agents) > MAX_AGENTS:
            raise self.bad("agents", f"give 1 to {MAX_AGENTS} tables, [agents.NAME]")
        return [self.agent(name, table) for name, table in agents.items()]

    def agent(self, name: str, table: Any) -> Agent:
        where = f"agents.{name}"
        if not isinstance(table, dict):
            raise self.bad(where, "give a table: [agents.NAME] with its command")
        self.known(table, AGENT_KEYS, f"{where}.")
        label = table.get("label", "")
        if not isinstance(label, str) or len(label) > LABEL_CHARS or not label.isprintable():
            raise self.bad(f"{where}.label", f"give one line of at most {LABEL_CHARS} characters")
        command = self.command(table.get("command"), f"{where}.command")
        program = shutil.which(os.path.expanduser(command[0]))
        if program is None:
            raise self.bad(f"{where}.command", f"the command {command[0]!r} was not found")
        modes = self.modes(table.get("web_modes", []), f"{where}.web_modes")
        try:
            HostAgent(name=name, label=label.strip(), web_modes=modes)
        except ValidationError:
            raise self.bad(
                where, "an agent's name is letters, digits and ._- (at most 64)"
            ) from None
        return Agent(name, absolute_command(program, command), label.strip(), modes)

    def command(self, command: Any, where: str) -> list[str]:
        if command is None:
            raise self.bad(where, "missing: the agent's command, a string or a list of words")
        if isinstance(command, str):
            try:
                words = shlex.split(command)
            except ValueError as error:
                raise self.bad(where, f"cannot be split as a shell would ({error})") from None
        elif isinstance(command, list) and all(isinstance(word, str) for word in command):
            words = command
        else:
            raise self.bad(where, "give a string or a list of strings")
        if not words or not words[0]:
            raise self.bad(where, "empty: give the agent's program and its arguments")
        return words

    def modes(self, modes: Any, where: str) -> list[str]:
        if not isinstance(modes, list) or not all(isinstance(mode, str) for mode in modes):
            raise self.bad(where, 'give a list of the agent\'s mode ids, e.g. ["default", "plan"]')
        found = list(dict.fromkeys(mode.strip() for mode in modes))
        if len(found) > MAX_MODES or any(not 0 < len(mode) <= MODE_CHARS for mode in found):
            raise self.bad(where, f"at most {MAX_MODES} modes of 1 to {MODE_CHARS} characters each")
        if any("," in mode for mode in found):  # --web-modes is a comma list
            raise self.bad(where, "a mode id holds no comma")
        return found


def absolute_command(program: str, words: list[str]) -> list[str]:
    """The command with its program found (absolute when it was a path) and its arguments that
    are files there made absolute: a run works in a directory of its own, so a command's paths
    are taken from where the host starts."""
    first = program if os.sep not in words[0] else os.path.abspath(program)
    return [first, *map(absolute, words[1:])]


def absolute(word: str) -> str:
    """A relative path to a file that is there, made absolute."""
    is_path = os.sep in word and not word.startswith("-") and not os.path.isabs(word)
    return os.path.abspath(word) if is_path and os.path.exists(word) else word
