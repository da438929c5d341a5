"""What one preparation built itself, as it happened.

A task's preparation times its phases (``image.prepare_seconds``), but a phase's time
includes waiting: two tasks of one version both need its environment, one builds it and
the other waits on the build's lock. To tell work from waiting, each build, resolution
and tree-metadata read a task *makes* (not one it found made, nor one it waited for) is
recorded with its seconds: ``report.json`` ``image.builds``, a list of
``{"kind", "name", "at", "seconds", "own_seconds"}`` (``at``: seconds from the start of
the recording, i.e. of the task's preparation, to the start of the work).

Kinds: the image kinds (``base``, ``py``, ``cc``, ``env``, ``inst``), ``wheelhouse``
(resolve, download and any sdist builds of one requirement set) and ``tree-metadata``.
Work nests (a wheelhouse that builds an sdist first builds the builder's compiler layer
and a wheelhouse of build tools): ``seconds`` is the whole span, ``own_seconds`` that
span less the recorded work inside it, so summing ``own_seconds`` counts every second once.
Work done for the task before it began is among them, marked ``"ahead"``: ``"resolve"`` (the
run's resolution ahead) or ``"prestart"`` (the task's pre-start), with a negative ``at``
(:class:`AheadWork`); ``at`` counts from the task's start.

The record is a context variable: it belongs to the thread that opened it
(:func:`recording`, by the preparer for one task), so work done by another task's thread
is never charged to this one, and outside a recording nothing is kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class _Record:
    entries: list[dict] = field(default_factory=list)
    opened: float = field(default_factory=time.monotonic)
    #: the seconds of recorded work inside each open span, innermost last
    inner: list[float] = field(default_factory=list)


_CURRENT: contextvars.ContextVar[_Record | None] = contextvars.ContextVar("harness_builds", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[dict]]:
    """Record the work of this thread until the block ends; yields the list it fills."""
    record = _Record()
    token = _CURRENT.set(record)
    try:
        yield record.entries
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def timed(kind: str, name: str) -> Iterator[None]:
    """Record the block as work of ``kind`` on ``name`` (when a recording is open).
    Nothing is recorded when the block raises: a failed build made nothing."""
    record = _CURRENT.get()
    if record is None:
        yield
        return
    record.inner.append(0.0)
    started = time.monotonic()
    completed = False
    try:
        yield
        completed = True
    finally:
        seconds = time.monotonic() - started
        inside = record.inner.pop()
        if record.inner:
            record.inner[-1] += seconds
        if completed:
            record.entries.append({"kind": kind, "name": name, "at": round(started - record.opened, 3),
                                   "seconds": round(seconds, 3),
                                   "own_seconds": round(max(0.0, seconds - inside), 3)})


class AheadWork:
    """Work done for a task before its own preparation (the run's resolution ahead,
    :meth:`harness.preparation.preparer.Preparer.resolve`, or a pre-start whose task started
    first and found its images made), kept until that task takes it.

    The task's report then carries it among its own builds, marked ``"ahead"`` (``"resolve"``
    or ``"prestart"``), with ``at`` counted from the task's start as every build's is (so
    negative: it happened before). A cost benchmark reading ``image.builds`` thus sees every
    build once, on the timeline where it ran. What is kept goes to one task only.
    Thread-safe."""

    def __init__(self) -> None:
        import threading
        self._lock = threading.Lock()
        self._kept: dict[str, list[tuple[float, list[dict], str]]] = {}

    @contextlib.contextmanager
    def recording(self, key: str, by: str = "resolve") -> Iterator[None]:
        """Record this thread's work for the task ``key`` (kept also when the block raises:
        what was made before a failure exists, and the task finds it made)."""
        opened = time.monotonic()
        with recording() as made:
            try:
                yield
            finally:
                self.keep(key, opened, made, by)

    def keep(self, key: str, opened: float, entries: list[dict], by: str) -> None:
        """Keep ``entries`` (``at`` counted from the monotonic ``opened``) for the task ``key``."""
        if entries:
            with self._lock:
                self._kept.setdefault(key, []).append((opened, list(entries), by))

    def take(self, key: str, opened: float) -> list[dict]:
        """The work kept for ``key``, each entry's ``at`` moved to count from ``opened`` (the
        monotonic start the task's own entries count from); empty when there is none."""
        with self._lock:
            kept = self._kept.pop(key, [])
        return [moved for since, entries, by in kept for moved in on_clock(entries, since, opened, by)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


def on_clock(entries: list[dict], since: float, opened: float, ahead: str | None = None) -> list[dict]:
    """``entries`` counted from the monotonic ``since``, moved to count from ``opened``
    (marked ``ahead`` when given, unless already marked)."""
    moved = []
    for entry in entries:
        entry = dict(entry, at=round(float(entry["at"]) + since - opened, 3))
        if ahead and not entry.get("ahead"):
            entry["ahead"] = ahead
        moved.append(entry)
    return moved
