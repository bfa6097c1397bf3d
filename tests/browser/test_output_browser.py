"""A call's output and diffs in a real browser, on a desktop and a phone: terminal text without
fences or raw escapes, diffs one line a row with numbers and tints a person tells apart, a copy
button that copies from the mouse and the keyboard, and nothing wider than the screen."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.core.render import unified_diff
from activity.show import contrast
from tests import frames
from tests.browser.helpers import DESKTOP, PHONE, Team, row_of, screenshot, sign_in
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

CLIPBOARD = {"permissions": ["clipboard-read", "clipboard-write"]}
TERMINAL = (
    "```console\n$ pytest -q\n"
    "\x1b[1;31mFAILED\x1b[0m test_clock.py\n\x1b[32m3 passed\x1b[0m in 0.2s\n```"
)
OLD = 'def greet():\n    return "hi"\n\n\nprint(greet())\n'
NEW = 'def greet(name):\n    return f"hi {name}"\n\n\nprint(greet("ana"))\n'


def run_with_output(runner: Runner) -> tuple[Any, Any]:
    """A turn with a command that printed through a fence and an edit of greet.py."""
    printed = {"type": "content", "content": {"type": "text", "text": TERMINAL}}
    change = {"type": "diff", "path": "/w/greet.py", "oldText": OLD, "newText": NEW}
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.tool_call(2, "run", "Run the tests", kind="execute", status="completed",
                         rawInput={"command": "pytest -q"}, content=[printed]),
        frames.tool_call(3, "edit", "Edit greet.py", kind="edit", status="completed",
                         content=[change]),
    )  # fmt: skip
    return row_of(runner, "run"), row_of(runner, "edit")


def open_both(page: Page, team: Team, runner: Runner, rows: tuple[Any, Any]) -> None:
    sign_in(page, team.viewer)
    page.goto(f"/chats/{runner.chat_id}/")
    for row in rows:
        page.locator(f"#details-{row.id} > summary").click()
        expect(page.locator(f"#details-{row.id} .output-block").first).to_be_visible()


def colour(locator: Any, prop: str) -> str:
    return str(locator.evaluate(f"(e) => getComputedStyle(e).{prop}"))


# A computed colour as the screen shows it, whatever notation the browser keeps it in
# (color-mix() tints come back as color(srgb …)): painted on a canvas and read back.
SRGB = """([e, prop]) => {
  const paint = document.createElement("canvas").getContext("2d", {willReadFrequently: true});
  paint.fillStyle = getComputedStyle(e)[prop];
  paint.fillRect(0, 0, 1, 1);
  return [...paint.getImageData(0, 0, 1, 1).data.slice(0, 3)];
}"""


def shown_contrast(text: Any, under: Any) -> float:
    """The WCAG ratio between ``text``'s colour and ``under``'s background, as rendered."""
    fore = text.evaluate(f"(e) => ({SRGB})([e, 'color'])")
    back = under.evaluate(f"(e) => ({SRGB})([e, 'backgroundColor'])")
    return contrast.ratio(tuple(fore), tuple(back))


def test_terminal_output_shows_no_fences_or_escapes_and_the_diff_reads_line_by_line(
    new_page: Any, page_errors: list[str], team: Team, runner: Runner
):
    rows = run_with_output(runner)
    page = new_page(**DESKTOP)
    open_both(page, team, runner, rows)
    shell, edit = (page.locator(f"#tool-{row.id}") for row in rows)

    terminal = shell.locator("pre.output")
    expect(terminal).to_have_text("$ pytest -q\nFAILED test_clock.py\n3 passed in 0.2s")
    expect(shell.locator(".output-lang")).to_have_text("console")
    assert "monospace" in colour(terminal, "fontFamily")
    assert "```" not in shell.inner_text() and "[0m" not in shell.inner_text()
    failed = terminal.locator(".ansi-fg-1")
    assert colour(failed, "color") != colour(terminal, "color")
    assert colour(failed, "fontWeight") == "700"

    expect(edit.locator(".diff-path")).to_have_text("w/greet.py")
    expect(edit.locator(".diff-plus")).to_have_text("+3")
    expect(edit.locator(".diff-minus")).to_have_text("\N{MINUS SIGN}3")
    lines = edit.locator("table.diff tr:not(.hunk)")
    expect(lines).to_have_count(8)
    first_added = edit.locator("table.diff tr.add").first
    expect(first_added.locator("td.ln").nth(1)).to_have_text("1")
    expect(first_added.locator("td.mk")).to_have_text("+")
    # One line a row, not double-spaced; added and removed on backgrounds of their own.
    height = first_added.evaluate("(r) => r.getBoundingClientRect().height")
    code = first_added.locator("td.code")
    line = code.evaluate("(c) => parseFloat(getComputedStyle(c).lineHeight)")
    assert height < 1.5 * line
    removed = edit.locator("table.diff tr.del").first
    assert colour(first_added, "backgroundColor") != colour(removed, "backgroundColor")
    # Text, line numbers and marks on those tints pass WCAG AA (4.5:1), as the page shows them.
    for tinted in (first_added, removed):
        for part in ("td.code", "td.ln", "td.mk", "td.code span[class]"):
            ratio = shown_contrast(tinted.locator(part).first, tinted)
            assert ratio >= contrast.AA_TEXT, f"{part} on its tint: {ratio:.2f}:1"
    assert edit.locator('table.diff span[class="k"]').count() > 0  # highlighted as Python

    # The output takes the row's whole width, not the label cell's 60 %.
    table = page.locator(f"#tool-{rows[1].id}").locator("xpath=ancestor::table[1]")
    block = edit.locator(".output-block")
    assert block.bounding_box()["width"] > 0.9 * table.bounding_box()["width"]
    screenshot(page, "output-chat-desktop")
    assert page_errors == []


def test_the_copy_button_copies_the_plain_text_by_mouse_and_by_keyboard(
    new_page: Any, team: Team, runner: Runner
):
    rows = run_with_output(runner)
    page = new_page(**DESKTOP, **CLIPBOARD)
    open_both(page, team, runner, rows)
    shell, edit = (page.locator(f"#tool-{row.id}") for row in rows)

    button = shell.locator("button.copy")  # by class: its name changes to Copied and back
    expect(button).to_have_accessible_name("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    expect(page.locator("#output-copied")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == "$ pytest -q\nFAILED test_clock.py\n3 passed in 0.2s"
    expect(button).to_have_text("Copy", timeout=4_000)  # then it says Copy again

    edit.get_by_role("button", name="Copy").focus()
    page.keyboard.press("Enter")
    expect(edit.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == unified_diff("/w/greet.py", OLD, NEW)


def test_on_a_phone_output_and_diffs_fit_the_screen(new_page: Any, team: Team, runner: Runner):
    rows = run_with_output(runner)
    page = new_page(**PHONE)
    open_both(page, team, runner, rows)

    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= 390, f"the page scrolls sideways: {wide} px wide"
    edit = page.locator(f"#tool-{rows[1].id}")
    added = edit.locator("table.diff tr.add").first
    expect(added).to_be_visible()
    # Still a line a row: number, mark and code side by side, not stacked cell under cell.
    number, mark, code = (added.locator(f"td.{part}") for part in ("ln >> nth=1", "mk", "code"))
    tops = [cell.bounding_box()["y"] for cell in (number, mark, code)]
    assert max(tops) - min(tops) < 4, f"the cells of a diff line are stacked: {tops}"
    screenshot(page, "output-chat-phone")
