"""A command's exit code as agents report it, and the sentence the merge keeps for it (the pages
read the code back from that sentence: ``activity/show/statuses.py``)."""

from __future__ import annotations

import re
from typing import Any

# Where agents report a command's exit code in ``rawOutput``: codex-acp ``exit_code``, the
# demo agent and claude-agent-acp's terminal facts ``exitCode``; claude-agent-acp's text of a
# failed command starts "Exit code N".
EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code")
EXIT_TEXT = re.compile(r"\A(?:```\w*\n)?Exit code (\d{1,10})(?:\n|\Z)")
# The sentence the merge keeps in error_message (a bounded public summary:
# docs/architecture.md#the-toolactivity-contract) for a failed command that reported its exit
# code; the pages read the code back from it.
EXIT_MESSAGE = "The command exited with code {code}."
EXIT_READ = re.compile(r"\AThe command exited with code (-?\d{1,10})\.\Z")
EXIT_CODE_LIMIT = 2**31


def reported_exit_code(raw_output: Any) -> int | None:
    """The exit code an agent's ``rawOutput`` reports for a command, if it reports one."""
    if isinstance(raw_output, dict):
        for key in EXIT_KEYS:
            code = raw_output.get(key)
            if isinstance(code, int) and not isinstance(code, bool):
                return code if -EXIT_CODE_LIMIT <= code < EXIT_CODE_LIMIT else None
        return None
    if isinstance(raw_output, str):
        found = EXIT_TEXT.match(raw_output)
        return int(found.group(1)) if found and int(found.group(1)) < EXIT_CODE_LIMIT else None
    return None


def exit_message(code: int) -> str:
    return EXIT_MESSAGE.format(code=code)
