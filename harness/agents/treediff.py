"""A working tree read out of a sandbox, turned into a patch on the host (*tree truth*).

The tree arrives as the engine's tar stream of ``/testbed`` (harness/engine/interactive.py
``open_archive``); nothing of it runs and the sandbox's ``.git`` is never interpreted. On the
host, in a temporary directory of its own::

    <tmp>/tree/    the tree, materialised from the stream (every ``.git`` left out)
    <tmp>/git/     a repository of our own: config written here, no hooks, HEAD unborn,
                   objects/info/alternates -> the base's objects (the one-commit export)
    <tmp>/index    its index, seeded with the base tree (``git read-tree``)
    <tmp>/home/    an empty HOME and XDG_CONFIG_HOME for git

then ``git add -A`` and ``git diff --cached <base tree>``: what mini-swe-agent's own
``git add -A && git diff --cached`` submission prints (the tree's .gitignore honoured,
untracked files included, symlinks as links, binary files as git's "Binary files ... differ"
stub), measured against the base rather than whatever HEAD the agent left.

The stream is hostile. Materialising it: each path is walked from the top with
``O_NOFOLLOW`` directory descriptors, files are created ``O_EXCL | O_NOFOLLOW``, links are
written as links and never followed, so nothing is written or read through a symbolic link
and nothing lands outside ``<tmp>/tree``; absolute and ``..`` names, an entry inside a link,
an entry twice, a hard link to something not written: refused (:class:`WorkingTreeRefused`,
one message naming the path), as are trees past :class:`TreeLimits` (stream bytes, entries,
depth, path length) and patches past their limit. Devices and fifos are left out (git
records neither). A nested repository's ``.git`` is left out too, so its files are recorded
as files (the sandbox's git would record a gitlink that no patch applies).

Git runs with no system or global configuration (``GIT_CONFIG_NOSYSTEM``,
``GIT_CONFIG_GLOBAL=/dev/null``, no system attributes), hooks, fsmonitor and the untracked
cache off, no external diff or textconv: no filter or diff driver a tree's .gitattributes
names is defined, so it runs nothing. Git >= 2.32 is required: it reads a tree's own
.gitignore and .gitattributes without following links.
"""

from __future__ import annotations

import collections
import errno
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator

from harness.errors import InfrastructureError, WorkingTreeRefused

GIT_DIR_NAME = ".git"
#: ``mode`` of a symbolic link in git's listings
SYMLINK_MODE = "120000"
MIN_GIT = (2, 32)


@dataclass(frozen=True)
class TreeLimits:
    """What a working tree may be. Bytes of the tar stream (``.git`` and ignored files
    included), entries, directory depth, bytes of one path, bytes of the patch."""

    stream_bytes: int = 1 << 30
    entries: int = 500_000
    depth: int = 256
    path_bytes: int = 4000
    patch_bytes: int = 32 << 20


@dataclass(frozen=True)
class TreeDiff:
    """The tree's patch against the base (see the module's docstring). ``files``: every path
    the patch touches (both sides of a rename); ``binary_files``: those shown as git's
    binary stub; ``symlinks``: those that are a link on either side; ``sha256``: of
    ``patch`` as UTF-8."""

    patch: str
    files: tuple[str, ...]
    binary_files: tuple[str, ...]
    symlinks: tuple[str, ...]
    sha256: str


@dataclass(frozen=True)
class BaseTree:
    """What the tree is compared with: a git tree id and the objects directory holding it."""

    objects: Path
    tree: str


def refused(path: str | None, why: str) -> WorkingTreeRefused:
    where = f" at {shown(path)}" if path is not None else ""
    return WorkingTreeRefused(f"the working tree cannot be diffed{where}: {why}")


def shown(path: str, limit: int = 200) -> str:
    """A hostile path made printable on one line (repr escapes newlines and the rest), cut."""
    text = repr(path)
    return text if len(text) <= limit else text[:limit] + "...'"


# ----------------------------------------------------------------------------- the stream
class CappedReader(io.RawIOBase):
    """A readable file over an iterator of chunks that refuses past ``limit`` bytes."""

    def __init__(self, chunks: Iterable[bytes], limit: int) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._view = memoryview(b"")
        self.limit = limit
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._view:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                return 0
            self.consumed += len(chunk)
            if self.consumed > self.limit:
                raise refused(None, f"the tree read out of the sandbox is over {self.limit} bytes")
            self._view = memoryview(chunk)
        size = min(len(buffer), len(self._view))
        buffer[:size] = self._view[:size]
        self._view = self._view[size:]
        return size


def member_parts(name: str, root: str) -> tuple[str, ...] | None:
    """The path components of a tar member under ``root`` (the archived directory's own
    name); None for ``root`` itself. Refuses absolute names, ``.`` and ``..`` components and
    anything outside ``root``."""
    parts = name.rstrip("/").split("/")
    if not parts or parts[0] != root or any(part in ("", ".", "..") for part in parts):
        raise refused(name, "the name is absolute, empty, outside the tree or holds '.' or '..'")
    return tuple(parts[1:]) or None


