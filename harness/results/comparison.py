"""Result types shared by the analyses: rates with intervals, paired 2x2 tables, and the
two comparison results (:class:`ClaimsComparison`, :class:`RunsComparison`).

All are frozen dataclasses of plain values, so every view (JSON, Markdown, HTML) renders
the same figures; :func:`harness.views.json_view.to_dict` is their JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.results import stats
from harness.results.agent_metrics import AgentMetrics
from harness.results.run_data import InstanceEvidence
from harness.results.vendor_tests import DifferingTest

# a rate with its interval is the stats module's; its names stay importable from here
from harness.results.stats.rates import CONFIDENCE as CONFIDENCE
from harness.results.stats.rates import RateWithInterval as RateWithInterval
from harness.results.stats.rates import rate_with_interval as rate_with_interval
BOOTSTRAP_ITERATIONS = 10_000


@dataclass(frozen=True)
class AgreementTable:
    """Paired 2x2 table over the same instances.

    ``first_only`` (b) and ``second_only`` (c) are the discordant cells used by McNemar.
    """

    first_label: str
    second_label: str
    both_resolved: int
    first_only: int
    second_only: int
    neither: int
    total: int


def agreement(first_label: str, second_label: str, first: Mapping[str, bool], second: Mapping[str, bool],
              ids: Sequence[str]) -> AgreementTable:
    both = sum(1 for i in ids if first[i] and second[i])
    first_only = sum(1 for i in ids if first[i] and not second[i])
    second_only = sum(1 for i in ids if second[i] and not first[i])
    return AgreementTable(first_label=first_label, second_label=second_label, both_resolved=both,
                          first_only=first_only, second_only=second_only,
                          neither=len(ids) - both - first_only - second_only, total=len(ids))


# --------------------------------------------------------------------------- claims vs run


@dataclass(frozen=True)
class DiscordantInstance:
    """An instance where the claim and our run disagree, with the harness's reason."""

    instance_id: str
    repo: str
    claimed_resolved: bool
    reproduced_resolved: bool
    claim_list: str  # "resolved" | "unresolved" | "no_prediction"
    claim_detail: Mapping[str, Any]
    reason: str
    evidence: InstanceEvidence | None  # None when the instance is absent from the run
    reference_control: str | None  # "passed" | "failed" | "unknown"; None without a validity report
    page: str | None = None  # the instance's page, relative to the run directory
    #: why the verdicts differ (harness.results.vendor_tests): the class, every class of its
    #: decisive tests, one line, and each test whose outcome differs
    reason_class: str = "unexplained"
    reason_classes: tuple[str, ...] = ()
    explanation: str = ""
    tests: tuple[DifferingTest, ...] = ()


@dataclass(frozen=True)
class ReferenceControlFailure:
    """An instance whose reference patch did not fully pass: listed apart, still in the denominator."""

    instance_id: str
    claimed_resolved: bool
    reproduced_resolved: bool


@dataclass(frozen=True)
class RepoDisagreement:
    """Per repository: universe instances, and the discordant ones in each direction."""

    repo: str
    instances: int
    claimed_resolved: int
    reproduced_resolved: int
    claimed_only: int
    reproduced_only: int


@dataclass(frozen=True)
class ClaimsComparison:
    """Our run against a vendor's claimed verdicts over the claim universe."""

    kind: str
    run_id: str
    run_dir: str
    claims_path: str
    submission: str | None
    validity_path: str | None
    denominator: int
    denominator_note: str
    claimed: RateWithInterval
    reproduced: RateWithInterval
    agreement: AgreementTable
    mcnemar_p: float
    discordant: tuple[DiscordantInstance, ...]
    claimed_no_prediction: tuple[str, ...]
    not_in_run: tuple[str, ...]
    extra_in_run: tuple[str, ...]
    reference_control_failed: tuple[ReferenceControlFailure, ...]
    reference_control_unknown: tuple[str, ...]
    attempts: stats.AttemptSummary | None
    warnings: tuple[str, ...]
    claims_format: str = "harness"
    claimed_outside_run: tuple[str, ...] = ()
    repos: tuple[RepoDisagreement, ...] = ()
    #: discordant instances per reason class; the reference run and defects file read
    reason_counts: Mapping[str, int] = field(default_factory=dict)
    control_dir: str | None = None
    defects_path: str | None = None
    #: instances whose verdicts agree but whose tests differ (per-test reports only)
    agreeing_with_test_differences: tuple[str, ...] = ()


# --------------------------------------------------------------------------- run vs run


@dataclass(frozen=True)
class BootstrapDifference:
    """Paired bootstrap of ``rate_b - rate_a`` over shared instances (resampling instances)."""

    definition: str
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    iterations: int
    seed: int


@dataclass(frozen=True)
class Flip:
    """An instance whose verdict differs between the runs, with both runs' reasons."""

    instance_id: str
    repo: str
    direction: str  # "fixed_in_b" (A unresolved -> B resolved) | "broken_in_b" (A resolved -> B unresolved)
    reason_a: str
    reason_b: str
    page_a: str | None = None  # instance pages, relative to each run directory
    page_b: str | None = None


@dataclass(frozen=True)
class RepoSlice:
    """One repository's shared instances; rates are over ``instances`` of this repo,
    ``interval_a`` / ``interval_b`` their Wilson intervals."""

    repo: str
    instances: int
    resolved_a: int
    resolved_b: int
    rate_a: float
    rate_b: float
    difference: float
    fixed_in_b: int
    broken_in_b: int
    interval_a: tuple[float, float] = (0.0, 1.0)
    interval_b: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class SliceAverages:
    """``macro``: mean of per-repository rates (each repository weighs the same).
    ``micro``: pooled over instances (each instance weighs the same; equals the overall rates)."""

    kind: str
    denominator_note: str
    rate_a: float
    rate_b: float
    difference: float


@dataclass(frozen=True)
class RunRef:
    run_id: str
    run_dir: str
    model_name_or_path: str | None
    instances: int


@dataclass(frozen=True)
class RunsComparison:
    """Run B against run A on the instances both were assigned (paired)."""

    kind: str
    run_a: RunRef
    run_b: RunRef
    shared: int
    denominator_note: str
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    rate_a: RateWithInterval
    rate_b: RateWithInterval
    agreement: AgreementTable
    mcnemar_p: float
    difference: BootstrapDifference
    fixed_in_b: int
    broken_in_b: int
    flip_rate: float
    net_flip_rate: float
    flips: tuple[Flip, ...]
    repo_slices: tuple[RepoSlice, ...]
    macro_average: SliceAverages
    micro_average: SliceAverages
    attempts_a: stats.AttemptSummary | None
    attempts_b: stats.AttemptSummary | None
    warnings: tuple[str, ...]
    #: each run's agent metric vector over the shared instances (None: not an agent run);
    #: the paired test of two agent runs is ``mcnemar_p`` and ``difference``, both on
    #: the first attempts' verdicts
    agent_a: AgentMetrics | None = None
    agent_b: AgentMetrics | None = None


Result = ClaimsComparison | RunsComparison
