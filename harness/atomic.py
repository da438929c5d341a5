"""Files that appear whole or not at all.

A reader (another process, a browser, the next sitting of a run) never sees a half-written
report, manifest or page: the content goes to a temporary file in the same directory,
which replaces the target in one ``os.replace`` (atomic on POSIX within one file system).
A failure leaves the previous file untouched and removes the temporary one.
:func:`write_json_atomic` and :func:`write_text_atomic` are the two shapes every writer uses.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator


@contextmanager
def atomic_open(path: Path, mode: str = "wb", *, durable: bool = True, **open_options) -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces ``path``.

    ``durable`` fsyncs before the rename, so that after a crash the file is the old or the new
    content, never empty (results and manifests); pages that can be rendered again skip it.
    """
    if "w" not in mode:
        raise ValueError(f"atomic_open writes whole files; mode {mode!r} has no 'w'")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **open_options) as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temporary file in the same directory, fsync, then rename."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_text_atomic(path: Path, text: str | bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(encode_text(text) if isinstance(text, str) else text)


def encode_text(text: str) -> bytes:
    """UTF-8, bytes smuggled in by ``surrogateescape`` restored; any other lone surrogate
    (a hostile JSON string) written escaped rather than crashing the batch."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")
