"""Inter-process locks (flock) so that concurrent workers and harness processes build a
shared image or wheelhouse once."""

from __future__ import annotations

import contextlib
import fcntl
import re
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def file_lock(lock_dir: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock named ``name`` (any string) under ``lock_dir``."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".lock")
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
