"""Masking cannot stall the server (issue 22): every secret shape of activity/core/masking.py takes
time linear in its text, on inputs built to make a backtracking pattern quadratic (repeated
separators and prefixes, each a start that fails late). A frame may carry a string of 1 MiB.

Each test compares the CPU time of 1 MiB with that of 64 KiB of the same text: linear is 16
times, quadratic 256; up to 40 passes. This ratio is the one timing this suite asserts (see
docs/secrets.md). Timings are noisy on a shared machine, so each is the best of three, with the
garbage collector off, and the 64 KiB time counts as at least 1 ms."""

from __future__ import annotations

import base64
import gc
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activity.core.masking import mask, mask_junction

# Masking is pure: no database.
pytestmark = pytest.mark.once

SMALL = 64 * 1024
LARGE = 1024 * 1024
MOST = 40  # times the 64 KiB cost that 1 MiB may take: linear is 16, quadratic 256
FLOOR = 0.001  # seconds: below this a timing is noise


def repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def cpu(run: Callable[[], object]) -> float:
    """CPU seconds of one call, the collector off (its pauses are not the pattern's)."""
    gc.disable()
    try:
        start = time.process_time()
        run()
        return time.process_time() - start
    finally:
        gc.enable()


def assert_linear(small: Callable[[], object], large: Callable[[], object]) -> None:
    """Best of three each: ``large`` (16 times the text) costs at most ``MOST`` times
    ``small``. A first run of ``large`` within that bound already decides it."""
    base = max(min(cpu(small) for _ in range(3)), FLOOR)
    best = float("inf")
    for _ in range(3):
        best = min(best, cpu(large))
        if best <= MOST * base:
            return
    pytest.fail(f"1 MiB took {best:.3f}s, {best / base:.0f} times the {base:.4f}s of 64 KiB")


# Each pattern's separators and prefixes, repeated: every repetition a start that can fail.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "scheme then dotted host": lambda n: "://" + repeat("a.", n - 3),
    "url password without @": lambda n: repeat("a://b:", n),
    "url password with @ inside": lambda n: repeat("://u:a@", n),
    "begin lines": lambda n: repeat("-----BEGIN ", n),
    "private key headers": lambda n: repeat("-----BEGIN RSA PRIVATE KEY-----\n", n),
    "a private key with no end": lambda n: (
        "-----BEGIN RSA PRIVATE KEY-----" + repeat("\nMIIE", n - 31)
    ),
    "private keys with the wrong end": lambda n: repeat(
        "-----BEGIN PRIVATE KEY-----\nAA\n-----END RSA PRIVATE KEY-----\n", n
    ),
    "colons": lambda n: repeat("a:", n),
    "sk- prefixes": lambda n: repeat("sk-", n),
    "yaml keys": lambda n: repeat("password: ", n),
    "open quotes": lambda n: repeat('password: "', n),
    "quotes of two kinds": lambda n: repeat("password: 'a \" ", n),
    "escaped json": lambda n: repeat('\\"password\\": \\"', n),
    "equals signs": lambda n: repeat("=", n),
    "jwt starts": lambda n: repeat("eyJ.", n),
    "jwt parts": lambda n: repeat("eyJaaaaaaaa.", n),
    "bearer words": lambda n: repeat("Bearer ", n),
    "key name prefix": lambda n: repeat("a_", n - 1) + "=",
    "key then spaces": lambda n: "password" + " " * (n - 8),
    "aws secret candidates": lambda n: "AKIA" + "Q3XAMPLE7KOR4WBZ " + repeat("aB/+", n - 21),
    "user:password@": lambda n: repeat(" a:b@", n),
    "host names": lambda n: repeat("a:b@c.", n),
    "curl -u": lambda n: repeat(" -u a:", n),
    "flags": lambda n: repeat(" --token ", n),
    "webhook paths": lambda n: repeat("discord.com/api/webhooks/1/", n),
    "base64 token prefixes": lambda n: repeat(
        base64.b64encode(b"sk-ant-api03-AB").decode() + " ", n
    ),
    "base64 key headers": lambda n: repeat(
        base64.b64encode(b"-----BEGIN RSA PRIVATE KEY-----").decode() + " ", n
    ),
    "hex token prefixes": lambda n: repeat("736b2d", n),
    "percent-encoded prefixes": lambda n: repeat("%73k-", n),
    "percent escapes": lambda n: repeat("%41", n),
    "stars": lambda n: repeat("a********", n),
    "everything at once": lambda n: repeat('sk-password: ://a:b@ eyJ. Bearer 1 ="x', n),
}


@pytest.mark.parametrize("make", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_masking_a_string_built_to_backtrack_takes_time_linear_in_its_length(make):
    small, large = make(SMALL), make(LARGE)
    assert_linear(lambda: mask(small), lambda: mask(large))


PIECES = [
    "://", "a.", ":", "@", "=", '"', "'", " ", "\n", "-----BEGIN ", "PRIVATE KEY-----", "sk-",
    "password: ", "token=", "eyJ", ".", "Bearer ", "AKIA", "-u ", "%73", "a", "*", "_", "/",
]  # fmt: skip


@settings(derandomize=True, max_examples=2, deadline=None, database=None)
@given(st.lists(st.sampled_from(PIECES), min_size=2, max_size=6))
def test_masking_any_mix_of_separators_and_prefixes_takes_linear_time(pieces):
    unit = "".join(pieces)
    small, large = repeat(unit, SMALL), repeat(unit, LARGE)
    assert_linear(lambda: mask(small), lambda: mask(large))


@pytest.mark.parametrize("name", ["a private key with no end", "open quotes"])
def test_masking_where_a_chunk_meets_a_long_stored_text_takes_linear_time(name):
    small, large = ADVERSARIAL[name](SMALL), ADVERSARIAL[name](LARGE)
    # A new chunk 16 times longer, after 1 MiB stored: linear in the chunk.
    assert_linear(lambda: mask_junction(large, small), lambda: mask_junction(large, large))
    # A stored text 16 times longer, the same chunk: only its tail is masked again.
    assert_linear(lambda: mask_junction(small, small), lambda: mask_junction(large, small))
