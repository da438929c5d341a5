"""A run stopped by a signal ends the way Ctrl-C ends it.

Ctrl-C raises KeyboardInterrupt in the main thread, and every layer of a run already
answers that: the executor starts nothing new, removes this run's containers, waits for the
builds in flight (each removes its own build container) and the command exits with the
run directory resumable. SIGTERM and SIGHUP (a job scheduler, ``timeout``, a closed
terminal, ``kill``) used to end the process on the spot instead: containers kept running
with nothing left to remove them. Inside :func:`stopped_like_ctrl_c` they raise
:class:`Terminated`, a KeyboardInterrupt, so they take the same path; the command exits
with 128 + the signal's number, as a shell reports a process the signal ended.

The handlers are the process owner's business, so only the command line installs them,
only in the main thread (Python runs signal handlers there and nowhere else), and puts the
previous ones back when the command returns.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

#: the signals that stop a run like Ctrl-C
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A stopping signal arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """What the command exits with: 128 + the signal (130 for Ctrl-C's SIGINT)."""
    return 128 + (interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT)


def signal_name(interrupt: KeyboardInterrupt) -> str:
    return signal.Signals(interrupt.signum).name if isinstance(interrupt, Terminated) else "Ctrl-C"


def _raise_terminated(signum: int, _frame) -> None:
    raise Terminated(signum)


@contextmanager
def stopped_like_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.
    Elsewhere than the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
