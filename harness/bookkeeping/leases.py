"""Leases: a live harness process's claim on the images it uses.

Each process that looks up or builds images holds one lease file,
``<state>/leases/<host>-<pid>-<token>.lease``: a JSON header line (pid, host, start time,
command) and then one image tag per line, appended *before* the tag is looked up. The
process holds an exclusive ``flock`` on the file for as long as it lives; the kernel
releases it when the process exits or is killed, so a lease whose file can be locked
by someone else belongs to a dead process (stale) and protects nothing.

One more lock, the *gate* (``<state>/leases/.gate``), orders leases against removals: a
process takes it shared to create its lease file or append a tag, prune takes it
exclusive while it reads the leases and removes one image. So a tag is either leased
before prune decides about it (and stays), or leased after the image is gone (and the
process then builds it again): never used while being removed.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

GATE_NAME = ".gate"
SUFFIX = ".lease"


@contextlib.contextmanager
def gate(lease_dir: Path, exclusive: bool) -> Iterator[None]:
    """Hold the gate shared (a process leasing) or exclusive (prune removing)."""
    lease_dir.mkdir(parents=True, exist_ok=True)
    with open(lease_dir / GATE_NAME, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Lease:
    """This process's lease (created on the first :meth:`hold`). Thread-safe."""

    def __init__(self, lease_dir: Path) -> None:
        self.lease_dir = Path(lease_dir)
        self._handle = None
        self._tags: set[str] = set()
        self._lock = threading.Lock()
        self.path: Path | None = None

    def hold(self, tag: str) -> None:
        """Lease ``tag`` (call before looking it up)."""
        with self._lock:
            if tag in self._tags:
                return
            with gate(self.lease_dir, exclusive=False):
                if self._handle is None:
                    self._open()
                self._handle.write(tag + "\n")
                self._handle.flush()
            self._tags.add(tag)

    def tags(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._tags)

    def release(self) -> None:
        """Drop the lease: its images are no longer protected by this process."""
        with self._lock:
            if self._handle is None:
                return
            with gate(self.lease_dir, exclusive=False):
                try:
                    self.path.unlink(missing_ok=True)
                finally:
                    self._handle.close()  # closing the descriptor releases the flock
            self._handle = None
            self._tags.clear()

    def _open(self) -> None:
        # under the gate: prune never sees the file before it is locked
        name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        self.path = self.lease_dir / name
        handle = open(self.path, "a+", encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)
        header = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                  "command": " ".join(sys.argv)[:300]}
        handle.write(json.dumps(header) + "\n")
        handle.flush()
        self._handle = handle
        atexit.register(self.release)  # a process that exits normally leaves no stale file behind


@dataclass(frozen=True)
class LeaseRecord:
    path: Path
    pid: int | None
    host: str
    command: str
    tags: frozenset[str]
    alive: bool

    def describe(self) -> str:
        words = self.command.split()
        what = " ".join([Path(words[0]).name, *words[1:3]])[:80] if words else ""
        return f"pid {self.pid} on {self.host}" + (f" ({what})" if what else "")


def read_leases(lease_dir: Path) -> list[LeaseRecord]:
    """Every lease file, alive or stale. Call under the gate to get a consistent view."""
    records = []
    if not Path(lease_dir).is_dir():
        return records
    for path in sorted(Path(lease_dir).glob(f"*{SUFFIX}")):
        try:
            handle = open(path, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue  # released meanwhile
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                alive = False
                fcntl.flock(handle, fcntl.LOCK_UN)
            except BlockingIOError:
                alive = True
            lines = handle.read().splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except ValueError:
            header = {}
        records.append(LeaseRecord(path, header.get("pid"), str(header.get("host", "?")),
                                   str(header.get("command", "")), frozenset(l for l in lines[1:] if l), alive))
    return records


def live_leases(lease_dir: Path) -> dict[str, LeaseRecord]:
    """tag -> the live lease holding it (the first one, when several do)."""
    out: dict[str, LeaseRecord] = {}
    for record in read_leases(lease_dir):
        if record.alive:
            for tag in record.tags:
                out.setdefault(tag, record)
    return out


def remove_stale(lease_dir: Path) -> list[LeaseRecord]:
    """Delete the lease files of dead processes (call under the exclusive gate)."""
    stale = [r for r in read_leases(lease_dir) if not r.alive]
    for record in stale:
        record.path.unlink(missing_ok=True)
    return stale
