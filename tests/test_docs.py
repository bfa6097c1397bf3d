"""The repository explains itself: no file cites a document that is not in it, and every
``docs/<name>.md#anchor`` the code cites names a file in ``docs/`` with a heading of that anchor
(GitHub's rule: lower case, spaces to hyphens, punctuation other than ``-`` and ``_`` dropped).

Files are those git tracks, and new ones it does not ignore. Pure: no database, no socket.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The team's private briefing, which someone who clones the repository cannot read. Spelled so
# that this file does not cite them itself.
PRIVATE = re.compile(r"\b(?:STACK|DESIGN|PERF|ACP)\.md\b")
CITED = re.compile(r"\bdocs/([A-Za-z0-9_-]+)\.md\b(?:#([A-Za-z0-9_-]+))?")
# A link from one document of docs/ to another, or to a heading of its own: (doc.md)#anchor.
LINKED = re.compile(r"\]\((?!https?:|/)([A-Za-z0-9_-]+\.md)?#([A-Za-z0-9_-]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def files() -> list[tuple[Path, str]]:
    """The repository's text files and their text: tracked, or new and not ignored (git is
    there wherever the repository is: CI clones it)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    found = []
    for name in filter(None, listed.split("\0")):
        try:
            found.append((ROOT / name, (ROOT / name).read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue  # an image, or a file removed from the work tree
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(name: str) -> frozenset[str]:
    """The anchors of ``docs/<name>``'s headings, outside code blocks; a repeated heading gets
    ``-1``, ``-2``… as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in (DOCS / name).read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else HEADING.match(line)
        if heading is None:
            continue
        anchor = slug(heading.group(1))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return frozenset(found)


def test_slugs_follow_githubs_rule() -> None:
    assert slug("Daphne drops messages over 1 MiB") == "daphne-drops-messages-over-1-mib"
    assert slug("Playwright's sync API and pytest-asyncio") == (
        "playwrights-sync-api-and-pytest-asyncio"
    )
    assert slug("The `ToolActivity` contract") == "the-toolactivity-contract"


def test_no_file_cites_the_private_briefing() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in files()
        if not path.is_relative_to(DOCS)
        for number, line in enumerate(text.splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not cited, "cite docs/ instead:\n" + "\n".join(cited)


def test_every_cited_doc_and_anchor_exists() -> None:
    missing = []
    for path, text in files():
        for number, line in enumerate(text.splitlines(), 1):
            for name, anchor in CITED.findall(line):
                doc = f"{name}.md"
                if not (DOCS / doc).is_file():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: no docs/{doc}")
                elif anchor and anchor not in anchors(doc):
                    where = f"{path.relative_to(ROOT)}:{number}"
                    missing.append(f"{where}: no heading docs/{doc}#{anchor}")
    assert not missing, "\n".join(missing)


def test_links_between_the_docs_land_on_a_heading() -> None:
    missing = []
    for path in sorted(DOCS.glob("*.md")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for target, anchor in LINKED.findall(line):
                doc = target or path.name
                if not (DOCS / doc).is_file() or anchor not in anchors(doc):
                    missing.append(f"docs/{path.name}:{number}: {target}#{anchor}")
    assert not missing, "\n".join(missing)


def test_the_readme_points_to_the_architecture_and_the_protocol() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme
    assert "docs/protocol.md" in readme


def readme_map() -> list[str]:
    """The folders the README's "What is where" names, as paths from the repository's root."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What is where", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1]
    named: list[str] = []
    parents: list[tuple[int, str]] = []
    for line in block.splitlines():
        found = re.match(r"^( *)([A-Za-z0-9_.-]+)/\s", line)
        if not found:
            continue
        depth = len(found.group(1))
        parents = [(d, name) for d, name in parents if d < depth]
        path = "/".join([name for _, name in parents] + [found.group(2)])
        parents.append((depth, found.group(2)))
        named.append(path)
    return named


def test_the_readmes_map_names_every_folder_of_the_app_and_no_folder_that_is_gone() -> None:
    app = ROOT / "activity"
    folders = {
        str(path.relative_to(ROOT))
        for path in app.rglob("*")
        if path.is_dir() and "__pycache__" not in path.parts
    }
    named = set(readme_map())
    assert folders - named == set(), "folders of activity/ the README's map leaves out"
    assert {name for name in named if not (ROOT / name).is_dir()} == set(), "named, not there"


def test_the_readmes_map_names_every_top_level_folder() -> None:
    top = {path.relative_to(ROOT).parts[0] for path, _ in files()}
    folders = {name for name in top if (ROOT / name).is_dir() and not name.startswith(".")}
    assert folders - set(readme_map()) == set()


REAL_TESTS = ROOT / "tests" / "integration" / "real"
# A test a cell names: `file.py::name`, `…::name` (the file of the row's first cell), with an
# optional `[param]` suffix; words in parentheses after it are the cell's, not the name's.
NAMED_TEST = re.compile(r"`((?:[\w./-]+\.py|…)::\w+)(?:\[[^`]*\])?`")


def agents_table() -> list[tuple[str, list[tuple[str, str]]]]:
    """The rows of docs/agents.md's "Agents and scenarios" table: each agent, and each test its
    row names as (file under tests/integration/real/, function name)."""
    text = (DOCS / "agents.md").read_text(encoding="utf-8")
    section = text.split("## Agents and scenarios", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2 and set(lines[1]) <= set("|-"), "no table under the heading"
    rows = []
    for line in lines[2:]:
        agent, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        named: list[tuple[str, str]] = []
        for cell in cells:
            for found in NAMED_TEST.finditer(cell):
                file, name = found.group(1).split("::")
                if file == "…":
                    assert named, f"{agent}: '…::{name}' comes before any file"
                    file = named[0][0]
                named.append((file, name))
        rows.append((agent, named))
    return rows


def test_every_test_the_agents_table_names_exists() -> None:
    rows = agents_table()
    assert len(rows) >= 5, [agent for agent, _ in rows]
    missing = []
    for agent, named in rows:
        assert named, f"{agent}: its row names no test"
        for file, name in named:
            path = (REAL_TESTS / file).resolve()
            source = path.read_text(encoding="utf-8") if path.is_file() else ""
            if not re.search(rf"^\s*(?:async\s+)?def {re.escape(name)}\(", source, re.MULTILINE):
                missing.append(f"{agent}: {file}::{name}")
    assert missing == [], "tests docs/agents.md names that are not defined there"
