"""The metric vector of an agent run (pure): what ``summary.json``'s ``agent`` block, the
run's pages and ``harness compare`` show for predictions that carry agent fields
(``cost``, ``calls``, ``steps``, ``agent_seconds``, ``exit_status``) or several attempts.

Denominators are fixed before any outcome is looked at:

* the **instances** are every instance of the run (``summary.json``'s
  ``total_instances``: instances without a prediction, refused records and errors
  included);
* every instance has **K attempts**, K being the highest attempt number of the run (1
  without attempts).  An attempt that left no graded record (a gap in the numbering, an
  instance with fewer attempts than K, an instance without a prediction) is *lost*: a
  failed infra-error attempt of unknown cost, counted in ``attempts_lost``;
* infra errors (the grading's error origin is the harness or the instance) count as
  failed attempts, as :mod:`harness.results.stats` says, and are counted apart.

The figures:

* ``resolved``: instances whose **first** attempt resolved, over every instance, with a
  Wilson interval (the same verdicts as ``summary.json``'s ``resolved_instances``);
* ``pass_k``: mean pass@k and pass^k for k = 1..K (unbiased estimators per instance,
  averaged over every instance: each row's denominator is all instances);
* ``costs``: :func:`harness.results.stats.cost_summary` over all attempts (cost per
  resolved instance = every attempt's cost over the instances some attempt resolved;
  unknown when any attempt's cost is);
* ``steps`` and ``agent_seconds``: median, 95th percentile and maximum over the recorded
  attempts that recorded them (the others counted as ``missing``);
* ``exit_statuses``: recorded attempts by the status their agent ended with;
* the same for each repository (``repos``), with the run's K.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.results import stats

__all__ = ["AgentFigures", "RepoFigures", "AgentMetrics", "LOST", "is_agent_run", "arrange", "agent_figures",
           "agent_metrics"]

#: An attempt that left no graded record: failed, an infra error, spend unknown.
LOST = stats.Attempt(success=False, infra_error=True, lost=True)


@dataclass(frozen=True)
class AgentFigures:
    """The metric vector over ``instances`` instances with ``attempts_per_instance`` (K) attempts each.

    ``attempts`` = instances x K; ``attempts_recorded`` of them were graded,
    ``attempts_lost`` were not (see the module docstring); ``infra_error_attempts``
    counts the lost ones and the graded ones whose error was the harness's or the
    instance's.  ``exit_statuses`` counts the recorded attempts by exit status (most
    frequent first); ``exit_status_unrecorded`` the recorded attempts without one.
    """

    instances: int
    attempts_per_instance: int
    attempts: int
    attempts_recorded: int
    attempts_lost: int
    infra_error_attempts: int
    resolved: stats.RateWithInterval
    pass_k: tuple[stats.PassKRow, ...]
    costs: stats.CostSummary
    steps: stats.Distribution
    agent_seconds: stats.Distribution
    exit_statuses: tuple[tuple[str, int], ...]
    exit_status_unrecorded: int

    def to_json(self) -> dict[str, Any]:
        """The figures as ``summary.json``'s ``agent`` block writes them."""
        costs, r = self.costs, self.resolved
        return {
            "instances": self.instances, "attempts_per_instance": self.attempts_per_instance,
            "attempts": self.attempts, "attempts_recorded": self.attempts_recorded,
            "attempts_lost": self.attempts_lost, "infra_error_attempts": self.infra_error_attempts,
            "resolved": {"resolved": r.successes, "denominator": r.denominator, "rate": r.rate, "ci_low": r.ci_low,
                         "ci_high": r.ci_high, "confidence": r.confidence, "definition": r.denominator_note},
            "pass_at_k": {str(row.k): row.pass_at_k for row in self.pass_k},
            "pass_hat_k": {str(row.k): row.pass_hat_k for row in self.pass_k},
            "cost": {"total": costs.total_cost, "complete": costs.cost_complete,
                     "attempts_with_cost": costs.attempts_with_cost, "per_attempt": costs.cost_per_attempt,
                     "per_resolved_instance": costs.cost_per_solved_instance,
                     "resolved_instances": costs.solved_instances},
            "calls": {"total": costs.total_calls, "complete": costs.calls_complete},
            "steps": _distribution_json(self.steps),
            "agent_seconds": _distribution_json(self.agent_seconds),
            "exit_statuses": dict(self.exit_statuses),
            "exit_status_unrecorded": self.exit_status_unrecorded,
        }


@dataclass(frozen=True)
class RepoFigures:
    """One repository's instances of the run, with the run's K."""

    repo: str
    figures: AgentFigures


@dataclass(frozen=True)
class AgentMetrics:
    """The run's metric vector and its per-repository slices (sorted by repository)."""

    figures: AgentFigures
    repos: tuple[RepoFigures, ...]

    def to_json(self) -> dict[str, Any]:
        """``summary.json``'s ``agent`` block: the run's figures, and ``repos`` {repository: figures}."""
        return {**self.figures.to_json(), "repos": {row.repo: row.figures.to_json() for row in self.repos}}


