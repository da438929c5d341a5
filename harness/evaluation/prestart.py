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
    """Ready sandboxes by task token (thread-safe). A pre-start registers with :meth:`begin`
    (refused once its task has started); :meth:`offer` stores its result unless the task
    has started meanwhile, in which case the caller releases the sandbox.

    A task's start (:meth:`take`) is remembered whether or not its pre-start has begun: the
    look-ahead runs pre-starts one at a time, so one can be queued behind a slow one (an
    image build) until after its task started, or even finished, on its own. Such a late
    pre-start must not start anything: its sandbox would wait, running, until the run ends
    (Verified at 8376c12 held 16 of them at once after 100 instances)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, Prestarted] = {}
        self._in_flight: set[str] = set()
        #: tokens whose task has started (taken, ready or not): a pre-start of one is late
        self._started: set[str] = set()

    def begin(self, token: str) -> bool:
        """A pre-start of ``token`` is starting; False when its task has already started
        (the caller then prepares and starts nothing)."""
        with self._lock:
            if token in self._started:
                return False
            self._in_flight.add(token)
            return True

    def offer(self, token: str, ready: Prestarted | None) -> bool:
        """The pre-start of ``token`` ended (``ready`` None: it failed). False when the task
        started meanwhile: the sandbox is nobody's, and the caller must release it."""
        with self._lock:
            self._in_flight.discard(token)
            if ready is None or token in self._started:
                return False
            self._ready[token] = ready
            return True

    def take(self, token: str) -> Prestarted | None:
        """What was made ready for ``token`` (once), or None; a pre-start of it still in
        flight, or not yet begun, will find the task started (:meth:`offer`, :meth:`begin`)."""
        with self._lock:
            self._started.add(token)
            return self._ready.pop(token, None)

    def drain(self) -> list[Prestarted]:
        """Everything ready and not taken (the run is ending); a pre-start still in flight
        keeps nothing (the executor waits for its look-ahead before it drains, so none has
        yet to begin)."""
        with self._lock:
            left = list(self._ready.values())
            self._ready.clear()
            self._started |= self._in_flight
            return left
