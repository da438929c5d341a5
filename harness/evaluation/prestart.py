"""A task's sandbox started before the task: the container start off the critical path.

A container's start is most of an evaluation's fixed cost that does not depend on the
patch (docs/BENCHMARKS.md §16), and it cannot overlap with anything inside the evaluation:
the image is known only once the task is prepared. So the local executor takes the *next*
request while the current ones run their tests, and the node prepares its images and starts
its sandbox then (:meth:`harness.evaluation.node.TaskEvaluator.prestart`); the task, when it
starts, takes them from this pool.

What keeps it the same as a sandbox started by the task itself:

* a pre-started sandbox is fresh and goes to exactly one evaluation: the first one of the
  task whose token it carries (its retries, canary proofs and perturbed runs start their
  own); it is never handed to another task;
* it was started from the same prepared images, with the same arguments, and its first
  process has only filled the working copy from the pristine tree (nothing of the model is
  in it before the task puts it there);
* whatever the task does not take (reused result, failure before the start, the run
  stopping) is released; the run's cleanup removes by label whatever is left.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass
class Prestarted:
    """What was made ready for one task: its preparation and its started sandbox."""

    prepared: Any
    sandbox: Any


class PrestartPool:
    """Ready sandboxes by task token (thread-safe). A pre-start in flight registers with
    :meth:`begin`; :meth:`offer` stores its result unless the task has already started
    without it, in which case the caller releases the sandbox."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, Prestarted] = {}
        self._in_flight: set[str] = set()
        self._missed: set[str] = set()

    def begin(self, token: str) -> None:
        with self._lock:
            self._in_flight.add(token)

    def offer(self, token: str, ready: Prestarted | None) -> bool:
        """The pre-start of ``token`` ended (``ready`` None: it failed). False when the task
        started meanwhile: the sandbox is nobody's, and the caller must release it."""
        with self._lock:
            self._in_flight.discard(token)
            missed = token in self._missed
            self._missed.discard(token)
            if ready is None or missed:
                return False
            self._ready[token] = ready
            return True

    def take(self, token: str) -> Prestarted | None:
        """What was made ready for ``token`` (once), or None; a pre-start still in flight
        for it will find the task gone (:meth:`offer`)."""
        with self._lock:
            if token in self._in_flight:
                self._missed.add(token)
            return self._ready.pop(token, None)

    def drain(self) -> list[Prestarted]:
        """Everything ready and not taken (the run is ending)."""
        with self._lock:
            left = list(self._ready.values())
            self._ready.clear()
            self._missed |= self._in_flight
            return left
