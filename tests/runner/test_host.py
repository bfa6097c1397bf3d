"""An agent host's side: the directories it offers (real temp dirs and symlinks), what it
refuses to start, and the bounds of what it sends."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from activity.runner import host as host_process
from activity.runner.hostdirs import Outside, listing, real_roots, resolve
from activity.wire.frames import PROTOCOL_VERSION
from activity.wire.hostframes import MAX_ENTRIES, HostHello, Listing, Start, Started

ROOT = "/srv/projects"
HELLO = {
    "type": "host_hello",
    "protocol": PROTOCOL_VERSION,
    "name": "build-box",
    "agents": [{"name": "sdk", "command": "python sdk_agent.py"}],
    "roots": [ROOT],
}


# --- the directories a host offers -------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> dict[str, str]:
    """A root with ``app/src`` in it, a secret directory beside it, and a symlink out of it."""
    root = tmp_path / "projects"
    (root / "app" / "src").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (root / "escape").symlink_to(tmp_path / "secret")
    (root / "inside").symlink_to(root / "app")
    return real_roots([str(root)])


def the_root(roots: dict[str, str]) -> str:
    return next(iter(roots))


def test_a_normal_subdirectory_resolves_to_its_real_path(disk):
    root = the_root(disk)
    assert resolve(disk, root, "app/src") == os.path.join(disk[root], "app", "src")


def test_the_root_itself_is_offered(disk):
    root = the_root(disk)
    assert resolve(disk, root, "") == disk[root]


def test_dot_dot_out_of_a_root_is_refused_in_words(disk):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), "app/../../secret")


def test_a_symlink_out_of_a_root_is_refused(disk):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), "escape")


def test_a_symlink_that_stays_inside_the_root_is_followed(disk):
    root = the_root(disk)
    assert resolve(disk, root, "inside/src") == os.path.join(disk[root], "app", "src")


def test_an_absolute_path_elsewhere_is_refused(disk, tmp_path):
    with pytest.raises(Outside, match="outside"):
        resolve(disk, the_root(disk), str(tmp_path / "secret"))


def test_a_root_the_host_was_not_given_is_refused(disk, tmp_path):
    with pytest.raises(Outside, match="not one of this host's directories"):
        resolve(disk, str(tmp_path), "")


def test_a_listing_is_one_level_directories_first_without_hidden_ones_or_escapes(disk):
    root = the_root(disk)
    Path(disk[root], "Notes.md").write_text("hi")
    Path(disk[root], ".git").mkdir()
    entries, more = listing(disk, root, "")
    assert [(e.name, e.dir) for e in entries] == [
        ("app", True),
        ("inside", True),
        ("Notes.md", False),
    ]
    assert more == 0


def test_a_listing_is_bounded_and_counts_what_it_left_out(tmp_path):
    for n in range(MAX_ENTRIES + 20):
        (tmp_path / f"d{n:04}").mkdir()
    for n in range(30):
        (tmp_path / f"f{n:02}.txt").write_text("")
    roots = real_roots([str(tmp_path)])
    entries, more = listing(roots, str(tmp_path), "")
    assert len(entries) == MAX_ENTRIES and all(e.dir for e in entries)
    assert more == 50


# --- the host process refuses what it was not given -------------------------------------------


def host_with(roots: list[str]) -> host_process.Host:
    options = host_process.HostOptions(
        server="ws://127.0.0.1:1", token="t", name="box", agents={"sdk": ["true"]}, roots=roots
    )
    return host_process.Host(options)


def start_frame(agent: str, root: str, path: str = "") -> Start:
    return Start(id=uuid.uuid4(), agent=agent, root=root, path=path, prompt="basic", token="t")


async def test_the_host_refuses_an_agent_it_was_not_given_and_starts_nothing(tmp_path):
    host = host_with([str(tmp_path)])
    await host.start(start_frame("bash", str(tmp_path)))
    reported = Started.model_validate_json(host.outbox[0])
    assert reported.error is not None and "offers no agent “bash”" in reported.error
    assert "sdk" in reported.error and not host.runners


async def test_the_host_refuses_to_start_outside_its_roots(disk):
    host = host_with(list(disk))
    await host.start(start_frame("sdk", the_root(disk), "escape"))
    reported = Started.model_validate_json(host.outbox[0])
    assert reported.error is not None and "outside" in reported.error and not host.runners


def test_an_agent_command_that_is_not_there_is_a_bad_command_line(tmp_path):
    code = host_process.main(
        ["--server", "ws://x", "--token", "t", "--agent", "a=no-such-agent-xyz", "--root", "."]
    )
    assert code == 3


def test_every_string_and_list_a_host_sends_is_bounded():
    listing = {"type": "listing", "id": str(uuid.uuid4()), "root": ROOT}
    too_many = [{"name": f"d{n}", "dir": True} for n in range(MAX_ENTRIES + 1)]
    for bad in (
        {**listing, "entries": too_many},
        {**listing, "entries": [{"name": "x" * 256}]},
        {**listing, "path": "p" * 5000},
    ):
        with pytest.raises(ValidationError):
            Listing.model_validate(bad)
    with pytest.raises(ValidationError):
        HostHello.model_validate({**HELLO, "agents": [{"name": "rm -rf /", "command": "x"}]})
    with pytest.raises(ValidationError):
        HostHello.model_validate({**HELLO, "roots": []})
