"""Pure statistics for grading runs: intervals, paired tests and repeated-attempt aggregates.

Everything here is a pure function of its arguments (standard library only; the one
source of randomness is a ``random.Random`` seeded explicitly by the caller), so the
comparison layer can recompute any figure from saved run directories.

Conventions used throughout:

* The unit of analysis is the **instance** (task), never the attempt: per-instance
  figures are computed first and then averaged, so an instance that was tried eight
  times weighs as much as one tried twice.
* Every rate states its denominator in its docstring.  Unless said otherwise the
  denominator is *all assigned instances*: failures, infrastructure errors and
  unattempted instances stay in it, so adding one can never raise a rate.
* Means are accumulated with :class:`fractions.Fraction` (or :func:`math.fsum` for
  costs) so that reordering instances cannot change a single bit of any figure.
* Invalid arguments raise :class:`ValueError` (bad types included, so callers need to
  catch only one exception type).
"""

from harness.results.stats.attempts import (Attempt, AttemptSummary, BudgetResult, CostSummary, PassKRow,
                                            budget_success, cost_summary, first_attempt_rate, mean_pass_k, pass_k_table,
                                            summarize_attempts, validate_attempts, check_attempt)
from harness.results.stats.distribution import Distribution, distribution
from harness.results.stats.rates import (CONFIDENCE, RateWithInterval, mcnemar_exact, paired_bootstrap_diff,
                                         pass_at_k, pass_hat_k, percentile, rate_with_interval, wilson_interval)

__all__ = [
    "CONFIDENCE",
    "RateWithInterval",
    "rate_with_interval",
    "Distribution",
    "distribution",
    "percentile",
    "Attempt",
    "BudgetResult",
    "CostSummary",
    "PassKRow",
    "AttemptSummary",
    "wilson_interval",
    "mcnemar_exact",
    "pass_at_k",
    "pass_hat_k",
    "paired_bootstrap_diff",
    "mean_pass_k",
    "pass_k_table",
    "first_attempt_rate",
    "budget_success",
    "cost_summary",
    "summarize_attempts",
    "validate_attempts",
    "check_attempt",
]
