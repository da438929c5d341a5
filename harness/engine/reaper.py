"""Removing finished sandboxes off the evaluation's critical path.

A sandbox's removal (the container, then its two tmpfs volumes: three engine calls, about
0.06 s) changes nothing an evaluation reads: the result is complete before it starts. So
an evaluation hands its sandbox to the backend's :class:`Reaper` and returns; the removal
runs on a background thread while the next evaluation starts.

What keeps this safe and bounded:

* a sandbox is never reused: it is removed, only later (nothing starts in it again; the
  evaluation has dropped its handle);
* at most :data:`MAX_PENDING` removals wait at once; the next hand-off blocks until one is
  done, so a fast batch cannot pile up containers and tmpfs memory;
* :meth:`Reaper.drain` waits for every removal (the backend's ``cleanup_run`` does, when a run
  ends, before it removes by label whatever is left, e.g. after a crash);
* the worker threads are not daemons: an interpreter that exits finishes the removals first.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Callable

#: removals that may wait at once before a hand-off blocks
MAX_PENDING = 4


class Reaper:
    """Runs ``close`` callables in the background (at most :data:`MAX_PENDING` queued)."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._slots = threading.BoundedSemaphore(max_pending)
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: set[concurrent.futures.Future] = set()

    def submit(self, close: Callable[[], None]) -> None:
        """Run ``close`` soon; blocks while :data:`MAX_PENDING` removals are waiting. ``close``
        must not raise (a sandbox's close never does); if it does, the error is dropped here
        and the run's leftover cleanup removes what it left."""
        self._slots.acquire()
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="harness-reaper")
            future = self._pool.submit(close)
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._pending.discard(future)
        self._slots.release()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def drain(self, timeout: float | None = 120) -> bool:
        """Wait until every removal handed over so far is done; False if ``timeout`` passed first."""
        with self._lock:
            waiting = list(self._pending)
        _, not_done = concurrent.futures.wait(waiting, timeout=timeout)
        return not not_done
