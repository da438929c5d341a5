"""Run vs run: run B against run A on the instances both were assigned (pure analysis).

The denominator of every rate is the set of instance ids both runs list; instances in
only one run are listed, not counted.  With repeated attempts, an instance's verdict is
its first attempt's, so the paired test (McNemar exact, paired bootstrap) of two agent
runs is on their first attempts; their metric vectors (pass@k, cost, steps, time, exit
statuses) stand side by side, each over the shared instances.
"""

from __future__ import annotations

import os

from harness.errors import InputError
from harness.results import stats
from harness.results.claims_vs_run import attempt_summary
from harness.results.comparison import (BOOTSTRAP_ITERATIONS, CONFIDENCE, BootstrapDifference, Flip, RepoSlice,
                                        RunRef, RunsComparison, SliceAverages, agreement, rate_with_interval)
from harness.results.run_data import InstanceOutcome, load_run
from harness.results.run_report import run_agent_metrics

__all__ = ["compare_runs"]


def _outcome_reason(outcome: InstanceOutcome) -> str:
    if outcome.resolved:
        return f"resolved ({outcome.evidence.status or 'FULL'})"
    return outcome.evidence.reason(limit=5)  # the full lists stay in the run's reports


def compare_runs(run_a: str | os.PathLike[str], run_b: str | os.PathLike[str], seed: int = 0, *,
                 iterations: int = BOOTSTRAP_ITERATIONS, max_attempts: int | None = None,
                 max_calls: int | None = None) -> RunsComparison:
    """Paired comparison of run B against run A on their shared instance ids.

    Denominator of every rate: the instances both runs were assigned (``shared``);
    instances in only one run are listed, not counted.  McNemar's exact p uses
    b = resolved only in A, c = resolved only in B.  The bootstrap CI is for
    ``rate_b - rate_a`` (``iterations`` resamples of instances, ``seed``).
    ``flip_rate = (fixed_in_b + broken_in_b) / shared``;
    ``net_flip_rate = (fixed_in_b - broken_in_b) / shared``.  Per-repository slices use
    :func:`~harness.results.run_data.repo_of`; the macro average weighs repositories
    equally, the micro average weighs instances equally.

    Raises:
        InputError (ValueError): a run directory or file is missing/malformed, or the
            runs share no instance.
    """
    a, b = load_run(run_a), load_run(run_b)
    shared = sorted(set(a.outcomes) & set(b.outcomes))
    if not shared:
        raise InputError("the two runs share no instance id; nothing to compare",
                         source=f"{a.path} vs {b.path}", field="resolved_ids/unresolved_ids/...")
    res_a = {i: a.outcomes[i].resolved for i in shared}
    res_b = {i: b.outcomes[i].resolved for i in shared}
    n = len(shared)
    note = f"{n} instance ids present in both runs"
    fixed = [i for i in shared if res_b[i] and not res_a[i]]
    broken = [i for i in shared if res_a[i] and not res_b[i]]
    diff, low, high = stats.paired_bootstrap_diff([res_a[i] for i in shared], [res_b[i] for i in shared],
                                                  iterations=iterations, seed=seed, confidence=CONFIDENCE)

    by_repo: dict[str, list[str]] = {}
    for i in shared:
        by_repo.setdefault(a.outcomes[i].repo, []).append(i)
    fixed_set, broken_set = set(fixed), set(broken)
    slices = []
    for repo in sorted(by_repo):
        ids = by_repo[repo]
        ra, rb = sum(res_a[i] for i in ids), sum(res_b[i] for i in ids)
        slices.append(RepoSlice(repo=repo, instances=len(ids), resolved_a=ra, resolved_b=rb,
                                rate_a=ra / len(ids), rate_b=rb / len(ids), difference=(rb - ra) / len(ids),
                                fixed_in_b=sum(1 for i in ids if i in fixed_set),
                                broken_in_b=sum(1 for i in ids if i in broken_set),
                                interval_a=stats.wilson_interval(ra, len(ids), CONFIDENCE),
                                interval_b=stats.wilson_interval(rb, len(ids), CONFIDENCE)))
    macro_a = sum(s.rate_a for s in slices) / len(slices)
    macro_b = sum(s.rate_b for s in slices) / len(slices)
    micro_a, micro_b = sum(res_a.values()) / n, sum(res_b.values()) / n

    flips = [Flip(instance_id=i, repo=a.outcomes[i].repo,
                  direction="fixed_in_b" if i in fixed_set else "broken_in_b",
                  reason_a=_outcome_reason(a.outcomes[i]), reason_b=_outcome_reason(b.outcomes[i]),
                  page_a=a.outcomes[i].page, page_b=b.outcomes[i].page)
             for i in shared if res_a[i] != res_b[i]]

    return RunsComparison(
        kind="runs_comparison",
        run_a=RunRef(a.run_id, a.path, a.model_name_or_path, len(a.outcomes)),
        run_b=RunRef(b.run_id, b.path, b.model_name_or_path, len(b.outcomes)),
        shared=n, denominator_note=note,
        only_in_a=tuple(sorted(set(a.outcomes) - set(shared))),
        only_in_b=tuple(sorted(set(b.outcomes) - set(shared))),
        rate_a=rate_with_interval(f"A ({a.run_id})", sum(res_a.values()), n, note),
        rate_b=rate_with_interval(f"B ({b.run_id})", sum(res_b.values()), n, note),
        agreement=agreement("A", "B", res_a, res_b, shared),
        mcnemar_p=stats.mcnemar_exact(len(broken), len(fixed)),
        difference=BootstrapDifference(definition="rate_b - rate_a", difference=diff, ci_low=low, ci_high=high,
                                       confidence=CONFIDENCE, iterations=iterations, seed=seed),
        fixed_in_b=len(fixed), broken_in_b=len(broken),
        flip_rate=(len(fixed) + len(broken)) / n, net_flip_rate=(len(fixed) - len(broken)) / n,
        flips=tuple(flips), repo_slices=tuple(slices),
        macro_average=SliceAverages("macro", f"mean of {len(slices)} per-repository rates (repositories weigh equally)",
                                    macro_a, macro_b, macro_b - macro_a),
        micro_average=SliceAverages("micro", f"pooled over {n} shared instances (instances weigh equally)",
                                    micro_a, micro_b, micro_b - micro_a),
        attempts_a=attempt_summary(a, shared, max_attempts, max_calls),
        attempts_b=attempt_summary(b, shared, max_attempts, max_calls),
        warnings=tuple([f"A: {w}" for w in a.warnings] + [f"B: {w}" for w in b.warnings]),
        agent_a=run_agent_metrics(a, shared), agent_b=run_agent_metrics(b, shared),
    )
