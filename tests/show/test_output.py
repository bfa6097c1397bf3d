"""What a tool printed or changed, as a person reads it: terminal text, unwrapped fences,
highlighted code, diffs with line numbers and counts, colours that read in both schemes."""

from __future__ import annotations

import re
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings

from activity.core.contract import bound
from activity.core.render import unified_diff
from activity.show import contrast, diffs, highlight, terminal
from activity.templatetags.output import diff_filter, output
from tests import frames
from tests.factories import run

GREET_OLD = 'def greet():\n    return "hi"\n\nprint(greet())\n'
GREET_NEW = 'def greet(name):\n    return f"hi {name}"\n\nprint(greet("ana"))\nprint("bye")\n'


def rows(html: str) -> list[tuple[str, str, str, str]]:
    """A rendered diff's rows as (kind, old number, new number, code text)."""
    found = re.findall(
        r'<tr class="(\w+)"><td class="ln">(\d*)</td><td class="ln">(\d*)</td>'
        r'<td class="mk">.</td><td class="code">(.*?)</td></tr>',
        html,
    )
    return [(kind, old, new, re.sub(r"<[^>]+>", "", code)) for kind, old, new, code in found]


# --- terminal output -------------------------------------------------------------------------


def test_ansi_colours_become_classes_and_no_escape_reaches_the_page() -> None:
    html = output("\x1b[1;31mFAILED\x1b[0m test_a.py \x1b[32m2 passed\x1b[39m")

    assert '<span class="ansi-fg-1 ansi-bold">FAILED</span> test_a.py ' in html
    assert '<span class="ansi-fg-2">2 passed</span>' in html
    assert "\x1b" not in html and "[0m" not in html and "style=" not in html


def test_cursor_moves_titles_and_links_are_dropped_and_their_text_kept() -> None:
    text = "\x1b]0;my title\x07\x1b[2K\x1b]8;;https://x.test\x1b\\docs\x1b]8;;\x1b\\ here\x1b[?25h"

    assert terminal.plain(text) == "docs here"
    assert ">docs here<" in output(text)


def test_256_and_true_colours_come_to_the_nearest_of_the_eight() -> None:
    html = terminal.to_html("\x1b[38;5;196mred\x1b[0m \x1b[38;2;20;40;230mblue\x1b[48;5;28m!")

    assert '<span class="ansi-fg-1">red</span>' in html
    assert '<span class="ansi-fg-4">blue</span><span class="ansi-fg-4 ansi-bg-2">!</span>' in html


def test_a_progress_bar_shows_its_last_state_and_a_backspace_takes_a_character_back() -> None:
    assert terminal.plain("10%\r50%\r\x1b[32mdone\x1b[0m\nnext\r\n") == "done\nnext\n"
    assert terminal.plain("ab\bc") == "ac"


def test_a_console_fence_is_unwrapped_and_keeps_its_language() -> None:
    html = output("```console\n$ pytest -q\n3 passed in 0.2s\n```")

    assert "```" not in html
    assert '<span class="output-lang">console</span>' in html
    assert '<pre class="output hl">' in html  # highlighted as a console session
    assert re.sub(r"<[^>]+>", "", html.split("<code>")[1]).startswith("$ pytest -q\n3 passed")


def test_text_around_fences_stays_and_an_unclosed_fence_runs_to_the_end() -> None:
    segments = terminal.split_fences(
        "Ran it:\n````text\n```\nnot a close\n````\nthen\n~~~python\nx = 1"
    )

    assert segments == [
        terminal.Segment("Ran it:"),
        terminal.Segment("```\nnot a close", "text", True),
        terminal.Segment("then"),
        terminal.Segment("x = 1", "python", True),
    ]


def test_code_is_highlighted_with_classes_and_json_output_is_recognised() -> None:
    fenced = output('```python\ndef f():\n    return "x"\n```')
    raw = output('{\n  "ok": true\n}')

    assert '<span class="k">def</span>' in fenced and "style=" not in fenced
    assert '<span class="output-lang">json</span>' in raw and '<span class="kc">true</span>' in raw


def test_plain_output_keeps_its_exact_text_in_a_block_with_a_copy_button() -> None:
    html = output("3 passed in 0.2s")

    assert '<pre class="output"><code>3 passed in 0.2s</code></pre>' in html
    assert '<button type="button" class="copy" data-copy>Copy</button>' in html


# --- diffs -----------------------------------------------------------------------------------


