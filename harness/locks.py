"""Inter-process locks (flock): concurrent workers and harness processes build a shared
image or wheelhouse once, and one run directory has one writer at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path
from typing import Iterator

from harness.paths import RunPaths


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


@contextlib.contextmanager
def run_directory_lock(root: Path) -> Iterator[None]:
    """Own the run directory ``root`` for the duration, or refuse at once.

    Two invocations writing one run directory would overwrite each other's results and
    remove each other's containers (leftover cleanup is scoped to the directory). The
    lock is an flock on ``root/.lock``: the kernel drops it when the process dies, even
    by SIGKILL, so a killed run never leaves the directory locked. Raises
    :class:`~harness.errors.RunDirectoryBusy` naming the holder's pid.
    """
    from harness.errors import RunDirectoryBusy
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = RunPaths(root).lock     # holds the pid of the harness process that owns the directory
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunDirectoryBusy(f"another harness process (pid {holder}) is writing this run directory; "
                                   "wait for it to finish, or use another --run-id or --output-dir",
                                   source=str(root)) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing the descriptor releases the flock
