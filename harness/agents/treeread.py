"""A working tree's tar stream materialised on the host, safely, writing only what differs
from the base (harness/agents/treediff.py turns it into a patch).

The stream is the engine's tar of ``/testbed`` (harness/engine/interactive.py
``open_archive``) and hostile. Each path is walked from the top with ``O_NOFOLLOW``
directory descriptors, files are created ``O_EXCL | O_NOFOLLOW``, links are written as links
and never followed: nothing is written or read through a symbolic link and nothing lands
outside the destination. Refused (:class:`~harness.errors.WorkingTreeRefused`, one message
naming the path): absolute and ``..`` names, an entry inside a link or a file, an entry twice,
a hard link to something that is not a file of the tree, and trees past :class:`TreeLimits`.
Left out: every ``.git`` (the sandbox's repository is never read; a nested repository's files
are then recorded as files, where the sandbox's git would record a gitlink no patch applies),
devices and fifos (git records neither), empty directories (nor those).

What is left out as *unchanged* (:attr:`Materialised.unchanged`): a file or link whose bytes
hash to the base's blob at the same path, with the same git mode; git is told so
(``skip-worktree``) instead of re-reading a copy of the base. Files named ``.git*``
(``.gitignore``, ``.gitattributes``, ...) are always written: git reads them from the tree.
"""

from __future__ import annotations

import collections
import errno
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator

from harness.errors import InfrastructureError, WorkingTreeRefused

GIT_DIR_NAME = ".git"
#: files at most this big are hashed in memory before it is decided whether to write them
IN_MEMORY = 8 << 20


@dataclass(frozen=True)
class TreeLimits:
    """What a working tree may be. Bytes of the tar stream (``.git`` and ignored files
    included), entries, directory depth, bytes of one path, bytes of the patch."""

    stream_bytes: int = 1 << 30
    entries: int = 500_000
    depth: int = 256
    path_bytes: int = 4000
    patch_bytes: int = 32 << 20


#: the base's entries: path -> (git mode, e.g. "100644", blob id)
BaseListing = dict[str, tuple[str, str]]


def refused(path: str | None, why: str) -> WorkingTreeRefused:
    where = f" at {shown(path)}" if path is not None else ""
    return WorkingTreeRefused(f"the working tree cannot be diffed{where}: {why}")


def shown(path: str, limit: int = 200) -> str:
    """A hostile path made printable on one line (repr escapes newlines and the rest), cut."""
    text = repr(path)
    return text if len(text) <= limit else text[:limit] + "...'"


def blob_id(data: bytes, hex_length: int = 40) -> str:
    """Git's id of a blob holding ``data`` (SHA-1, or SHA-256 for 64-digit ids)."""
    digest = hashlib.sha256() if hex_length == 64 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def git_mode(tar_mode: int) -> str:
    """The mode git records for a regular file: only the owner's x bit counts."""
    return "100755" if tar_mode & 0o100 else "100644"


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

    def fd(self, parts: tuple[str, ...]) -> int:
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
                current = _open_dir(current, parts[index], "/".join(parts[:index + 1]))
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


