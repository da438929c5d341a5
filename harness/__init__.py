"""harness: grade coding agents' patches on SWE-style instances inside network-less containers.

``harness.evaluate(instances, predictions, ...)`` runs one grading run from Python and
returns its typed result (harness.run.session); the ``harness`` command is a mapping of flags
onto it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness._version import __version__

#: the session API, imported on first use: every module of the package imports this one,
#: and the session module reaches most of them
_SESSION_NAMES = ("evaluate", "ProgressEvent", "RunResult", "Repositories", "RunLimits", "PagesWritten")
__all__ = ["__version__", "evaluate", "ProgressEvent", "RunResult", "Repositories", "RunLimits", "PagesWritten"]

if TYPE_CHECKING:
    from harness.run.session import PagesWritten, ProgressEvent, Repositories, RunLimits, RunResult, evaluate


def __getattr__(name: str) -> Any:
    if name in _SESSION_NAMES:
        from harness.run import session
        return getattr(session, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