def _distribution_json(spread: stats.Distribution) -> dict[str, Any]:
    return {"count": spread.count, "missing": spread.missing, "p50": spread.p50, "p95": spread.p95,
            "max": spread.maximum}


def is_agent_run(numbered: Mapping[str, Mapping[int, stats.Attempt]], has_attempts: bool) -> bool:
    """Whether a run has a metric vector: it has repeated attempts, or an attempt recorded
    an agent field (steps, agent_seconds or exit_status)."""
    return has_attempts or any(
        attempt.steps is not None or attempt.agent_seconds is not None or attempt.exit_status is not None
        for attempts in numbered.values() for attempt in attempts.values())


def arrange(numbered: Mapping[str, Mapping[int, stats.Attempt]],
            universe: Iterable[str]) -> dict[str, tuple[stats.Attempt, ...]]:
    """Every instance of ``universe`` with exactly K attempts in attempt order (K: the
    highest attempt number in ``numbered``, at least 1), :data:`LOST` where none was
    recorded.  Attempt numbers start at 1.

    Raises:
        ValueError: an attempt number below 1.
    """
    highest = 1
    for instance_id, attempts in numbered.items():
        for number in attempts:
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ValueError(f"{instance_id}: attempt numbers start at 1, got {number!r}")
            highest = max(highest, number)
    return {instance_id: tuple(numbered.get(instance_id, {}).get(number, LOST) for number in range(1, highest + 1))
            for instance_id in universe}


def agent_figures(attempts: Mapping[str, Sequence[stats.Attempt]], note: str) -> AgentFigures:
    """The metric vector of ``attempts`` (instance id -> its K attempts, as :func:`arrange`
    gives them); ``note`` says what the instances are.

    Raises:
        ValueError: no instance, instances with different numbers of attempts, or a
            malformed attempt.
    """
    if not attempts:
        raise ValueError("agent_figures: no instances")
    lengths = {len(tried) for tried in attempts.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"agent_figures: every instance needs the same number (>= 1) of attempts, got {sorted(lengths)}")
    k = lengths.pop()
    every = [attempt for tried in attempts.values() for attempt in tried]
    recorded = [attempt for attempt in every if not attempt.lost]
    first = sum(1 for tried in attempts.values() if tried[0].counts_as_success)
    statuses = Counter(attempt.exit_status for attempt in recorded if attempt.exit_status is not None)
    return AgentFigures(
        instances=len(attempts), attempts_per_instance=k, attempts=len(every), attempts_recorded=len(recorded),
        attempts_lost=len(every) - len(recorded), infra_error_attempts=sum(a.infra_error for a in every),
        resolved=stats.rate_with_interval("resolved (first attempt)", first, len(attempts), note),
        pass_k=tuple(stats.mean_pass_k(attempts, n) for n in range(1, k + 1)),
        costs=stats.cost_summary(attempts),
        steps=stats.distribution([attempt.steps for attempt in recorded]),
        agent_seconds=stats.distribution([attempt.agent_seconds for attempt in recorded]),
        exit_statuses=tuple(sorted(statuses.items(), key=lambda item: (-item[1], item[0]))),
        exit_status_unrecorded=sum(1 for attempt in recorded if attempt.exit_status is None))


def agent_metrics(numbered: Mapping[str, Mapping[int, stats.Attempt]], universe: Iterable[str],
                  repos: Mapping[str, str], *, has_attempts: bool) -> AgentMetrics | None:
    """The metric vector of a run: ``numbered`` holds each instance's recorded attempts by
    attempt number, ``universe`` every instance of the run (the denominator), ``repos``
    each instance's repository.  None when the run is not an agent run
    (:func:`is_agent_run`) or has no instance.

    Raises:
        ValueError: an instance of ``numbered`` outside ``universe`` or without a
            repository, an attempt number below 1, or a malformed attempt.
    """
    ids = sorted(set(universe))
    if not ids or not is_agent_run(numbered, has_attempts):
        return None
    outside = sorted(set(numbered) - set(ids))
    if outside:
        raise ValueError(f"agent_metrics: attempts of instances outside the run: {', '.join(outside[:5])}")
    unsliced = [i for i in ids if i not in repos]
    if unsliced:
        raise ValueError(f"agent_metrics: no repository for {', '.join(unsliced[:5])}")
    arranged = arrange(numbered, ids)
    by_repo: dict[str, list[str]] = {}
    for instance_id in ids:
        by_repo.setdefault(repos[instance_id], []).append(instance_id)
    return AgentMetrics(
        figures=agent_figures(arranged, f"all {len(ids)} instances of the run, first attempt (instances without a "
                                        "prediction, and errors, count as unresolved)"),
        repos=tuple(RepoFigures(repo, agent_figures({i: arranged[i] for i in members},
                                                    f"the {len(members)} instances of {repo} in the run"))
                    for repo, members in sorted(by_repo.items())))
