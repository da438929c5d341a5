"""What an attempt may spend, and the run's cost ledger.

Four limits, each an attempt's exit status when hit, never a crash:

===========  =================================  ====================================  ===========================
limit        flag                               who checks, when                       exit status
===========  =================================  ====================================  ===========================
steps        ``--step-limit`` (per attempt)     the scaffold, before each model call  the scaffold's (mini-swe-agent:
                                                (mini-swe-agent's ``step_limit``)      ``LimitsExceeded``)
cost         ``--cost-limit`` (per attempt)     the scaffold, before each model call  the same
wall_time    ``--wall-time-limit`` (seconds)    the host: before each model call, a   ``WallTimeExceeded``
                                                command's timeout cut to what is left,
                                                and a driver silent past it is killed
run_cost     ``--run-cost-limit`` (whole run)   the host, before each model call and  ``RunCostLimitExceeded``
                                                before an attempt starts
===========  =================================  ====================================  ===========================

The step and cost limits are the scaffold's own (the flags override its config's values),
so a run here stops where the scaffold would stop anywhere. The host's checks sit at the
same point (before a model call): the call that crosses a cost limit is paid for, as in
the scaffold. With attempts in parallel the run's total can pass ``--run-cost-limit`` by
at most one model call per attempt in flight.

:class:`RunCostLedger` is the run's running total (thread-safe); the driver seeds it with
what earlier invocations of the same run directory spent. On a Ray cluster one ledger is
shared as an actor (harness.run.executors.ray.shared_object).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

#: The ``limit`` an attempt record names (None: no limit was hit).
LIMITS = ("steps", "cost", "wall_time", "run_cost")
#: Exit statuses the harness sets (the scaffold's own are kept as it gave them).
WALL_TIME_EXCEEDED = "WallTimeExceeded"
RUN_COST_EXCEEDED = "RunCostLimitExceeded"
SCAFFOLD_ERROR = "ScaffoldError"
#: replay only: the scaffold asked for more model outputs than the recording holds
REPLAY_EXHAUSTED = "ReplayExhausted"
#: the sandbox could not be had (image preparation failed, the engine was lost): no attempt ran
INFRASTRUCTURE_ERROR = "InfrastructureError"
#: mini-swe-agent's name for its step and cost limits
SCAFFOLD_LIMITS_EXCEEDED = "LimitsExceeded"


@dataclass(frozen=True)
class Budgets:
    """An attempt's limits (None: none). ``step_limit`` and ``cost_limit`` None leave the
    scaffold config's own values in force."""

    step_limit: int | None = None
    cost_limit: float | None = None
    wall_seconds_limit: float | None = None
    run_cost_limit: float | None = None

    def to_json(self) -> dict:
        return {"step_limit": self.step_limit, "cost_limit": self.cost_limit,
                "wall_seconds_limit": self.wall_seconds_limit, "run_cost_limit": self.run_cost_limit}


class Ledger(Protocol):
    def charge(self, cost: float) -> float: ...

    def spent(self) -> float: ...

    def exhausted(self) -> bool: ...


class RunCostLedger:
    """The run's model cost so far, against ``limit`` (None: no limit)."""

    def __init__(self, limit: float | None = None, spent: float = 0.0) -> None:
        self.limit = limit
        self._spent = float(spent)
        self._lock = threading.Lock()

    def charge(self, cost: float) -> float:
        """Add one model call's cost; returns the run's total."""
        with self._lock:
            self._spent += max(0.0, float(cost))
            return self._spent

    def spent(self) -> float:
        with self._lock:
            return self._spent

    def exhausted(self) -> bool:
        with self._lock:
            return self.limit is not None and self._spent >= self.limit


@dataclass
class AttemptClock:
    """The host's view of one attempt's wall time."""

    limit: float | None
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - self.elapsed()

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


def host_stop(clock: AttemptClock, ledger: Ledger, run_cost_limit: float | None) -> str | None:
    """The limit the host stops an attempt for before its next model call, or None."""
    if clock.expired():
        return "wall_time"
    if run_cost_limit is not None and ledger.exhausted():
        return "run_cost"
    return None


def exit_status_for(limit: str) -> str:
    """The exit status the harness records for a limit it enforces."""
    return {"wall_time": WALL_TIME_EXCEEDED, "run_cost": RUN_COST_EXCEEDED}[limit]


def limit_hit(exit_status: str, *, steps: int, cost: float, step_limit: int | None,
              cost_limit: float | None) -> str | None:
    """Which limit an exit status means (the ``limit`` field of an attempt record).

    The scaffold's own ``LimitsExceeded`` covers steps and cost at once; it is told apart
    by the counts it was checked against (mini-swe-agent stops when ``step_limit <=
    calls`` or ``cost_limit <= cost``; steps are checked first, as it does)."""
    if exit_status == WALL_TIME_EXCEEDED:
        return "wall_time"
    if exit_status == RUN_COST_EXCEEDED:
        return "run_cost"
    if exit_status == SCAFFOLD_LIMITS_EXCEEDED:
        if step_limit and steps >= step_limit:
            return "steps"
        if cost_limit and cost >= cost_limit:
            return "cost"
    return None
