"""Where tasks run. Every executor implements :class:`Executor` (harness.run.executors.base):

* :class:`LocalExecutor` (``--executor local``, the default): a thread pool on this
  machine, against this machine's engine.
* :class:`~harness.run.executors.ray.RayExecutor` (``--executor ray``): one Ray task per
  evaluation, on any node of a Ray cluster that drives a Docker engine.

Both run the same :class:`~harness.evaluation.node.TaskEvaluator` (prepare, reuse or evaluate,
return data); the driver (:class:`~harness.run.batch.BatchRunner`) alone writes results.
"""

from harness.run.executors.base import EXECUTORS, Executor, NodeSetup, run_with_deadline
from harness.run.executors.local import LocalExecutor

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "NodeSetup", "run_with_deadline", "make_executor"]


def make_executor(name: str, max_workers: int, *, address: str | None = None):
    """The executor called ``name`` (``local`` or ``ray``)."""
    from harness.errors import UnknownNameError
    if name == "local":
        return LocalExecutor(max_workers)
    if name == "ray":
        from harness.run.executors.ray import RayExecutor
        return RayExecutor(max_workers, address=address)
    import difflib
    close = difflib.get_close_matches(name, EXECUTORS, n=1)
    raise UnknownNameError(f"unknown executor {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                           + f"; known: {', '.join(EXECUTORS)}", field="--executor")
