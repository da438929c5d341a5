"""Repeated attempts: pass@k and pass^k over instances, first-attempt rates, success
under a budget, costs (conventions: :mod:`harness.results.stats`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from harness.results.stats.rates import check_int, pass_at_k, pass_hat_k

# --------------------------------------------------------------------------- repeated attempts


@dataclass(frozen=True)
class Attempt:
    """One attempt at one instance, in the order it was made.

    ``infra_error`` marks an attempt whose verdict is not evidence about the agent
    (the harness or the instance broke).  Such an attempt is never a success, still
    spends budget, and is counted apart.  ``calls`` is the number of model/tool calls
    it spent (``None`` when unknown); ``cost`` is its cost in the run's currency
    (``None`` when unknown).

    An agent's attempt also says how many ``steps`` it took, how long it ran
    (``agent_seconds``) and how it ended (``exit_status``: the scaffold's own status,
    e.g. ``Submitted``); each ``None`` when not recorded.  ``lost`` marks an attempt
    that left no record at all (a gap in the numbering, or fewer attempts than the run's
    others): it is an infra error whose spend is unknown.
    """

    success: bool
    infra_error: bool = False
    calls: int | None = None
    cost: float | None = None
    steps: int | None = None
    agent_seconds: float | None = None
    exit_status: str | None = None
    lost: bool = False

    @property
    def counts_as_success(self) -> bool:
        # An infra-error attempt has no trustworthy verdict, whatever its flag says.
        return bool(self.success) and not self.infra_error


AttemptsByInstance = Mapping[str, Sequence[Attempt]]


def validate_attempts(instances: AttemptsByInstance) -> None:
    """Raise ValueError naming the instance, the attempt and the field of the first
    malformed attempt (see :func:`check_attempt`)."""
    if not isinstance(instances, Mapping):
        raise ValueError("attempts must be a mapping of instance id -> list of Attempt")
    for instance_id, attempts in instances.items():
        for index, attempt in enumerate(attempts, start=1):
            check_attempt(f"{instance_id} attempt {index}", attempt)


def check_attempt(label: str, attempt: Attempt) -> None:
    """Raise ValueError, starting with ``label``, when ``attempt`` is malformed: not an
    Attempt, negative or non-finite cost or seconds, calls or steps not an int >= 0, an
    exit status not a string, or a lost attempt that is not an infra error."""
    if not isinstance(attempt, Attempt):
        raise ValueError(f"{label}: expected Attempt, got {type(attempt).__name__}")
    if attempt.calls is not None:
        check_int(f"{label} calls", attempt.calls)
    for name in ("cost", "agent_seconds"):
        value = getattr(attempt, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ValueError(f"{label}: {name} must be a finite number >= 0, got {value!r}")
    if attempt.steps is not None:
        check_int(f"{label} steps", attempt.steps)
    if attempt.exit_status is not None and not isinstance(attempt.exit_status, str):
        raise ValueError(f"{label}: exit_status must be a string, got {type(attempt.exit_status).__name__}")
    if attempt.lost and not attempt.infra_error:
        raise ValueError(f"{label}: a lost attempt is an infra error")


@dataclass(frozen=True)
class PassKRow:
    """Mean pass@k and pass^k at one ``k``.

    ``instances`` is the denominator: instances with at least ``k`` attempts (the
    others cannot estimate this ``k`` and are left out of this row only).
    ``excluded_instances`` is how many were left out for having fewer attempts.
    Infra-error attempts count as failed attempts (they are real tries the agent did
    not convert; dropping them would flatter it).
    """

    k: int
    instances: int
    excluded_instances: int
    pass_at_k: float
    pass_hat_k: float


def mean_pass_k(instances: AttemptsByInstance, k: int) -> PassKRow:
    """Mean over instances of per-instance pass@k and pass^k at one ``k``.

    Denominator: instances with ``n >= k`` attempts; each contributes its own
    estimate (averaged per instance, never pooled across instances).  Units:
    proportions in [0, 1].

    Raises:
        ValueError: ``k < 1``, no instance has ``k`` attempts, or an attempt is malformed.
    """
    validate_attempts(instances)
    check_int("k", k, minimum=1)
    at_k: list[Fraction] = []
    hat_k: list[Fraction] = []
    for attempts in instances.values():
        n = len(attempts)
        if n < k:
            continue
        c = sum(1 for attempt in attempts if attempt.counts_as_success)
        at_k.append(pass_at_k(n, c, k))
        hat_k.append(pass_hat_k(n, c, k))
    if not at_k:
        raise ValueError(f"mean_pass_k: no instance has {k} or more attempts")
    used = len(at_k)
    return PassKRow(k=k, instances=used, excluded_instances=len(instances) - used,
                    pass_at_k=float(sum(at_k, Fraction(0)) / used),
                    pass_hat_k=float(sum(hat_k, Fraction(0)) / used))


def pass_k_table(instances: AttemptsByInstance) -> list[PassKRow]:
    """:func:`mean_pass_k` for every ``k`` from 1 to the largest attempt count observed.

    Each row has its own denominator (instances with ``n >= k``).  Empty when no
    instance has any attempt.

    Raises:
        ValueError: an attempt is malformed.
    """
    validate_attempts(instances)
    largest = max((len(attempts) for attempts in instances.values()), default=0)
    return [mean_pass_k(instances, k) for k in range(1, largest + 1)]


def first_attempt_rate(instances: AttemptsByInstance) -> float:
    """Share of instances whose first attempt succeeded.

    Denominator: all instances in ``instances``, including those never attempted
    (they count as not solved).  An infra-error first attempt is not a success.
    Units: proportion in [0, 1].

    Raises:
        ValueError: ``instances`` is empty or an attempt is malformed.
    """
    validate_attempts(instances)
    if not instances:
        raise ValueError("first_attempt_rate: no instances")
    solved = sum(1 for attempts in instances.values() if attempts and attempts[0].counts_as_success)
    return solved / len(instances)


@dataclass(frozen=True)
class BudgetResult:
    """Success within a budget of ``max_attempts`` attempts and ``max_calls`` calls per instance.

    ``rate = successes / assigned_instances``: the denominator is every instance,
    unattempted and infra-error ones included.  ``conditional_rate`` divides by
    ``executed_instances`` instead (instances with at least one attempt that was not an
    infra error) and is secondary: always read it next to ``assigned_instances``.
    """

    max_attempts: int | None
    max_calls: int | None
    assigned_instances: int
    successes: int
    rate: float
    infra_error_attempts: int
    over_budget_attempts: int
    over_budget_successes: int
    unknown_calls_attempts: int
    executed_instances: int
    conditional_rate: float | None
    unattempted_instances: tuple[str, ...]
    solved_ids: tuple[str, ...]


def budget_success(instances: AttemptsByInstance, max_attempts: int | None = None,
                   max_calls: int | None = None) -> BudgetResult:
    """Share of instances solved within ``max_attempts`` attempts and ``max_calls`` cumulative calls.

    Attempts are taken in list order.  Every attempt — failed, successful or infra
    error — spends its calls.  A success counts only when its attempt number is
    ``<= max_attempts`` *and* the cumulative calls up to and including that attempt are
    ``<= max_calls``; a success that pushes spend past the budget does not count.
    When a call budget is set and an earlier (or the same) attempt's calls are
    unknown, spend cannot be verified, so later successes do not count either
    (tallied in ``unknown_calls_attempts``).  ``None`` means no limit for either.

    Denominator: all instances in ``instances`` (``assigned_instances``).  Infra-error
    attempts are counted apart in ``infra_error_attempts``.

    Raises:
        ValueError: ``instances`` is empty, ``max_attempts < 1``, ``max_calls < 0``,
            or an attempt is malformed.
    """
    validate_attempts(instances)
    if not instances:
        raise ValueError("budget_success: no instances")
    if max_attempts is not None:
        check_int("max_attempts", max_attempts, minimum=1)
    if max_calls is not None:
        check_int("max_calls", max_calls)
    solved: list[str] = []
    infra = over_budget = over_budget_successes = unknown_calls = 0
    executed = 0
    unattempted: list[str] = []
    for instance_id, attempts in instances.items():
        if not attempts:
            unattempted.append(instance_id)
            continue
        if any(not attempt.infra_error for attempt in attempts):
            executed += 1
        spent = 0
        spend_known = True
        instance_solved = False
        for number, attempt in enumerate(attempts, start=1):
            infra += attempt.infra_error
            if attempt.calls is None:
                spend_known = False
            else:
                spent += attempt.calls
            within_attempts = max_attempts is None or number <= max_attempts
            within_calls = max_calls is None or (spend_known and spent <= max_calls)
            calls_unverifiable = max_calls is not None and not spend_known
            if not within_attempts or (not within_calls and not calls_unverifiable):
                over_budget += 1
                over_budget_successes += attempt.counts_as_success
            elif calls_unverifiable:
                unknown_calls += 1
            elif attempt.counts_as_success:
                instance_solved = True
        if instance_solved:
            solved.append(instance_id)
    n = len(instances)
    return BudgetResult(
        max_attempts=max_attempts, max_calls=max_calls, assigned_instances=n,
        successes=len(solved), rate=len(solved) / n,
        infra_error_attempts=infra, over_budget_attempts=over_budget,
        over_budget_successes=over_budget_successes, unknown_calls_attempts=unknown_calls,
        executed_instances=executed,
        conditional_rate=(len(solved) / executed) if executed else None,
        unattempted_instances=tuple(sorted(unattempted)), solved_ids=tuple(sorted(solved)),
    )


@dataclass(frozen=True)
class CostSummary:
    """Cost and calls over every attempt of every instance.

    ``cost_per_attempt = total_cost / attempts_with_cost`` (attempts whose cost is
    known).  ``cost_per_solved_instance = total_cost / solved_instances`` where an
    instance is solved if any of its attempts succeeded; it is ``None`` when no
    instance was solved or when some attempt's cost is unknown (a partial total
    would understate it).  ``total_calls`` likewise sums known calls only;
    ``calls_complete`` says whether every attempt reported them.
    """

    attempts: int
    attempts_with_cost: int
    total_cost: float | None
    cost_complete: bool
    cost_per_attempt: float | None
    solved_instances: int
    cost_per_solved_instance: float | None
    total_calls: int
    calls_complete: bool


def cost_summary(instances: AttemptsByInstance) -> CostSummary:
    """Cost per attempt and cost per solved instance (units: the run's cost unit).

    Denominators: attempts with a known cost for ``cost_per_attempt``; instances with
    at least one successful attempt for ``cost_per_solved_instance`` (numerator: the
    cost of *all* attempts, failed ones included, so an agent that burns budget on
    failures pays for it).

    Raises:
        ValueError: an attempt is malformed (negative or non-finite cost, negative calls).
    """
    validate_attempts(instances)
    all_attempts = [attempt for attempts in instances.values() for attempt in attempts]
    costs = [float(attempt.cost) for attempt in all_attempts if attempt.cost is not None]
    # fsum is exactly rounded, hence independent of summation order.
    total_cost = math.fsum(costs) if costs else None
    complete = len(costs) == len(all_attempts) and bool(all_attempts)
    solved = sum(1 for attempts in instances.values() if any(a.counts_as_success for a in attempts))
    return CostSummary(
        attempts=len(all_attempts), attempts_with_cost=len(costs), total_cost=total_cost,
        cost_complete=complete,
        cost_per_attempt=(total_cost / len(costs)) if costs else None,  # type: ignore[operator]  # costs, so a total
        solved_instances=solved,
        cost_per_solved_instance=(total_cost / solved) if (complete and solved and total_cost is not None) else None,
        total_calls=sum(attempt.calls for attempt in all_attempts if attempt.calls is not None),
        calls_complete=all(attempt.calls is not None for attempt in all_attempts),
    )


@dataclass(frozen=True)
class AttemptSummary:
    """Everything about repeated attempts for one run.

    ``instances`` is the denominator of ``first_attempt_rate`` and of
    ``budget.rate``; each :class:`PassKRow` carries its own denominator.
    """

    instances: int
    attempts: int
    max_attempts_observed: int
    infra_error_attempts: int
    first_attempt_rate: float
    pass_k: tuple[PassKRow, ...]
    budget: BudgetResult
    costs: CostSummary


def summarize_attempts(instances: AttemptsByInstance, max_attempts: int | None = None,
                       max_calls: int | None = None) -> AttemptSummary:
    """Pass@k / pass^k table, first-attempt rate, budget success and costs in one call.

    Denominators are those of the parts: all instances for the first-attempt and
    budget rates, instances with ``n >= k`` for each pass@k / pass^k row, attempts with
    known cost for cost per attempt, solved instances for cost per solved instance.

    Raises:
        ValueError: ``instances`` is empty, a budget is invalid, or an attempt is malformed.
    """
    validate_attempts(instances)
    if not instances:
        raise ValueError("summarize_attempts: no instances")
    return AttemptSummary(
        instances=len(instances),
        attempts=sum(len(attempts) for attempts in instances.values()),
        max_attempts_observed=max(len(attempts) for attempts in instances.values()),
        infra_error_attempts=sum(a.infra_error for attempts in instances.values() for a in attempts),
        first_attempt_rate=first_attempt_rate(instances),
        pass_k=tuple(pass_k_table(instances)),
        budget=budget_success(instances, max_attempts=max_attempts, max_calls=max_calls),
        costs=cost_summary(instances),
    )

