"""The tar streams of the engine's archive API, built and read (pure: no engine here).

What goes into a sandbox is one tar stream per call (:func:`tar_of`: files with their own
modes and owners, parent directories made); what comes out is read to a byte limit
(:func:`regular_files`, :func:`first_regular_file`): the container's content is the
model's, so only regular files are taken and never more than the caller allows.
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class FileEntry:
    """One entry for :meth:`Sandbox.put_files` with its own mode and owner; ``data`` None
    is a directory (created, or its owner and mode set when it exists)."""

    data: bytes | None
    mode: int = 0o644
    owner: int = 1000


def tar_of(entries: dict[str, FileEntry], owner: int) -> bytes:
    """A tar stream of ``entries`` (relative paths); parent directories not listed are made
    owned by ``owner``, mode 0755."""
    buffer = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        dirs = set()
        for rel in entries:
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in sorted(dirs | {r for r, e in entries.items() if e.data is None}):
            entry = entries.get(d, FileEntry(None, 0o755, owner))
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.uid, info.gid, info.mtime = (tarfile.DIRTYPE, entry.mode, entry.owner,
                                                                    entry.owner, now)
            tar.addfile(info)
        for rel, entry in entries.items():
            if entry.data is None:
                continue
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.uid, info.gid, info.mtime = (len(entry.data), entry.mode, entry.owner,
                                                                    entry.owner, now)
            tar.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def regular_files(raw: io.BytesIO, limit: int) -> dict[str, bytes]:
    """The regular files of a directory's tar stream (names relative to the directory), at
    most ``limit`` bytes in all (a member past the limit is cut); a broken stream ends the list."""
    out: dict[str, bytes] = {}
    left = limit
    try:
        with tarfile.open(fileobj=raw, mode="r|") as tar:
            for member in tar:
                if not member.isreg():
                    continue
                name = member.name.split("/", 1)[1] if "/" in member.name else member.name
                handle = tar.extractfile(member)
                data = handle.read(max(left, 0) + 1) if handle else b""
                out[name] = data
                left -= len(data)
    except tarfile.TarError:
        pass
    return out


def first_regular_file(raw: io.BytesIO, limit: int) -> bytes | None:
    """The one file of a file's tar stream, at most ``limit`` bytes; None when it is not a
    regular file or the stream is broken."""
    try:
        with tarfile.open(fileobj=raw, mode="r|") as tar:
            for member in tar:
                if not member.isreg():
                    return None
                handle = tar.extractfile(member)
                return handle.read(limit) if handle else None
    except tarfile.TarError:
        return None
    return None
