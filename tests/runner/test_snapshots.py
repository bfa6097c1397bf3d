"""Snapshots of a git working tree (``activity/runner/snapshots.py``): the whole change an agent
made in a run, taken without writing anything of the user's but blobs and trees, and without
running anything the work tree or the repository's config names (hooks, filters, fsmonitor)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from activity.runner import snapshots
from activity.runner.snapshots import FILE_BYTES, FileCount, SnapshotError, WorkTree, cut


@pytest.fixture(autouse=True)
def _own_git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Git reads a home of the test's own: its identity, and no one's aliases, hooks or filters."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)


def git(repo: Path, *args: str) -> str:
    """The test's own git, as a person would run it."""
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, check=True, env={**os.environ}
    )
    return done.stdout.decode(errors="surrogateescape")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit: three tracked files and a .gitignore for ``*.log``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "kept.txt").write_text("kept\n")
    (repo / "edited.txt").write_text("one\ntwo\n")
    (repo / "deleted.txt").write_text("gone soon\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    return repo


async def opened(path: Path) -> WorkTree:
    tree = await WorkTree.open(str(path))
    assert isinstance(tree, WorkTree), tree
    return tree


def files_of(repo: Path, tree: str) -> dict[str, str]:
    """Path → mode of every entry of a snapshot."""
    entries = git(repo, "ls-tree", "-r", "-z", tree).split("\0")
    return {e.split("\t", 1)[1]: e.split(" ", 1)[0] for e in entries if e}


# --- the whole change -------------------------------------------------------------------------


async def test_a_runs_whole_change_shows_a_new_file_an_edited_one_and_a_deleted_one_only(repo):
    work = await opened(repo)
    start = await work.snapshot()
    (repo / "new.txt").write_text("fresh\n")
    (repo / "edited.txt").write_text("one\nTWO\n")
    (repo / "deleted.txt").unlink()
    patch = await work.diff(start, await work.snapshot(), 100_000)
    assert set(patch.files) == {
        FileCount("deleted.txt", 0, 1),
        FileCount("edited.txt", 1, 1),
        FileCount("new.txt", 1, 0),
    }
    assert patch.cut_bytes == 0
    assert "diff --git a/new.txt b/new.txt\nnew file mode 100644\n" in patch.text
    assert "diff --git a/deleted.txt b/deleted.txt\ndeleted file mode 100644\n" in patch.text
    assert "-two\n+TWO\n" in patch.text
    assert patch.text.count("diff --git") == 3 and "kept" not in patch.text


async def test_ignored_files_are_left_out_and_untracked_ones_are_in(repo):
    (repo / "debug.log").write_text("noise\n")
    (repo / "notes.md").write_text("mine\n")
    work = await opened(repo)
    assert set(files_of(repo, await work.snapshot())) == {
        ".gitignore",
        "deleted.txt",
        "edited.txt",
        "kept.txt",
        "notes.md",
    }


async def test_a_cwd_in_a_subdirectory_snapshots_the_whole_repository(repo):
    (repo / "sub" / "deeper").mkdir(parents=True)
    (repo / "sub" / "deeper" / "inner.txt").write_text("inner\n")
    work = await opened(repo / "sub" / "deeper")
    assert work.top == str(repo)
    assert {"kept.txt", "sub/deeper/inner.txt"} <= set(files_of(repo, await work.snapshot()))


async def test_a_repository_with_no_commits_yet_snapshots_its_untracked_files(tmp_path):
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "first.txt").write_text("first\n")
    work = await opened(repo)
    start = await work.snapshot()
    assert files_of(repo, start) == {"first.txt": "100644"}
    (repo / "second.txt").write_text("second\n")
    patch = await work.diff(start, await work.snapshot(), 10_000)
    assert patch.files == (FileCount("second.txt", 1, 0),)
    assert not (repo / ".git" / "index").exists()  # still no index of the user's