def _open_dir(parent: int, name: str, rel: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        os.mkdir(name, 0o755, dir_fd=parent)
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise refused(rel, "an entry lies under a symbolic link or a file (the tree changed while it "
                          "was read?)") from None
        raise


@dataclass
class Materialised:
    """What :func:`materialise` did: entries seen, bytes written, what it left out."""

    entries: int = 0
    file_bytes: int = 0
    skipped_git: int = 0
    skipped_special: int = 0
    #: paths equal to the base's (not written)
    unchanged: list[str] = field(default_factory=list)


class _Reader:
    """The state of one materialisation (see :func:`materialise`)."""

    def __init__(self, dirs: _Directories, root: str, limits: TreeLimits, base: BaseListing,
                 read_blob: Callable[[str], bytes]) -> None:
        self.dirs, self.root, self.limits, self.base, self.read_blob = dirs, root, limits, base, read_blob
        self.stats = Materialised()
        self.seen: set[tuple[str, ...]] = set()
        #: the directories entries were under (a file or link may not take one's place)
        self.parents: set[tuple[str, ...]] = set()
        #: files and links (written or not): nothing may lie under one; files: (mode, blob id, written)
        self.leaves: set[tuple[str, ...]] = set()
        self.files: dict[tuple[str, ...], tuple[str, str | None, bool]] = {}
        self.id_length = len(next(iter(base.values()))[1]) if base else 40

    def add(self, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        parts = member_parts(member.name, self.root)
        if parts is None:
            return
        if GIT_DIR_NAME in parts:
            self.stats.skipped_git += 1
            return
        rel = "/".join(parts)
        self._check(rel, parts, member.isdir())
        if member.isdir():
            return  # created when something is written under it (git records no directory)
        if not (member.isreg() or member.issym() or member.islnk()):
            self.stats.skipped_special += 1
            return
        self.leaves.add(parts)
        always = parts[-1].startswith(GIT_DIR_NAME)
        if member.isreg():
            self._file(parts, rel, tar.extractfile(member), member.size, git_mode(member.mode), always)
        elif member.issym():
            target = member.linkname.encode("utf-8", "surrogateescape")
            if not always and self.base.get(rel) == ("120000", blob_id(target, self.id_length)):
                self.stats.unchanged.append(rel)
            else:
                os.symlink(member.linkname, parts[-1], dir_fd=self.dirs.fd(parts[:-1]))
        else:
            self._hard_link(parts, rel, member.linkname, always)

    def _check(self, rel: str, parts: tuple[str, ...], is_dir: bool) -> None:
        self.stats.entries += 1
        limits = self.limits
        if self.stats.entries > limits.entries:
            raise refused(rel, f"the tree has more than {limits.entries} entries")
        if len(parts) > limits.depth:
            raise refused(rel, f"deeper than {limits.depth} directories")
        if len(rel.encode("utf-8", "surrogateescape")) > limits.path_bytes:
            raise refused(rel, f"a path over {limits.path_bytes} bytes")
        if parts in self.seen or parts in self.parents and not is_dir:
            raise refused(rel, "an entry twice (the tree changed while it was read?)")
        prefixes = [parts[:n] for n in range(1, len(parts))]
        if any(prefix in self.leaves for prefix in prefixes):
            raise refused(rel, "an entry lies under a symbolic link or a file (the tree changed while it was read?)")
        self.seen.add(parts)
        self.parents.update(prefixes)

    def _file(self, parts: tuple[str, ...], rel: str, source: IO[bytes] | None, size: int, mode: str,
              always: bool) -> None:
        expected = self.base.get(rel)
        base_id = expected[1] if expected is not None and expected[0] == mode and not always else None
        source = source or io.BytesIO(b"")
        if base_id is not None and size <= IN_MEMORY:
            data = source.read()
            blob: str | None = blob_id(data, self.id_length)
            if blob == base_id:
                return self._unchanged(parts, rel, mode, base_id)
            written, _ = _write(self.dirs.fd(parts[:-1]), parts[-1], io.BytesIO(data), mode, size, 0)
        else:
            written, blob = _write(self.dirs.fd(parts[:-1]), parts[-1], source, mode, size,
                                   self.id_length if base_id is not None else 0)
            if base_id is not None and blob == base_id:  # a big file, unchanged after all
                os.unlink(parts[-1], dir_fd=self.dirs.fd(parts[:-1]))
                return self._unchanged(parts, rel, mode, base_id)
        self.stats.file_bytes += written
        self.files[parts] = (mode, blob, True)

    def _unchanged(self, parts: tuple[str, ...], rel: str, mode: str, blob: str) -> None:
        self.stats.unchanged.append(rel)
        self.files[parts] = (mode, blob, False)

    def _hard_link(self, parts: tuple[str, ...], rel: str, linkname: str, always: bool) -> None:
        source = member_parts(linkname, self.root)
        known = self.files.get(source) if source is not None else None
        if source is None or known is None:
            raise refused(rel, f"a hard link to {shown(linkname)}, which is not a file of the tree the harness "
                          "reads (its .git is never read)")
        mode, blob, written = known
        if written:
            os.link(source[-1], parts[-1], src_dir_fd=self.dirs.fd(source[:-1]),
                    dst_dir_fd=self.dirs.fd(parts[:-1]), follow_symlinks=False)
            self.files[parts] = known
        elif not always and blob is not None and self.base.get(rel) == (mode, blob):
            self._unchanged(parts, rel, mode, blob)
        else:  # the same bytes as an unchanged file: the base's blob
            data = self.read_blob(str(blob))
            self.stats.file_bytes += _write(self.dirs.fd(parts[:-1]), parts[-1], io.BytesIO(data), mode,
                                            len(data), 0)[0]
            self.files[parts] = (mode, blob, True)


def _write(parent: int, name: str, source: IO[bytes], mode: str, size: int, id_length: int) -> tuple[int, str | None]:
    """Create ``name`` (never through a link, never over an entry) with ``source``'s ``size``
    bytes; (bytes written, their blob id when ``id_length`` asks for one)."""
    digest = (hashlib.sha256() if id_length == 64 else hashlib.sha1()) if id_length else None
    if digest is not None:
        digest.update(b"blob %d\0" % size)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o755 if mode == "100755" else 0o644, dir_fd=parent)
    written = 0
    try:
        while block := source.read(1 << 20):
            if digest is not None:
                digest.update(block)
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
            written += len(block)
    finally:
        os.close(fd)
    return written, digest.hexdigest() if digest is not None and written == size else None


def materialise(stream: IO[bytes] | io.RawIOBase, dest: Path, root: str, limits: TreeLimits,
                base: BaseListing | None = None, read_blob: Callable[[str], bytes] | None = None) -> Materialised:
    """Write the tar ``stream`` of directory ``root`` into the empty directory ``dest`` (see
    the module's docstring), leaving out what equals ``base``; ``read_blob`` reads a base
    blob (a hard link to an unchanged file, at a path where it is not). Raises
    WorkingTreeRefused naming the path, InfrastructureError when the host fails."""
    root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    dirs = _Directories(root_fd)
    reader = _Reader(dirs, root, limits, base or {}, read_blob or _no_blobs)
    name = root
    try:
        with tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="surrogateescape") as tar:
            for member in tar:
                name = member.name
                reader.add(member, tar)
    except WorkingTreeRefused:
        raise
    except tarfile.TarError as exc:
        raise InfrastructureError(f"the tree's tar stream is unreadable after {shown(name)}: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR):
            raise refused(name, f"{os.strerror(exc.errno or 0)} (a name the host cannot hold)") from None
        raise InfrastructureError(f"writing the tree on the host failed at {shown(name)}: {exc}") from None
    finally:
        dirs.close()
        os.close(root_fd)
    return reader.stats


def _no_blobs(blob: str) -> bytes:
    raise InfrastructureError(f"blob {blob} is needed but no base repository was given")



def write_files(dest: Path, files: Iterable[tuple[str, str, bytes]]) -> None:
    """Write ``(path, git mode, bytes)`` under ``dest`` with the same care (the base's copies
    of unchanged files that git must read after all)."""
    root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    dirs = _Directories(root_fd)
    try:
        for rel, mode, data in files:
            parts = tuple(rel.split("/"))
            if mode == "120000":
                os.symlink(data.decode("utf-8", "surrogateescape"), parts[-1], dir_fd=dirs.fd(parts[:-1]))
            else:
                _write(dirs.fd(parts[:-1]), parts[-1], io.BytesIO(data), mode, len(data), 0)
    finally:
        dirs.close()
        os.close(root_fd)
