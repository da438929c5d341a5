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
