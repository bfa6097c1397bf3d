"""A key split across the content blocks of one call's update is masked where the blocks meet
(issue 22, ``activity/core/render.py`` ``render_content``), and the call's ``result_bytes`` stays
the size of what the agent sent.

Each block's strings are masked alone first, as the server's boundary does
(``activity/live/boundary.py``). Pure: no database, no socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from activity.live import boundary
from tests.core.merge.events import apply, permission, text, tool_call, tool_call_update

# The merge is pure: no database.
pytestmark = pytest.mark.once

KEY = "sk-ant-api03-" + "Hq2Wd9Ls4Kf7Np1Bx6Mz3Cv8Tr5Gy0Ju7Ek2Ao9x"
TOKEN = "ghp_" + "Rq7Lm2Xv9Kp4Tz8Wn3Yb6Hc1Df5Gj0Sa2Ue4"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\nQ2b9VwK3\n-----END RSA PRIVATE KEY-----"


def at_the_boundary(*texts: str) -> list[dict[str, Any]]:
    """Content blocks of ``texts`` as the server has them: each string masked on its own."""
    masked: list[dict[str, Any]] = boundary.clean(
        [text(t) for t in texts], boundary.MAX_DEPTH, masked=True
    )
    return masked


def utf8(value: str) -> int:
    return len(value.encode("utf-8"))


def halves(secret: str, cut: int) -> tuple[str, str]:
    return f"key: {secret[:cut]}", f"{secret[cut:]} is set"


@pytest.mark.parametrize(
    ("secret", "cut"),
    [
        (KEY, 33),  # the first half alone is a key (masked), the second alone is not
        (KEY, 20),  # neither half alone is a key
        (KEY, 50),  # the second half alone is nothing but letters
        (TOKEN, 10),
        (TOKEN, 30),
    ],
)
def test_a_key_split_across_two_blocks_of_an_update_is_masked_in_both_halves(secret, cut):
    first, second = halves(secret, cut)
    s = apply(
        apply(None, tool_call(title="Print the key", kind="execute")),
        tool_call_update(status="completed", content=at_the_boundary(first, second)),
    )
    assert s.agent_output is not None
    assert secret[:cut] not in s.agent_output and secret[cut:] not in s.agent_output
    assert s.agent_output.startswith("key: ") and s.agent_output.endswith(" is set")
    assert s.result_bytes == utf8(first) + 1 + utf8(second)  # the agent's bytes, one a line


def test_a_key_split_across_three_blocks_is_masked_in_all_three():
    pieces = ["key: " + KEY[:15], KEY[15:30], KEY[30:] + " ok"]
    s = apply(None, tool_call(kind="execute", content=at_the_boundary(*pieces)))
    assert s.agent_output is not None
    assert all(
        piece.removeprefix("key: ").removesuffix(" ok") not in s.agent_output for piece in pieces
    )
    assert s.result_bytes == sum(map(utf8, pieces)) + 2


def test_a_private_key_split_between_blocks_is_masked_up_to_its_end_line():
    cut = PEM.index("Q2b9")
    s = apply(None, tool_call(kind="read", content=at_the_boundary(PEM[:cut], PEM[cut:])))
    assert s.agent_output is not None
    assert "MIIEowIBAAKCAQEA7x" not in s.agent_output and "Q2b9VwK3" not in s.agent_output
    assert s.agent_output.endswith("-----END RSA PRIVATE KEY-----")
    assert s.result_bytes == utf8(PEM) + 1


def test_blocks_that_only_meet_are_left_as_they_were():
    """Text with no secret across a junction is joined as it always was."""
    s = apply(None, tool_call(kind="read", content=at_the_boundary("sk-", "learn ok", "é ü")))
    assert s.agent_output == "sk-\nlearn ok\né ü"
    assert s.result_bytes == utf8("sk-\nlearn ok\né ü")


def test_a_permission_request_that_splits_a_key_between_blocks_shows_it_masked():
    first, second = halves(KEY, 33)
    asked = permission(kind="execute", content=at_the_boundary(first, second))
    s = apply(None, asked)
    assert s.agent_output is not None and KEY[33:] not in s.agent_output
