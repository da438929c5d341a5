"""harness: grade coding agents' patches on SWE-style instances inside network-less containers.

``harness.evaluate(instances, predictions, ...)`` runs one grading run from Python and
returns its typed result (harness.run.session); ``harness.solve(instances, model=...)`` runs
a pinned agent scaffold to make the predictions (harness.run.solve). The ``harness`` command
is a mapping of flags onto them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness._version import __version__

#: the session API, imported on first use: every module of the package imports this one,
#: and the session module reaches most of them
_SESSION_NAMES = ("evaluate", "ProgressEvent", "RunResult", "Repositories", "RunLimits", "PagesWritten")
#: the agent run's API, likewise
_SOLVE_NAMES = ("solve", "SolveResult", "Budgets")
__all__ = ["__version__", "evaluate", "ProgressEvent", "RunResult", "Repositories", "RunLimits", "PagesWritten",
           "solve", "SolveResult", "Budgets"]

if TYPE_CHECKING:
    from harness.run.session import PagesWritten, ProgressEvent, Repositories, RunLimits, RunResult, evaluate
    from harness.run.solve import Budgets, SolveResult, solve


def __getattr__(name: str) -> Any:
    if name in _SESSION_NAMES:
        from harness.run import session
        return getattr(session, name)
    if name in _SOLVE_NAMES:
        from harness.run import solve as solve_module
        return getattr(solve_module, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
