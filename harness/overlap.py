"""Host work overlapped with the engine's: a call run in a thread, its result (or its
exception) taken later.

An evaluation waits on the engine twice for long: while a container starts and while the
tests run. The host's own work that does not need the answer yet runs meanwhile: the
canaries are planted while the container starts, and the model's files are scanned while
the tests run (the scan decides flags and the verdict, never what runs in the sandbox).
The work is the same and nothing it decides changes; only the wall time of one evaluation
shrinks (a second core does it, or the first while it waits on a socket).
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``fn()`` in a daemon thread. :meth:`result` waits and returns its value or raises its
    exception in the caller's thread, exactly as calling ``fn()`` there would have."""

    def __init__(self, fn: Callable[[], T], name: str = "harness-background") -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value  # type: ignore[return-value]

    def discard(self, release: Callable[[T], None]) -> None:
        """Wait, and hand a value to ``release`` (e.g. close a sandbox nobody will use);
        an exception of ``fn`` is dropped: the caller is already failing for its own reason."""
        self._thread.join()
        if self._error is None and self._value is not None:
            release(self._value)