class _Directories:
    """Directory descriptors under a root opened without following links, a few kept."""

    KEEP = 64

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self._open: collections.OrderedDict[tuple[str, ...], int] = collections.OrderedDict()

    def fd(self, parts: tuple[str, ...], create: bool = True) -> int:
        """The descriptor of directory ``parts`` (created when missing). Refuses a component
        that is a link or not a directory."""
        if not parts:
            return self.root_fd
        if parts in self._open:
            self._open.move_to_end(parts)
            return self._open[parts]
        start = max((n for n in range(len(parts)) if parts[:n] in self._open), default=0)
        current = self._open[parts[:start]] if start else self.root_fd
        opened: list[int] = []
        try:
            for index in range(start, len(parts)):
                name = parts[index]
                try:
                    current = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                      dir_fd=current)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(name, 0o755, dir_fd=current)
                    current = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                      dir_fd=current)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise refused("/".join(parts[:index + 1]), "an entry lies under a symbolic link or a "
                                      "file (the tree changed while it was read?)") from None
                    raise
                opened.append(current)
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        for fd in opened[:-1]:
            os.close(fd)
        self._open[parts] = current
        while len(self._open) > self.KEEP:
            os.close(self._open.popitem(last=False)[1])
        return current

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


@dataclass
class Materialised:
    """What :func:`materialise` wrote: entries, bytes of file content, what it left out."""

    entries: int = 0
    file_bytes: int = 0
    skipped_git: int = 0
    skipped_special: int = 0