async def test_a_symlink_and_an_executable_bit_show_in_the_diff(repo):
    work = await opened(repo)
    start = await work.snapshot()
    (repo / "link").symlink_to("kept.txt")
    (repo / "edited.txt").chmod(0o755)
    end = await work.snapshot()
    assert files_of(repo, end)["link"] == "120000"
    assert git(repo, "cat-file", "blob", f"{end}:link") == "kept.txt"
    patch = await work.diff(start, end, 10_000)
    assert "diff --git a/link b/link\nnew file mode 120000\n" in patch.text
    assert "+kept.txt\n\\ No newline at end of file\n" in patch.text
    assert "diff --git a/edited.txt b/edited.txt\nold mode 100644\nnew mode 100755\n" in patch.text


async def test_names_with_a_newline_a_leading_quote_or_bytes_not_utf8_are_snapshotted(repo):
    names = [b"line\nbreak.txt", b'"quoted".txt', b"back\\slash\r", b"caf\xe9.txt"]
    for name in names:
        (repo / os.fsdecode(name)).write_bytes(name + b"\n")
    work = await opened(repo)
    tree = await work.snapshot()
    for name in names:
        shown = subprocess.run(
            ["git", "cat-file", "blob", f"{tree}:{os.fsdecode(name)}"],
            cwd=repo,
            capture_output=True,
            check=True,
        )
        assert shown.stdout == name + b"\n"


async def test_a_submodule_is_kept_as_the_users_index_has_it(repo):
    commit = git(repo, "rev-parse", "HEAD").strip()
    (repo / "sub").mkdir()
    (repo / "sub" / "file").write_text("in another repository\n")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},sub")
    work = await opened(repo)
    tree = await work.snapshot()
    assert f"160000 commit {commit}\tsub" in git(repo, "ls-tree", tree)


async def test_files_a_sparse_checkout_keeps_off_the_disk_are_not_taken_as_deleted(repo):
    git(repo, "sparse-checkout", "set", "--no-cone", "/kept.txt")
    assert not (repo / "edited.txt").exists()
    work = await opened(repo)
    tree = await work.snapshot()
    assert git(repo, "rev-parse", f"{tree}:edited.txt") == git(repo, "rev-parse", "HEAD:edited.txt")


# --- the user's repository is left as it was ---------------------------------------------------


def state(repo: Path) -> dict[str, object]:
    """Everything of the user's a snapshot must not change, and every object in the store."""
    dot = repo / ".git"
    files = {
        str(p.relative_to(dot)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in dot.rglob("*")
        if p.is_file() and "objects" not in p.relative_to(dot).parts
    }
    return {
        "files": files,  # the index, HEAD, refs, config, logs, stash: byte for byte
        "head": git(repo, "rev-parse", "HEAD"),
        "refs": git(repo, "for-each-ref"),
        "stash": git(repo, "stash", "list"),
        "status": git(repo, "--no-optional-locks", "status", "--porcelain"),
    }


def objects(repo: Path) -> dict[str, str]:
    listed = git(
        repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"
    )
    return dict(line.split(" ") for line in listed.splitlines())


async def test_snapshots_leave_the_users_index_head_refs_stash_and_status_as_they_were(repo):
    (repo / "kept.txt").write_text("stashed change\n")
    git(repo, "stash", "-q")
    (repo / "edited.txt").write_text("staged\n")
    git(repo, "add", "edited.txt")
    (repo / "kept.txt").write_text("unstaged\n")
    (repo / "untracked.txt").write_text("untracked\n")
    before, objects_before = state(repo), objects(repo)
    assert before["stash"] and before["status"]
    work = await opened(repo)
    start = await work.snapshot()
    (repo / "later.txt").write_text("later\n")
    await work.diff(start, await work.snapshot(), 10_000)
    after = state(repo)
    assert after == before | {"status": after["status"]}
    assert "?? later.txt\n" in str(after["status"])  # the file itself, nothing else
    (repo / "later.txt").unlink()
    assert state(repo) == before
    added = objects(repo).items() - objects_before.items()
    assert added and {kind for _, kind in added} <= {"blob", "tree"}


async def test_a_gitattributes_filter_or_textconv_never_runs_and_files_are_snapshotted_raw(repo):
    marker = repo.parent / "marker"
    git(repo, "config", "filter.evil.clean", f"touch '{marker}-clean' && tr a-z A-Z")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "filter.evil.smudge", f"touch '{marker}-smudge' && cat")
    git(repo, "config", "diff.evil.textconv", f"touch '{marker}-textconv' && cat")
    git(repo, "config", "diff.external", f"touch '{marker}-external'")
    work = await opened(repo)
    start = await work.snapshot()
    # What an agent may write: attributes naming the filter and the textconv.
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    (repo / "secret.txt").write_text("lower case\n")
    end = await work.snapshot()
    patch = await work.diff(start, end, 10_000)
    assert "+lower case\n" in patch.text
    assert git(repo, "cat-file", "blob", f"{end}:secret.txt") == "lower case\n"
    assert list(repo.parent.glob("marker*")) == []
    git(repo, "add", "secret.txt")  # the test's control: plain git runs the filter
    assert (repo.parent / "marker-clean").exists()


