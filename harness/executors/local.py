"""``--executor local``: a thread pool on this machine, against this machine's engine."""

from __future__ import annotations

import concurrent.futures
from typing import Callable, Iterable

from harness.errors import InfrastructureError
from harness.executors.base import NodeSetup, run_with_deadline


class LocalExecutor:
    """At most ``max_workers`` tasks in flight, each isolated in its own container.

    Requests are taken from the iterable only as slots free up, so a generator of tasks
    is never materialised. Each task runs under its deadline (:func:`run_with_deadline`).
    On KeyboardInterrupt nothing new starts, this run's containers are removed (ending
    the evaluations in flight, whose outcomes are dropped) and the interrupt propagates.
    """

    def __init__(self, max_workers: int = 1) -> None:
        self.max_workers = max(1, max_workers)
        self.aborted = ""

    def run(self, setup: NodeSetup, requests: Iterable, on_done: Callable) -> None:
        evaluator = setup.evaluator()
        timeout = setup.config.task_timeout
        pool = concurrent.futures.ThreadPoolExecutor(self.max_workers, thread_name_prefix="harness")
        pending: dict[concurrent.futures.Future, object] = {}
        source = iter(requests)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self.max_workers:
                    request = next(source, None)
                    if request is None:
                        exhausted = True
                        break
                    pending[pool.submit(run_with_deadline, evaluator, request, timeout)] = request
                if not pending:
                    break
                # A timeout, so that Ctrl-C reaches this thread while tasks run.
                done, _ = concurrent.futures.wait(pending, timeout=0.5,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    on_done(pending.pop(future), future.result())
        except BaseException:
            evaluator.stop()  # no new container, no retry
            pool.shutdown(wait=False, cancel_futures=True)
            try:
                evaluator.backend.cleanup_run()
            except InfrastructureError:
                pass
            raise
        finally:
            pool.shutdown(wait=True)

    def cleanup(self, setup: NodeSetup) -> int:
        return setup.evaluator().backend.cleanup_run()