def materialise(stream: IO[bytes] | io.RawIOBase, dest: Path, root: str, limits: TreeLimits) -> Materialised:
    """Write the tar ``stream`` of directory ``root`` into the empty directory ``dest`` (see
    the module's docstring). Raises WorkingTreeRefused, naming the path."""
    stats = Materialised()
    written: set[tuple[str, ...]] = set()
    root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    dirs = _Directories(root_fd)
    name = root
    try:
        with tarfile.open(fileobj=stream, mode="r|", bufsize=1 << 20, encoding="utf-8",
                          errors="surrogateescape") as tar:
            for member in tar:
                name = member.name
                parts = member_parts(name, root)
                if parts is None:
                    continue
                if GIT_DIR_NAME in parts:
                    stats.skipped_git += 1
                    continue
                rel = "/".join(parts)
                stats.entries += 1
                _check_limits(rel, parts, stats, limits)
                if not (member.isdir() or member.isreg() or member.issym() or member.islnk()):
                    stats.skipped_special += 1
                    continue
                parent = dirs.fd(parts[:-1])
                if member.isdir():
                    _make_dir(parent, parts[-1], rel)
                elif member.isreg():
                    stats.file_bytes += _write_file(parent, parts[-1], tar.extractfile(member), member.mode)
                    written.add(parts)
                elif member.issym():
                    os.symlink(member.linkname, parts[-1], dir_fd=parent)
                else:
                    source = member_parts(member.linkname, root)
                    if source is None or source not in written:
                        raise refused(rel, f"a hard link to {shown(member.linkname)}, which is not a file of the "
                                      "tree the harness reads (its .git is never read)")
                    os.link(source[-1], parts[-1], src_dir_fd=dirs.fd(source[:-1], create=False),
                            dst_dir_fd=parent, follow_symlinks=False)
                    written.add(parts)
    except WorkingTreeRefused:
        raise
    except tarfile.TarError as exc:
        raise InfrastructureError(f"the tree's tar stream is unreadable after {shown(name)}: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR):
            raise refused(name, f"{os.strerror(exc.errno or 0)} (an entry twice, or a name the host cannot "
                          "hold)") from None
        raise InfrastructureError(f"writing the tree on the host failed at {shown(name)}: {exc}") from None
    finally:
        dirs.close()
        os.close(root_fd)
    return stats


def _check_limits(rel: str, parts: tuple[str, ...], stats: Materialised, limits: TreeLimits) -> None:
    if stats.entries > limits.entries:
        raise refused(rel, f"the tree has more than {limits.entries} entries")
    if len(parts) > limits.depth:
        raise refused(rel, f"deeper than {limits.depth} directories")
    if len(rel.encode("utf-8", "surrogateescape")) > limits.path_bytes:
        raise refused(rel, f"a path over {limits.path_bytes} bytes")


def _make_dir(parent: int, name: str, rel: str) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:  # created as the parent of an earlier entry: fine; anything else was written twice
        if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise refused(rel, "a directory where another entry of that name was already written") from None


def _write_file(parent: int, name: str, source: IO[bytes] | None, mode: int) -> int:
    """Create ``name`` (never through a link, never over an entry) with ``source``'s bytes;
    executable when the owner's x bit is set (the only mode bit git records)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o755 if mode & 0o100 else 0o644, dir_fd=parent)
    size = 0
    try:
        while source is not None:
            block = source.read(1 << 20)
            if not block:
                break
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
            size += len(block)
    finally:
        os.close(fd)
    return size


# ----------------------------------------------------------------------------- git
def git_version(text: str) -> tuple[int, int]:
    """(major, minor) of ``git version 2.39.5`` (and vendor suffixes); (0, 0) if unreadable."""
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def git_env(scratch: Path) -> dict[str, str]:
    """The environment host git runs in: nothing of the user's or the system's configuration."""
    home = scratch / "home"
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1", "LC_ALL": "C", "GIT_DIR": str(scratch / "git"),
            "GIT_WORK_TREE": str(scratch / "tree"), "GIT_INDEX_FILE": str(scratch / "index")}


#: the scratch repository's configuration: nothing runs, nothing is guessed from the host
REPO_CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tautocrlf = false
\tfsmonitor = false
\tuntrackedCache = false
\thooksPath = /dev/null
\tattributesFile = /dev/null
\texcludesFile = /dev/null
[gc]
\tauto = 0
[maintenance]
\tauto = false
"""


def init_scratch(scratch: Path, base: BaseTree) -> None:
    """The layout of the module's docstring, minus the tree."""
    git = scratch / "git"
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (git / sub).mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text(REPO_CONFIG)
    (git / "objects" / "info" / "alternates").write_text(f"{base.objects.resolve()}\n")
    (scratch / "home").mkdir()
    (scratch / "tree").mkdir()


def _git(scratch: Path, *args: str, limit: int = 1 << 20, what: str = "") -> bytes:
    """Run host git in the scratch repository; its stdout, refused past ``limit`` bytes."""
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(["git", *args], cwd=scratch / "tree", env=git_env(scratch), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None
        out = proc.stdout.read(limit + 1)
        if len(out) > limit:
            proc.kill()
            proc.wait()
            raise refused(None, f"{what or 'git ' + args[0]} printed more than {limit} bytes")
        proc.stdout.close()
        code = proc.wait()
        errors.seek(0)
        message = errors.read(4000).decode("utf-8", "replace").strip()
    if code != 0:
        if args[0] == "add":  # git refused a path of the tree (a symlinked .gitmodules, ".GIT/...")
            raise refused(None, f"git add -A failed: {message}")
        raise InfrastructureError(f"git {' '.join(args[:2])} failed (exit {code}): {message}")
    return out


def check_git() -> None:
    """Raise InfrastructureError unless the host's git is recent enough (module docstring)."""
    try:
        text = subprocess.run(["git", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"the host's git cannot run: {exc}") from None
    if git_version(text) < MIN_GIT:
        raise InfrastructureError(f"the agent stage needs git >= {'.'.join(map(str, MIN_GIT))} on the host "
                                  f"(it reads a tree's .gitignore without following links); found {text.strip()!r}")


def split_z(data: bytes) -> list[str]:
    return [field.decode("utf-8", "replace") for field in data.split(b"\0")]


def parse_raw(data: bytes) -> tuple[list[str], list[str]]:
    """(every path, the symlinks) of ``git diff --raw -z --no-renames``."""
    fields = split_z(data)
    paths, links = [], []
    for meta, path in zip(fields[0::2], fields[1::2]):
        modes = meta.lstrip(":").split()[:2]
        paths.append(path)
        if SYMLINK_MODE in modes:
            links.append(path)
    return paths, links


def parse_numstat_binary(data: bytes) -> list[str]:
    """The paths ``git diff --numstat -z --no-renames`` counts as binary (``-\\t-\\tpath``)."""
    return [record[4:] for record in split_z(data) if record.startswith("-\t-\t")]


def diff_tree(chunks: Iterable[bytes], root: str, base: BaseTree, limits: TreeLimits | None = None,
              scratch_dir: Path | None = None) -> TreeDiff:
    """The patch of the tar stream ``chunks`` of directory ``root`` against ``base``.
    Raises WorkingTreeRefused (the tree's doing) or InfrastructureError."""
    limits = limits or TreeLimits()
    check_git()
    scratch = Path(tempfile.mkdtemp(prefix="harness-tree-", dir=scratch_dir))
    try:
        init_scratch(scratch, base)
        materialise(CappedReader(chunks, limits.stream_bytes), scratch / "tree", root, limits)
        _git(scratch, "read-tree", base.tree)
        _git(scratch, "add", "-A")
        common = ("diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv")
        patch = _git(scratch, *common, base.tree, "--", limit=limits.patch_bytes, what="the patch")
        paths, links = parse_raw(_git(scratch, *common, "--no-renames", "--raw", "-z", base.tree, "--",
                                      limit=64 << 20))
        binary = parse_numstat_binary(_git(scratch, *common, "--no-renames", "--numstat", "-z", base.tree, "--",
                                           limit=64 << 20))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = patch.decode("utf-8", errors="replace")
    return TreeDiff(text, tuple(paths), tuple(binary), tuple(links), hashlib.sha256(text.encode("utf-8")).hexdigest())
