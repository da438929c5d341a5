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
Work a run's resolution ahead did for the task before its preparation began is among them,
marked ``"ahead": true``, with a negative ``at`` (:class:`AheadWork`).

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
    """Work done for a task before its preparation began (the run's resolution ahead,
    :meth:`harness.preparation.preparer.Preparer.resolve`), kept until that task prepares.

    The task's report then carries it among its own builds, marked ``"ahead": true``, with
    ``at`` counted from the task's preparation as every build's is (so negative: it
    happened before). A cost benchmark reading ``image.builds`` thus still sees every build
    once, on the timeline where it ran. Each kept record goes to one preparation only.
    Thread-safe."""

    def __init__(self) -> None:
        import threading
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, list[dict]]] = {}

    @contextlib.contextmanager
    def recording(self, key: str) -> Iterator[None]:
        """Record this thread's work for the task ``key`` (kept also when the block raises:
        what was made before a failure exists and is found made by the task)."""
        opened = time.monotonic()
        with recording() as made:
            try:
                yield
            finally:
                if made:
                    with self._lock:
                        self._kept[key] = (opened, list(made))

    def take(self, key: str, opened: float) -> list[dict]:
        """The work kept for ``key``, each entry's ``at`` moved to count from ``opened`` (the
        monotonic start of the task's own recording); empty when there is none."""
        with self._lock:
            kept = self._kept.pop(key, None)
        if kept is None:
            return []
        shift = kept[0] - opened
        return [{**entry, "at": round(float(entry["at"]) + shift, 3), "ahead": True} for entry in kept[1]]

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