def test_a_diff_has_one_row_per_line_with_its_old_and_new_numbers() -> None:
    html = output(unified_diff("/w/greet.py", GREET_OLD, GREET_NEW))

    assert rows(html) == [
        ("del", "1", "", "def greet():"),
        ("del", "2", "", '    return "hi"'),
        ("add", "", "1", "def greet(name):"),
        ("add", "", "2", '    return f"hi {name}"'),
        ("ctx", "3", "3", ""),
        ("del", "4", "", "print(greet())"),
        ("add", "", "4", 'print(greet("ana"))'),
        ("add", "", "5", 'print("bye")'),
    ]
    assert "\n" not in html.split("<tbody>")[1]  # no blank line between rows


def test_a_diff_header_names_the_file_and_counts_what_was_added_and_removed() -> None:
    html = output(unified_diff("/w/greet.py", GREET_OLD, GREET_NEW))
    created = output(unified_diff("/w/new.txt", None, "a\nb\n"))

    assert '<span class="diff-path">w/greet.py</span>' in html
    assert ">+4</span>" in html and ">\N{MINUS SIGN}3</span>" in html
    assert '<span class="diff-state">new file</span>' in created and ">+2</span>" in created


def test_a_diff_is_highlighted_by_its_file_s_language() -> None:
    html = output(unified_diff("/w/greet.py", GREET_OLD, GREET_NEW))

    assert '<table class="diff hl">' in html and '<span class="k">def</span>' in html


def test_a_removed_line_that_starts_with_dashes_stays_in_its_file() -> None:
    old, new = "-- a comment\n--- b\nkeep\n", "keep\n"
    (found,) = diffs.split(unified_diff("/w/q.sql", old, new))

    assert isinstance(found, diffs.FileDiff)
    assert [(line.kind, line.text) for line in found.lines[1:]] == [
        ("del", "-- a comment"),
        ("del", "--- b"),
        ("ctx", "keep"),
    ]


def test_several_files_and_the_text_between_them_are_all_shown() -> None:
    text = "\n".join(
        [
            "Edited two files",
            unified_diff("/w/a.py", "a\n", "b\n"),
            unified_diff("/w/b.md", "x\ny\n", "x\n"),
            "Done.",
        ]
    )
    parts = diffs.split(text)

    assert [p if isinstance(p, str) else p.path for p in parts] == [
        "Edited two files",
        "w/a.py",
        "w/b.md",
        "Done.",
    ]
    assert [(p.added, p.removed) for p in parts if isinstance(p, diffs.FileDiff)] == [
        (1, 1),
        (0, 1),
    ]


def test_a_diff_copied_is_the_same_unified_diff() -> None:
    patch = unified_diff("/w/greet.py", GREET_OLD, GREET_NEW)
    (found,) = diffs.split(patch)

    assert isinstance(found, diffs.FileDiff) and found.patch() == patch


def test_a_diff_cut_at_the_content_bound_says_how_much_was_cut() -> None:
    big = "\n".join(f"line {n}" for n in range(5000))
    html = output(bound(unified_diff("/w/big.txt", None, big), 16_384))

    assert re.search(r'<p class="output-cut">[\d,]+ more characters were cut here', html)
    assert len(rows(html)) > 1000 and "characters cut]" not in html


def test_a_permission_prompt_s_change_shows_its_words_and_its_diff() -> None:
    html = diff_filter("Edit greet.py\n" + unified_diff("/w/greet.py", GREET_OLD, GREET_NEW))

    assert html.startswith('<div class="output-text"><p>Edit greet.py</p></div>')
    assert '<span class="diff-path">w/greet.py</span>' in html


# --- hostile text ----------------------------------------------------------------------------

HOSTILE = [
    '<script>alert(1)</script><img src=x onerror="alert(2)">',
    "\x1b[31m<b>red</b>\x1b[0m\x1b]8;;javascript:alert(3)\x1b\\link\x1b]8;;\x1b\\",
    '```html" onmouseover="alert(4)\n<svg onload=alert(5)>\n```',
    unified_diff('/w/"><script>alert(6)</script>.py', "<a>\n", "</textarea><script>x</script>\n"),
    "\x00\x01\x02\x7f\x9b\x80 binary \ufffd\udcff",
    "x" * 200_000,
]


