"""Which task starts next, so that free workers build different environments at once.

Tasks of one repository version share their environment; the first of them builds it
(interpreter, wheelhouse, environment layer: minutes), and any other task of the version
that starts meanwhile waits on that build's lock. In a set's own order (by instance id)
tasks of one version often follow each other, so with two workers the second one would
spend the first one's build waiting, while the next version's environment could be built
beside it.

:class:`SpreadDispatch` hands out the requests in their order except that, while a
version has a task in flight and none of its tasks has finished yet, the version's other
tasks are passed over for the first task of another version (looking at most ``window``
requests ahead). When every request in view belongs to such a version, the first is
started anyway: a worker is never left idle while there is work. Once a task of a
version has finished, its environment exists and the version's tasks start in order
again, in parallel (each builds only its own instance layer). The order changes which
task runs when, never what a task builds or how it is graded.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Hashable, Iterable, Iterator


def environment_group(request: Any) -> Hashable:
    """The tasks that share an environment: those of one repository version."""
    instance = request.task.instance
    return instance.repo, instance.version


class SpreadDispatch:
    """Requests in order, a version's later tasks held back while its first is cold (see
    the module doc). Not thread-safe: the executor's dispatching thread owns it."""

    def __init__(self, requests: Iterable, group: Callable[[Any], Hashable] = environment_group,
                 window: int = 256) -> None:
        self._source: Iterator = iter(requests)
        self._group = group
        self._window = max(1, window)
        self._buffer: list[tuple[Hashable, Any]] = []
        self._exhausted = False
        self._cold_in_flight: Counter = Counter()
        self._warm: set[Hashable] = set()

    def _fill(self) -> None:
        while not self._exhausted and len(self._buffer) < self._window:
            request = next(self._source, None)
            if request is None:
                self._exhausted = True
                break
            self._buffer.append((self._group(request), request))

    def take(self) -> Any | None:
        """The next request to start, or None when there is none left."""
        self._fill()
        if not self._buffer:
            return None
        index = next((i for i, (group, _) in enumerate(self._buffer)
                      if group in self._warm or not self._cold_in_flight[group]), 0)
        group, request = self._buffer.pop(index)
        if group not in self._warm:
            self._cold_in_flight[group] += 1
        return request

    def cold_heads(self) -> list[Any]:
        """The first request in view of each version that is neither made (a task of it
        finished) nor being made (a task of it started), in the order they would start:
        what a look-ahead can prepare for before any worker reaches it."""
        self._fill()
        heads: dict[Hashable, Any] = {}
        for group, request in self._buffer:
            if group not in heads and group not in self._warm and not self._cold_in_flight[group]:
                heads[group] = request
        return list(heads.values())

    def group(self, request: Any) -> Hashable:
        return self._group(request)

    def is_warm(self, request: Any) -> bool:
        """Whether a task of ``request``'s group has finished (its environment is made)."""
        return self._group(request) in self._warm

    def finished(self, request: Any) -> None:
        """A started request's outcome arrived: its group's environment is made (or failed
        to be: its other tasks then try, and report, for themselves)."""
        group = self._group(request)
        if group not in self._warm:
            self._warm.add(group)
            self._cold_in_flight.pop(group, None)
