"""``--executor local``: a thread pool on this machine, against this machine's engine."""

from __future__ import annotations

import concurrent.futures
from typing import Callable, Iterable

from harness.errors import InfrastructureError
from harness.run.executors.base import NodeSetup, run_with_deadline
from harness.run.executors.dispatch import SpreadDispatch


class LocalExecutor:
    """At most ``max_workers`` tasks in flight, each isolated in its own container.

    Requests are taken from the iterable as slots free up, at most ``window`` ahead of the
    ones started, so a generator of tasks is never materialised; which of those starts next
    is :class:`~harness.run.executors.dispatch.SpreadDispatch`'s choice (a free worker builds
    another version's environment rather than wait for the one being built). Each task
    runs under its deadline (:func:`run_with_deadline`).
    On KeyboardInterrupt nothing new starts, this run's containers are removed (ending
    the evaluations in flight, whose outcomes are dropped) and the interrupt propagates.

    Two look-aheads run beside the workers, neither changing what a task builds or how it
    is graded: the next task's sandbox is started while the current tests run (``prestart``,
    once its version's environment exists), and the requirement sets of versions no worker
    has reached yet are resolved and downloaded on ``resolve_ahead`` threads (host-side work,
    mostly waiting on the network, that a cold run would otherwise do on a worker between
    builds: :meth:`~harness.evaluation.node.TaskEvaluator.resolve_ahead`).
    """

    def __init__(self, max_workers: int = 1, window: int = 256, prestart: bool = True,
                 resolve_ahead: int = 2) -> None:
        self.max_workers = max(1, max_workers)
        self.window = window
        #: ready the next task's sandbox while the current tasks run (harness.evaluation.prestart)
        self.prestart = prestart
        #: threads resolving versions ahead of the workers (0: none)
        self.resolve_ahead = max(0, resolve_ahead)
        self.aborted = ""

    def run(self, setup: NodeSetup, requests: Iterable, on_done: Callable) -> None:
        evaluator = setup.evaluator()
        timeout = setup.config.task_timeout
        pool = concurrent.futures.ThreadPoolExecutor(self.max_workers, thread_name_prefix="harness")
        # evaluators that can ready a task's sandbox before it starts (grading's) have prestart
        prestart = getattr(evaluator, "prestart", None) if self.prestart else None
        ahead = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="harness-prestart")
        resolver = getattr(evaluator, "resolve_ahead", None) if self.resolve_ahead else None
        resolving = concurrent.futures.ThreadPoolExecutor(max(1, self.resolve_ahead),
                                                          thread_name_prefix="harness-resolve")
        resolved: set = set()   # the versions handed to the resolving threads
        pending: dict[concurrent.futures.Future, object] = {}
        dispatch = SpreadDispatch(requests, window=self.window)
        exhausted = False
        held = None   # the next request, taken while every worker is busy (its sandbox starting)
        readying = False
        try:
            while True:
                while not exhausted and len(pending) < self.max_workers:
                    request, held = (held if held is not None else dispatch.take()), None
                    if request is None:
                        exhausted = True
                        break
                    pending[pool.submit(run_with_deadline, evaluator, request, timeout)] = request
                if prestart is not None and not exhausted and held is None:
                    held, readying = dispatch.take(), False
                    exhausted = held is None
                # once its version's environment exists (a task of it finished), readying the held
                # request builds nothing big: its sandbox starts while the current tests run
                if prestart is not None and held is not None and not readying and dispatch.is_warm(held):
                    ahead.submit(prestart, held)
                    readying = True
                if resolver is not None:
                    # the held request first: it starts next, though perhaps only after a long build
                    held_cold = [held] if held is not None and not dispatch.is_warm(held) else []
                    for head in [*held_cold, *dispatch.cold_heads()]:
                        if dispatch.group(head) not in resolved:
                            resolved.add(dispatch.group(head))
                            resolving.submit(resolver, head)
                if not pending:
                    break
                # A timeout, so that Ctrl-C reaches this thread while tasks run.
                done, _ = concurrent.futures.wait(pending, timeout=0.5,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    request = pending.pop(future)
                    dispatch.finished(request)
                    on_done(request, future.result())
        except BaseException:
            evaluator.stop()  # no new container, no retry
            ahead.shutdown(wait=False, cancel_futures=True)
            resolving.shutdown(wait=False, cancel_futures=True)
            pool.shutdown(wait=False, cancel_futures=True)
            try:
                evaluator.backend.cleanup_run()
            except InfrastructureError:
                pass
            raise
        finally:
            pool.shutdown(wait=True)
            ahead.shutdown(wait=True)
            resolving.shutdown(wait=True, cancel_futures=True)   # a version no task needs any more
            if prestart is not None:
                evaluator.drop_prestarted()

    def cleanup(self, setup: NodeSetup) -> int:
        return setup.evaluator().backend.cleanup_run()
