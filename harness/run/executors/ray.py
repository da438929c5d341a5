"""``--executor ray``: one Ray task per evaluation, on the nodes of a Ray cluster that drive
a Docker engine.

A node offers its engine by starting with the custom resource ``harness_engine`` = N (N
evaluations at once on that engine; ``harness node`` sets it, see harness.cluster). Each
task asks for one unit, so Ray schedules it only where an engine is, and it runs there
:func:`~harness.run.executors.base.run_with_deadline` on the node's own
:class:`~harness.evaluation.node.TaskEvaluator` (the node's ``DOCKER_HOST`` and cache): exactly
what the local executor runs. Its :class:`~harness.evaluation.tasks.TaskOutcome` (report, raw
outputs, pins) travels back as data; the driver writes it.

Faults, as the driver sees them:

* **a node lost mid-task** (raylet killed, machine gone: Ray raises a system error for
  the task): the task is re-queued, at most ``requeue_budget`` times, each loss recorded
  in the eventual report's ``attempts`` (``NodeLost``, with Ray's message naming the
  node); the lost attempt's containers are removed on every node still alive (the dead
  node's agent removes its own, harness.cluster);
* **an engine lost on a node** (the node answers, its engine does not): the outcome says
  so and the task is re-queued likewise;
* **engine errors** are retried on the node as locally (bounded, recorded per attempt
  with the node's name); a verdict is never retried;
* **the deadline** (``--task-timeout``) is enforced on the node (the task's containers
  removed, ``deadline_exceeded`` recorded); a node that does not answer in time is
  cancelled from the driver (its worker process killed) and its containers removed;
* **no engine left** in the cluster for ``cluster_grace`` seconds: the remaining tasks
  are recorded as ``node_lost`` and :attr:`RayExecutor.aborted` says why;
* **Ctrl-C**: every task in flight is cancelled (force), this run's containers are
  removed on every node, and the interrupt propagates.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, Iterable

from harness.errors import InputError
from harness.grading.status import ErrorReason
from harness.logs import get_logger
from harness.run.executors.base import KILL_GRACE_SECONDS, NodeSetup, run_with_deadline

#: The custom resource a node with a Docker engine offers: one unit per evaluation slot.
RESOURCE = "harness_engine"
#: Beyond the node's own deadline, how long the driver waits before cancelling a task.
DRIVER_DEADLINE_MARGIN = KILL_GRACE_SECONDS + 90.0


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'harness[ray]'", field="--executor") from None
    return ray


_REMOTE: dict = {}


def _remote():
    """The remote functions, defined once per process (Ray pickles them by reference)."""
    if _REMOTE:
        return _REMOTE
    ray = _ray()

    @ray.remote(num_cpus=0, resources={RESOURCE: 1}, max_retries=0)
    def evaluate_task(run_key: str, setup_box: list, request, timeout: float):
        from harness.run.executors import base
        evaluator = base._OPENED.get(run_key)
        if evaluator is None:
            setup = ray.get(setup_box[0])
            _check_version(setup)
            evaluator = setup.evaluator()
        outcome = run_with_deadline(evaluator, request, timeout)
        outcome.node_id = ray.get_runtime_context().get_node_id()
        return outcome

    @ray.remote(num_cpus=0, max_retries=0)
    def cleanup_node(labels: dict) -> tuple[str, int]:
        from harness.engine.client import connect
        from harness.engine.sandbox import remove_labelled
        from harness.evaluation.tasks import node_name
        client = connect(timeout=30)
        try:
            return node_name(), remove_labelled(client, labels)
        finally:
            client.close()

    _REMOTE.update(evaluate=evaluate_task, cleanup=cleanup_node)
    return _REMOTE


def _check_version(setup: NodeSetup) -> None:
    from harness._version import __version__
    if setup.harness_version and setup.harness_version != __version__:
        from harness.evaluation.tasks import node_name
        raise InputError(f"node {node_name()} runs harness {__version__}, the driver {setup.harness_version}: "
                         "install the same version on every node", field="--executor")


class RayExecutor:
    """Evaluations as Ray tasks (see the module doc). ``address``: the head's HOST:PORT
    (default ``$RAY_ADDRESS``; without either, a one-node cluster on this machine with
    ``max_workers`` engine slots is started for the run)."""

    def __init__(self, max_workers: int = 1, *, address: str | None = None, requeue_budget: int = 3,
                 cluster_grace: float = 60.0) -> None:
        self.max_workers = max(1, max_workers)
        self.address = address
        self.requeue_budget = requeue_budget
        self.cluster_grace = cluster_grace
        self.aborted = ""
        self._setup_ref = None
        self._setup_key = None

    # ------------------------------------------------------------------ cluster
    def connect(self) -> None:
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address and "RAY_AUTH_MODE" not in os.environ and _token_available():
            os.environ["RAY_AUTH_MODE"] = "token"  # as `harness node` starts it; read when ray is imported
        ray = _ray()
        if ray.is_initialized():
            return
        common = dict(logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
        if os.environ.get("HARNESS_NODE_IP"):  # as the node of this machine was started (harness node)
            common["_node_ip_address"] = os.environ["HARNESS_NODE_IP"]
        if address:
            try:
                ray.init(address=address, **common)
            except (ConnectionError, RuntimeError) as exc:
                raise InputError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}",
                                 field="--ray-address") from None
        else:
            ray.init(address="local", resources={RESOURCE: self.max_workers}, include_dashboard=False, **common)

    def engine_slots(self) -> float:
        return float(_ray().cluster_resources().get(RESOURCE, 0))

    def engine_nodes(self) -> list[dict]:
        return [n for n in _ray().nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) > 0]

    def _put(self, setup: NodeSetup):
        if self._setup_key != setup.run_key:
            self._setup_ref, self._setup_key = _ray().put(setup), setup.run_key
        return self._setup_ref

    # ------------------------------------------------------------------ the run
    def run(self, setup: NodeSetup, requests: Iterable, on_done: Callable) -> None:
        ray = _ray()
        self.connect()
        remote = _remote()
        setup_ref = self._put(setup)
        timeout = setup.config.task_timeout
        log = get_logger(run_id=setup.config.run_id)
        in_flight: dict = {}         # ObjectRef -> [request, submitted_at, lost_attempts]
        source = iter(requests)
        exhausted = False
        window, checked, no_engine_since = self.max_workers, 0.0, None

        def submit(request, lost: list, avoid: str = "") -> None:
            options = {}
            others = [n["NodeID"] for n in self.engine_nodes() if n["NodeID"] != avoid] if avoid else []
            if others:  # another node than the one whose engine was lost, if it can take it
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(others[len(lost) % len(others)],
                                                                                soft=True)
            ref = remote["evaluate"].options(**options).remote(setup.run_key, [setup_ref], request, timeout)
            in_flight[ref] = [request, time.monotonic(), lost]

        try:
            while True:
                now = time.monotonic()
                if now - checked > 2.0:  # the cluster may grow or shrink during the run
                    checked = now
                    slots = self.engine_slots()
                    window = max(1, min(self.max_workers, int(slots) or 1))
                    no_engine_since = None if slots > 0 else (no_engine_since or now)
                    if no_engine_since is not None and now - no_engine_since > self.cluster_grace:
                        self._abort(setup, source, in_flight, on_done)
                        return
                while not exhausted and len(in_flight) < window:
                    request = next(source, None)
                    if request is None:
                        exhausted = True
                        break
                    submit(request, [])
                if not in_flight:
                    return
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
                for ref in ready:
                    request, _, lost = in_flight.pop(ref)
                    self._collect(ref, request, lost, setup, submit, on_done, log)
                self._enforce_deadlines(in_flight, setup, on_done, log)
        except BaseException:
            self._stop(setup, in_flight)
            raise

    def _collect(self, ref, request, lost: list, setup: NodeSetup, submit, on_done, log) -> None:
        ray = _ray()
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError
        try:
            outcome = ray.get(ref)
        except RayTaskError as exc:  # the node could not even start evaluating: a bug or a set-up error
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            on_done(request, self._failure(setup, request, ErrorReason.HARNESS_ERROR, cause, lost))
            return
        except TaskCancelledError as exc:
            on_done(request, self._failure(setup, request, ErrorReason.DEADLINE_EXCEEDED, exc, lost))
            return
        except RayError as exc:  # the worker or its node died: run it elsewhere
            self._cleanup_token(setup, request.token)
            lost.append({"attempt": len(lost) + 1, "error": "NodeLost", "message": str(exc)[:500],
                         "node": _node_of(exc)})
            log.warning("instance.node_lost", instance_id=request.task.instance.instance_id, error=str(exc)[:200])
            if len(lost) <= self.requeue_budget:
                submit(request, lost)
            else:
                on_done(request, self._failure(setup, request, ErrorReason.NODE_LOST, exc, lost))
            return
        if outcome.engine_lost and len(lost) < self.requeue_budget and self.engine_slots() > 0:
            lost.append({"attempt": len(lost) + 1, "error": "EngineLost", "node": outcome.node,
                         "message": (outcome.result.error_detail if outcome.result else "")[:500]})
            submit(request, lost, avoid=outcome.node_id)
            return
        if lost and outcome.result is not None:
            outcome.result.attempts = [*lost, *outcome.result.attempts]
        on_done(request, outcome)

    def _failure(self, setup: NodeSetup, request, reason: ErrorReason, exc: BaseException, lost: list):
        return setup.failure_outcome(request, reason, exc, lost)

    def _enforce_deadlines(self, in_flight: dict, setup: NodeSetup, on_done, log) -> None:
        """The node enforces the deadline; a task whose node does not answer long after
        it is cancelled from here (its worker process is killed)."""
        ray = _ray()
        limit = setup.config.task_timeout + DRIVER_DEADLINE_MARGIN
        now = time.monotonic()
        for ref, (request, submitted, lost) in list(in_flight.items()):
            if now - submitted > limit:
                del in_flight[ref]
                ray.cancel(ref, force=True)
                self._cleanup_token(setup, request.token)
                log.error("instance.deadline", instance_id=request.task.instance.instance_id, seconds=limit)
                on_done(request, self._failure(setup, request, ErrorReason.DEADLINE_EXCEEDED, RuntimeError(
                    f"no answer from the node within {limit:.0f} s (--task-timeout plus a margin): cancelled"),
                    lost))

    def _abort(self, setup: NodeSetup, source, in_flight: dict, on_done) -> None:
        """No engine left: record what remains as node_lost, so the run ends."""
        ray = _ray()
        self.aborted = (f"no Ray node with a Docker engine (resource {RESOURCE}) was left for "
                        f"{self.cluster_grace:.0f} s")
        exc = RuntimeError(self.aborted)
        for ref, (request, _, lost) in list(in_flight.items()):
            ray.cancel(ref, force=True)
            on_done(request, self._failure(setup, request, ErrorReason.NODE_LOST, exc, lost))
        in_flight.clear()
        for request in source:
            on_done(request, self._failure(setup, request, ErrorReason.NODE_LOST, exc, []))

    def _stop(self, setup: NodeSetup, in_flight: dict) -> None:
        """Ctrl-C (or a bug in the driver): cancel everything in flight, then remove
        this run's containers on every node."""
        ray = _ray()
        refs = list(in_flight)
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 — best effort while stopping
                pass
        if refs:
            try:
                ray.wait(refs, num_returns=len(refs), timeout=15)
            except Exception:  # noqa: BLE001
                pass
        try:
            self.cleanup(setup)
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ cleanup
    def cleanup(self, setup: NodeSetup) -> int:
        """Remove this run's containers on every node with an engine."""
        from harness.engine.sandbox import LABEL_SCOPE
        self.connect()
        return self._on_every_node({LABEL_SCOPE: setup.scope})

    def _cleanup_token(self, setup: NodeSetup, token: str) -> None:
        from harness.engine.sandbox import LABEL_SCOPE, LABEL_TASK
        try:
            self._on_every_node({LABEL_SCOPE: setup.scope, LABEL_TASK: token}, wait=False)
        except Exception:  # noqa: BLE001 — the node agent cleans a dead node's engine
            pass

    def _on_every_node(self, labels: dict, wait: bool = True) -> int:
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        remote = _remote()
        refs = [remote["cleanup"].options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(labels) for n in self.engine_nodes()]
        if not wait:
            return 0
        removed = 0
        for ref in refs:
            try:
                removed += ray.get(ref, timeout=120)[1]
            except Exception as exc:  # noqa: BLE001 — a node whose engine is gone: its agent cleans it
                get_logger().warning("run.cleanup_node_failed", error=str(exc)[:300])
        return removed


def _token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return os.path.isfile(path)


def _node_of(exc: BaseException) -> str:
    import re
    found = re.search(r"node ID: ([0-9a-f]{8})", str(exc))
    return f"ray-node-{found.group(1)}" if found else ""


def shared_object(cls, *args):
    """One instance of ``cls(*args)`` for the whole cluster, as a Ray actor, behind a proxy
    whose method calls return the actor's answers (picklable: nodes get the same object).
    Used for an agent run's cost ledger (harness.agents.budgets.RunCostLedger)."""
    ray = _ray()
    actor = ray.remote(num_cpus=0)(cls).remote(*args)
    return _ActorProxy(actor)


class _ActorProxy:
    def __init__(self, actor) -> None:
        self._actor = actor

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._actor, name)

        def call(*args, **kwargs):
            return _ray().get(method.remote(*args, **kwargs))
        return call