async def test_no_hook_and_no_fsmonitor_named_in_the_repositorys_config_runs(repo):
    marker = repo.parent / "marker"
    hooks = repo.parent / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-index-change", "post-checkout", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch '{marker}-{hook}'\n")
        (hooks / hook).chmod(0o755)
    fsmonitor = repo.parent / "fsmonitor"
    fsmonitor.write_text(f"#!/bin/sh\ntouch '{marker}-fsmonitor'\nexit 1\n")
    fsmonitor.chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "core.fsmonitor", str(fsmonitor))
    work = await opened(repo)
    start = await work.snapshot()
    (repo / "new.txt").write_text("new\n")
    await work.diff(start, await work.snapshot(), 10_000)
    assert list(repo.parent.glob("marker*")) == []
    git(repo, "add", "new.txt")  # the test's control: plain git runs them
    assert (repo.parent / "marker-fsmonitor").exists()
    assert (repo.parent / "marker-post-index-change").exists()


# --- no working tree ----------------------------------------------------------------------------


async def test_a_directory_outside_git_gives_the_reason(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    reason = await WorkTree.open(str(plain))
    assert isinstance(reason, str) and reason.startswith("not in a git working tree: ")
    assert "not a git repository" in reason


async def test_a_bare_repository_or_a_git_directory_is_not_a_working_tree(tmp_path, repo):
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    for place in (tmp_path / "bare.git", repo / ".git" / "refs"):
        reason = await WorkTree.open(str(place))
        assert reason == (
            "not in a git working tree: "
            "git rev-parse failed: fatal: this operation must be run in a work tree"
        )


async def test_no_git_on_the_path_gives_the_reason(repo, monkeypatch):
    monkeypatch.setenv("PATH", str(repo / "nowhere"))
    reason = await WorkTree.open(str(repo))
    assert isinstance(reason, str) and "cannot run git" in reason


async def test_a_git_that_hangs_is_stopped_after_git_seconds_with_the_reason(repo, monkeypatch):
    bin = repo.parent / "bin"
    bin.mkdir()
    real = shutil.which("git")
    (bin / "git").write_text(
        f'#!/bin/sh\ncase "$*" in *rev-parse*) exec {real} "$@";; esac\n'
        f"echo $$ > '{bin}/pid'\nexec sleep 30\n"
    )
    (bin / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(snapshots, "GIT_SECONDS", 0.2)
    work = await opened(repo)
    with pytest.raises(SnapshotError, match=r"^git ls-files took more than 0.2 s$"):
        await work.snapshot()
    pid = int((bin / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


# --- bounds -------------------------------------------------------------------------------------


async def test_a_diff_over_its_limit_is_cut_at_a_line_end_and_says_how_many_bytes_are_left_out(
    repo,
):
    work = await opened(repo)
    start = await work.snapshot()
    (repo / "a.txt").write_text("".join(f"line {n}\n" for n in range(1000)))
    (repo / "b.txt").write_text("the last file\n")
    end = await work.snapshot()
    whole = await work.diff(start, end, 1_000_000)
    patch = await work.diff(start, end, 500)
    assert whole.cut_bytes == 0 and len(patch.text.encode()) <= 500 and patch.text.endswith("\n")
    assert whole.text.startswith(patch.text)
    assert patch.cut_bytes == len(whole.text.encode()) - len(patch.text.encode()) > 0
    assert whole.text[len(patch.text) - 1] == "\n"  # the cut is at a line end
    # The counts stay whole: every file, every line.
    assert patch.files == whole.files == (FileCount("a.txt", 1000, 0), FileCount("b.txt", 1, 0))


def test_text_is_cut_to_its_limit_in_utf8_even_where_invalid_bytes_grow_into_replacements():
    head = b"ok\n" + b"\xff" * 4 + b"\n" + b"tail\n"
    assert cut(head, len(head), 100) == ("ok\n" + "\ufffd" * 4 + "\ntail\n", len(head))
    assert cut(head, len(head), 14) == ("ok\n", 3)  # the second line is 13 bytes once decoded
    assert cut(b"ab\ncd", 99, 100) == ("ab\n", 3)  # a line git was still writing is left out
    assert cut(b"ab\ncd", 5, 100) == ("ab\ncd", 5)  # the output's own unterminated end is kept


async def test_a_file_over_file_bytes_is_left_out_and_counted(repo):
    with open(repo / "huge.bin", "wb") as huge:
        huge.truncate(FILE_BYTES + 1)
    with open(repo / "edge.bin", "wb") as edge:
        edge.truncate(FILE_BYTES)
    work = await opened(repo)
    files = files_of(repo, await work.snapshot())
    assert "edge.bin" in files and "huge.bin" not in files
    assert work.skipped == 1
    (repo / "huge.bin").unlink()
    await work.snapshot()
    assert work.skipped == 0


async def test_a_second_snapshot_with_nothing_changed_gives_the_same_tree(repo):
    (repo / "untracked.txt").write_text("here\n")
    (repo / "link").symlink_to("kept.txt")
    work = await opened(repo)
    first = await work.snapshot()
    assert await work.snapshot() == first
    assert await (await opened(repo)).snapshot() == first  # the cache only saves work


async def test_a_second_snapshot_reads_again_only_files_whose_stat_changed(repo):
    path = repo / "kept.txt"
    long_ago = time.time_ns() - 60 * 10**9  # not written just now: its stat is trusted
    os.utime(path, ns=(long_ago, long_ago))
    work = await opened(repo)
    first = await work.snapshot()
    seen = path.stat()
    with open(path, "r+") as same_inode:
        same_inode.write("KEPT\n")  # same size
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    assert await work.snapshot() == first  # trusted: the stat is as it was
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns + 1))
    second = await work.snapshot()
    assert git(repo, "cat-file", "blob", f"{second}:kept.txt") == "KEPT\n"


async def test_a_file_written_just_now_is_read_again_even_with_the_same_stat(repo):
    path = repo / "kept.txt"
    work = await opened(repo)
    first = await work.snapshot()  # kept.txt's mtime is within the racy window
    seen = path.stat()
    with open(path, "r+") as same_inode:
        same_inode.write("KEPT\n")  # same size, and the same mtime below: one clock tick
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    second = await work.snapshot()
    assert second != first and git(repo, "cat-file", "blob", f"{second}:kept.txt") == "KEPT\n"
