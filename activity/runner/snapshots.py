"""Snapshots of a git working tree, so the runner can show the whole change an agent made in a run.

At the start of a run the runner snapshots the tree the agent works in; at the end of each turn it
snapshots again and diffs the two trees. A snapshot is a git tree object built in a temporary index
of its own, untracked (not ignored) files included; the user's index, refs, stash, HEAD and config
are never written, and only blobs and trees are added to the object store.

The work tree is the agent's to write: it may add a ``.gitattributes`` whose filter or textconv
would run a command, and the repository's config may name hooks or an fsmonitor. So no command
here runs any of them: hooks and the fsmonitor are switched off on every command, nothing calls
``git add`` (whose clean filters run code), files are listed, ``lstat``-ed and hashed raw
(``hash-object --no-filters``), and diffs are taken without external diff or textconv.

Every failure is a reason (``WorkTree.open`` returns one, the rest raise ``SnapshotError``):
nothing here should stop the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

GIT_SECONDS = 60  # per git command
FILE_BYTES = 8 * 1024 * 1024  # a bigger file is left out of a snapshot
RACY_NS = 2_000_000_000  # files changed this recently are never taken from the cache
ERROR_BYTES = 4096  # of a git command's standard error, for the reason
GITLINK = "160000"

# Every command: no hooks, no fsmonitor, no untracked cache (it would be saved in the user's
# index), no colour, no split index (its shared file would be written in .git), and the same
# diff however the user configured theirs.
SAFE = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.untrackedCache=false"),
    *("-c", "core.splitIndex=false"),
    *("-c", "color.ui=never"),
    *("-c", "core.quotepath=off"),
    *("-c", "diff.noprefix=false"),
    *("-c", "diff.mnemonicPrefix=false"),
    *("-c", "diff.relative=false"),
)
DIFF = (
    *("--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--submodule=short"),
    *("--src-prefix=a/", "--dst-prefix=b/"),
)
TREE_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

type Stat = tuple[int, int, int, int]  # st_size, st_mtime_ns, st_ino, st_mode


class SnapshotError(Exception):
    """A git command failed or took too long; ``str()`` is the reason, for people."""


@dataclass(frozen=True)
class FileCount:
    """Lines added and removed in one file; ``None`` for a binary file."""

    path: str
    added: int | None
    removed: int | None


@dataclass(frozen=True)
class Patch:
    """A diff's text, cut at a line end to its limit, and every file's counts, whole."""

    text: str
    files: tuple[FileCount, ...]
    cut_bytes: int  # bytes of git's output left out of ``text``; 0 if it is whole


class WorkTree:
    """The git working tree a run's directory is in, and a cache of the files hashed so far."""

    def __init__(self, top: str, env: Mapping[str, str]) -> None:
        self.top = top  # the repository's top level: every command runs there
        self.skipped = 0  # files left out of the last snapshot, too big (FILE_BYTES)
        self._env = dict(env)
        self._hashed: dict[str, tuple[Stat, str]] = {}

    @classmethod
    async def open(cls, cwd: str) -> WorkTree | str:
        """The working tree ``cwd`` is in (maybe a subdirectory of it), or why there is none."""
        env = git_env()
        try:
            out = await git(cwd, env, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
        except SnapshotError as error:
            return f"not in a git working tree: {error}"
        inside, _, top = out.decode(errors="surrogateescape").partition("\n")
        if inside != "true" or not top.endswith("\n"):
            return "not in a git working tree: git found no work tree here"
        return cls(top.removesuffix("\n"), env)

    async def snapshot(self) -> str:
        """The id of a tree of every file in the work tree now, as it is on disk."""
        listed, kept = await self._listed(), await self._kept()
        with tempfile.TemporaryDirectory(prefix="koruweb-snapshot-") as temp:
            entries, self.skipped = await self._entries(listed, kept, temp)
            env = {**self._env, "GIT_INDEX_FILE": os.path.join(temp, "index")}
            lines = b"".join(
                f"{mode} {sha}\t".encode() + path + b"\0" for path, (mode, sha) in entries.items()
            )
            await git(self.top, env, "update-index", "--add", "-z", "--index-info", stdin=lines)
            return (await git(self.top, env, "write-tree")).decode().strip()

    async def diff(self, old: str, new: str, limit: int) -> Patch:
        """The change from tree ``old`` to tree ``new``: at most ``limit`` bytes of UTF-8 text."""
        if not (TREE_ID.fullmatch(old) and TREE_ID.fullmatch(new)):
            raise SnapshotError("a snapshot id is not a git object id")
        numstat = await git(self.top, self._env, "diff", *DIFF, "--numstat", "-z", old, new)
        head, total = await _git(self.top, self._env, ("diff", *DIFF, old, new), keep=limit)
        text, kept = cut(head, total, limit)
        return Patch(text, tuple(parse_numstat(numstat)), total - kept)

    async def _listed(self) -> list[bytes]:
        """Every path in the user's index or untracked and not ignored, each once. The user's
        index is read, never written: ``ls-files`` does not refresh it, and optional locks are
        off for every command."""
        args = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        out = await git(self.top, self._env, *args)
        return list(dict.fromkeys(p for p in out.split(b"\0") if p))

    async def _kept(self) -> dict[bytes, tuple[str, str]]:
        """Entries taken as the user's index has them: submodules (gitlinks), whose checkout is
        another repository, and files a sparse checkout keeps off the disk (skip-worktree)."""
        out = await git(self.top, self._env, "ls-files", "-z", "-s", "-t")
        kept: dict[bytes, tuple[str, str]] = {}
        for record in out.split(b"\0"):
            info, _, path = record.partition(b"\t")
            tag, mode, sha, stage = (info.decode().split(" ") + ["", "", "", ""])[:4]
            if stage == "0" and (mode == GITLINK or tag == "S"):
                kept[path] = (mode, sha)
        return kept

    async def _entries(
        self, listed: list[bytes], kept: dict[bytes, tuple[str, str]], temp: str
    ) -> tuple[dict[bytes, tuple[str, str]], int]:
        """Mode and blob of each path (hashing only the files whose stat changed), and how many
        files were too big. Paths missing on disk, directories and special files are left out."""
        entries = dict(kept)
        hashed: dict[str, tuple[Stat, str]] = {}
        # A file written within RACY_NS of now may change again within its mtime's tick with
        # the same size: it is hashed again next time rather than trusted (git's racy rule).
        racy = time.time_ns() - RACY_NS
        todo: list[tuple[bytes, str, Stat, str]] = []  # path, mode, stat, file to hash
        skipped = 0
        for path in listed:
            if path in kept:
                continue
            name = os.fsdecode(path)
            try:
                info = os.lstat(os.path.join(self.top, name))
            except OSError:
                continue  # deleted: absent from the snapshot
            key: Stat = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                mode = "120000"
            elif not stat.S_ISREG(info.st_mode):
                continue  # a directory (an untracked repository, a file turned into one), a pipe
            elif info.st_size > FILE_BYTES:
                skipped += 1
                continue
            else:
                mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
            if (seen := self._hashed.get(name)) and seen[0] == key:
                entries[path], hashed[name] = (mode, seen[1]), seen
            elif mode != "120000":
                todo.append((path, mode, key, name))
            elif link := _link_file(self.top, name, temp, len(todo)):
                todo.append((path, mode, key, link))
        shas = await self._hash([source for *_, source in todo])
        for (path, mode, key, _), sha in zip(todo, shas, strict=True):
            entries[path] = (mode, sha)
            if key[1] < racy:
                hashed[os.fsdecode(path)] = (key, sha)
        self._hashed = hashed  # only what is there now: the cache does not grow with deletions
        return entries, skipped

    async def _hash(self, files: list[str]) -> list[str]:
        """Blob ids of ``files`` (relative to the top, or absolute), written to the object
        store raw, by one git process."""
        if not files:
            return []
        paths = b"".join(quote(os.fsencode(f)) + b"\n" for f in files)
        args = ("hash-object", "-w", "--no-filters", "--stdin-paths")
        shas = (await git(self.top, self._env, *args, stdin=paths)).decode().split()
        if len(shas) != len(files):
            raise SnapshotError(f"git hash-object gave {len(shas)} ids for {len(files)} files")
        return shas


def git_env() -> dict[str, str]:
    """The runner's environment without any ``GIT_*`` variable (one naming another repository,
    index or config would redirect every command), never prompting, locking or translating."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


async def git(cwd: str, env: Mapping[str, str], *args: str, stdin: bytes | None = None) -> bytes:
    """``git ARGS``' whole output; raises ``SnapshotError`` if it fails."""
    out, _ = await _git(cwd, env, args, stdin=stdin)
    return out


async def _git(
    cwd: str,
    env: Mapping[str, str],
    args: tuple[str, ...],
    *,
    stdin: bytes | None = None,
    keep: int | None = None,
) -> tuple[bytes, int]:
    """The first ``keep`` bytes of ``git ARGS``' output (all of it if ``keep`` is None) and its
    whole length, read as it comes so a huge diff is never held whole in memory."""
    try:
        process = await asyncio.create_subprocess_exec(
            *("git", "--no-pager", *SAFE, *args),
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:  # no git on PATH, or cwd gone
        raise SnapshotError(f"cannot run git: {error}") from None
    assert process.stdout is not None and process.stderr is not None
    try:
        async with asyncio.timeout(GIT_SECONDS):
            (out, total), (err, _), _ = await asyncio.gather(
                _read(process.stdout, keep),
                _read(process.stderr, ERROR_BYTES),
                _feed(process, stdin),
            )
            code = await process.wait()
    except TimeoutError:
        raise SnapshotError(f"git {args[0]} took more than {GIT_SECONDS} s") from None
    finally:
        if process.returncode is None:  # timed out, or the caller was cancelled
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if code != 0:
        message = err.decode(errors="replace").strip().splitlines() or [f"exit status {code}"]
        raise SnapshotError(f"git {args[0]} failed: {message[0]}")
    return out, total


async def _read(stream: asyncio.StreamReader, keep: int | None) -> tuple[bytes, int]:
    """The first ``keep`` bytes of a stream (all if None) and how many it had, read to its end."""
    chunks: list[bytes] = []
    held = total = 0
    while chunk := await stream.read(1 << 16):
        total += len(chunk)
        if keep is None or held < keep:
            chunk = chunk if keep is None else chunk[: keep - held]
            chunks.append(chunk)
            held += len(chunk)
    return b"".join(chunks), total


async def _feed(process: asyncio.subprocess.Process, data: bytes | None) -> None:
    """Write ``data`` to the process's input and close it (a git that died early is reported by
    its exit status, not here)."""
    if data is None or process.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(data)
        await process.stdin.drain()
        process.stdin.close()
        await process.stdin.wait_closed()


def _link_file(top: str, name: str, temp: str, number: int) -> str:
    """A file in ``temp`` holding the target of the symlink ``name`` (git stores a symlink as a
    blob of its target), or "" if it is no longer a symlink."""
    try:
        target = os.fsencode(os.readlink(os.path.join(top, name)))
    except OSError:
        return ""
    file = os.path.join(temp, f"link-{number}")
    with open(file, "wb") as out:
        out.write(target)
    return file


def quote(path: bytes) -> bytes:
    """``path`` C-quoted, as ``hash-object --stdin-paths`` unquotes a line that starts with a
    double quote: a name may hold a newline, a carriage return or a leading quote."""
    out = bytearray(b'"')
    for byte in path:
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def cut(head: bytes, total: int, limit: int) -> tuple[str, int]:
    """The text of ``head`` (the first bytes of an output ``total`` bytes long), at most
    ``limit`` bytes of UTF-8 once decoded, cut at a line end; and how many bytes of it were kept.

    A line is decoded on its own: a newline is never part of a UTF-8 sequence, and an invalid
    byte becomes U+FFFD, three bytes, so the text may be longer than the bytes it came from."""
    lines = head.split(b"\n")
    last = lines.pop()  # after the last newline: kept only if the output ends there
    whole = [line + b"\n" for line in lines] + ([last] if last and len(head) == total else [])
    text: list[str] = []
    size = kept = 0
    for line in whole:
        decoded = line.decode(errors="replace")
        size += len(decoded.encode())
        if size > limit:
            break
        text.append(decoded)
        kept += len(line)
    return "".join(text), kept


def parse_numstat(out: bytes) -> list[FileCount]:
    """``git diff --numstat -z``'s records (``added TAB removed TAB path NUL``; ``-`` for a
    binary file's counts) as counts."""
    counts: list[FileCount] = []
    for record in out.split(b"\0"):
        added, removed, path = (record.split(b"\t", 2) + [b"", b""])[:3]
        if path:
            counts.append(FileCount(path.decode(errors="replace"), _count(added), _count(removed)))
    return counts


def _count(number: bytes) -> int | None:
    """A numstat count: ``-`` (a binary file) is None."""
    return None if number == b"-" else int(number)
