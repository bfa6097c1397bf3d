"""What a keyboard or screen-reader user, and anyone in dark mode, relies on without a browser.

The browser side (axe-core on every page type, the keys to a waiting prompt) is in
tests/browser/test_accessibility_browser.py.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from activity.show.markdown import render_markdown
from tests import frames
from tests.factories import run

BASE = Path(settings.BASE_DIR)
CSS = (BASE / "static/koruweb/page/koruweb.css").read_text()
TEXT = ("fg", "muted", "accent", "ok", "bad", "warn", "wait")
SURFACES = ("bg", "surface", "code-bg")
TINTS = {"ok": "ok-bg", "bad": "bad-bg", "wait": "wait-bg", "accent": "accent-bg"}


def palette(block: str) -> dict[str, str]:
    return dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-fA-F]{3,6})\b", block))


def schemes() -> dict[str, dict[str, str]]:
    """The light :root and the dark one (inside the prefers-color-scheme block)."""
    light = re.search(r"^:root\s*\{(.*?)\}", CSS, re.S | re.M)
    dark = re.search(r"prefers-color-scheme:\s*dark\)\s*\{\s*:root\s*\{(.*?)\}", CSS, re.S)
    assert light and dark, "koruweb.css has a :root and a dark :root"
    return {"light": palette(light.group(1)), "dark": palette(dark.group(1))}


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two hex colours."""

    def luminance(colour: str) -> float:
        hex_ = colour.lstrip("#")
        if len(hex_) == 3:
            hex_ = "".join(c * 2 for c in hex_)
        channels = [int(hex_[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_colour_property_has_a_dark_value():
    light, dark = schemes().values()
    assert set(light) == set(dark), set(light) ^ set(dark)
    assert "color-scheme: light dark" in CSS  # form controls follow the scheme too


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_on_every_surface_and_tint_passes_wcag_aa_in_both_schemes(scheme):
    colours = schemes()[scheme]
    pairs = [(t, s) for t in TEXT for s in SURFACES] + list(TINTS.items())
    pairs += [("on-accent", fill) for fill in ("accent", "ok", "bad", "warn")]
    failing = {
        f"{text} on {under}": round(contrast(colours[text], colours[under]), 2)
        for text, under in pairs
        if contrast(colours[text], colours[under]) < 4.5
    }
    assert not failing


def test_what_an_agent_writes_as_a_top_heading_sits_under_its_turns_heading():
    html = render_markdown("# Plan\n\n## Steps\n\n###### Fine print\n\n<h1>raw</h1>")
    assert "<h3>Plan</h3>" in html and "<h4>Steps</h4>" in html and "<h6>Fine print</h6>" in html
    assert "<h1>" not in html and "<h2>" not in html


@pytest.mark.django_db
def test_a_chat_page_starts_with_its_skip_links_and_has_a_region_that_reads_out_prompts(
    as_approver, acme
):
    attempt = uuid.uuid4()
    chat = run(
        acme,
        frames.turn_started(1, attempt, uuid.uuid4(), prompt="Clean the build"),
        frames.tool_call(2, "c1", "Read README.md", kind="read", status="completed"),
    )
    html = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    body = html[html.index("<body") :]
    first_link = re.search(r"<a [^>]*>", body)
    assert first_link and 'id="jump-waiting"' in first_link.group(0)
    assert '<a class="skip-link" href="#main">Skip to main content</a>' in body
    assert '<main id="main" tabindex="-1">' in body
    assert re.search(r'id="prompt-announcer"[^>]*aria-live="polite"', body)
    assert f'aria-labelledby="turn-title-{attempt}"' in body  # each turn is a named section
    assert re.search(rf'<h2 [^>]*id="turn-title-{attempt}"[^>]*>Turn: Clean the build</h2>', body)


def test_the_readme_shows_a_screenshot_of_a_live_run_that_exists():
    readme = (BASE / "README.md").read_text()
    shown = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", readme)
    assert "docs/live-run.png" in shown
    for path in shown:
        assert (BASE / path).is_file(), path