class Markup(HTMLParser):
    """Every tag and attribute name in a piece of HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)


@pytest.mark.parametrize(
    "text", HOSTILE, ids=["tags", "escapes", "fence", "diff", "binary", "huge"]
)
def test_hostile_output_is_escaped_and_makes_no_markup_of_its_own(text: str) -> None:
    for html in (output(text), diff_filter(text)):
        markup = Markup()
        markup.feed(html)

        assert markup.tags <= {
            "div",
            "span",
            "button",
            "pre",
            "code",
            "table",
            "tbody",
            "tr",
            "td",
            "p",
            "br",
        }
        assert markup.attributes <= {
            "class",
            "type",
            "data-copy",
            "data-from",
            "data-to",
            "colspan",
            "title",
        }
        assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", html)


def test_a_huge_single_line_keeps_every_character() -> None:
    html = output("y" * 100_000)

    assert html.split("<code>")[1].split("</code>")[0] == "y" * 100_000


# --- colours ---------------------------------------------------------------------------------


def schemes() -> dict[str, dict[str, str]]:
    static = Path(settings.BASE_DIR) / "static" / "koruweb"
    return contrast.properties(
        *[(static / name).read_text() for name in ("page/koruweb.css", "live/output.css")]
    )


def token_colours(css: str) -> dict[str, set[str]]:
    """The highlight stylesheet's token colours, light and dark."""
    light, _, dark = css.partition("@media (prefers-color-scheme: dark)")
    return {
        name: set(re.findall(r"color: (#[0-9a-f]{6})", part))
        for name, part in (("light", light), ("dark", dark))
    }


# (text, background) property pairs the output stylesheet puts together.
PAIRS = [
    *((text, bg) for text in ("fg", "muted") for bg in ("code-bg", "add-bg", "del-bg", "surface")),
    ("ok", "add-bg"), ("bad", "del-bg"), ("ok", "surface"), ("bad", "surface"),
    ("accent", "accent-bg"), ("fg", "neutral-bg"), ("code-bg", "fg"),
    *((f"ansi-{n}", "code-bg") for n in range(8)),
    *((f"ansi-{n}", f"ansi-bg-{m}") for n in range(8) for m in range(8)),
    *(("fg", f"ansi-bg-{m}") for m in range(8)),
]  # fmt: skip


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_colour_reads_at_wcag_aa_on_every_background_it_sits_on(scheme: str) -> None:
    colours = schemes()[scheme]
    tokens = token_colours(highlight.stylesheet())[scheme]
    pairs = [(colours[a], colours[b], f"{a} on {b}") for a, b in PAIRS]
    pairs += [
        (t, colours[bg], f"token {t} on {bg}") for t in tokens for bg in highlight.BACKGROUNDS
    ]

    failing = [
        f"{name}: {contrast.ratio(a, b):.2f}" for a, b, name in pairs if contrast.ratio(a, b) < 4.5
    ]

    assert len(tokens) >= 6 and failing == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_added_and_removed_lines_differ_at_a_glance_from_each_other_and_from_context(
    scheme: str,
) -> None:
    colours = schemes()[scheme]

    assert contrast.difference(colours["add-bg"], colours["del-bg"]) >= 20
    assert contrast.difference(colours["add-bg"], colours["code-bg"]) >= 10
    assert contrast.difference(colours["del-bg"], colours["code-bg"]) >= 10
    # The coloured edge beside each line stands out from its tint (WCAG 1.4.11).
    assert contrast.ratio(colours["ok"], colours["add-bg"]) >= 3
    assert contrast.ratio(colours["bad"], colours["del-bg"]) >= 3


def test_the_contrast_helper_agrees_with_wcag() -> None:
    assert contrast.ratio("#000", "#fff") == pytest.approx(21)
    assert contrast.ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
    assert contrast.mix("#ffffff", 0.5, "#000000") == (128, 128, 128)


# --- the stylesheet and the page -------------------------------------------------------------


def test_the_highlight_stylesheet_is_css_cached_for_a_year_at_its_versioned_url(client) -> None:
    current = client.get(f"/highlight.css?v={highlight.version()}")
    old = client.get("/highlight.css?v=0")
    again = client.get("/highlight.css", HTTP_IF_NONE_MATCH=current["ETag"])

    assert current.status_code == 200 and current["Content-Type"] == "text/css; charset=utf-8"
    assert current["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "@media (prefers-color-scheme: dark)" in current.content.decode()
    assert old["Cache-Control"] == "public, max-age=3600"
    assert again.status_code == 304


@pytest.mark.django_db
def test_a_chat_page_shows_a_call_s_diff_and_links_the_highlight_stylesheet(
    as_viewer, acme
) -> None:
    diff = {"type": "diff", "path": "/w/greet.py", "oldText": GREET_OLD, "newText": GREET_NEW}
    chat = run(
        acme,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.tool_call(2, "c1", "Edit greet.py", kind="edit", content=[diff]),
    )

    html = as_viewer.get(f"/chats/{chat.pk}/").content.decode()

    assert f'href="/highlight.css?v={highlight.version()}"' in html
    assert '<span class="diff-path">w/greet.py</span>' in html and len(rows(html)) == 8
