"""Which pictures each page shows: the result model mapped onto :mod:`harness.views.svg`.

Every figure drawn here is one the model already holds (rates and Wilson intervals,
phase quartiles, flip counts, pass@k rows); this module only chooses and labels them.
"""

from __future__ import annotations

from markupsafe import Markup

from harness.results import stats
from harness.results.comparison import ClaimsComparison, RateWithInterval, RunsComparison
from harness.results.instance_detail import InstanceDetail
from harness.results.run_report import RunReport
from harness.views.svg import Bar, box_chart, diverging_chart, interval_chart, line_chart, timeline_chart

_TOTALS = ("total", "wall")


def _caption(rate: RateWithInterval) -> str:
    return f"{rate.rate * 100:.1f}% ({rate.successes}/{rate.denominator})"


def _bar(label: str, rate: RateWithInterval, css: str = "bar") -> Bar:
    return Bar(label, rate.rate, rate.ci_low, rate.ci_high, _caption(rate), css)


def _rows(summary: stats.AttemptSummary | None) -> tuple[stats.PassKRow, ...]:
    return summary.pass_k if summary is not None else ()


def _pass_k(series: list[tuple[str, tuple[stats.PassKRow, ...]]]) -> Markup | None:
    lines = []
    for index, (name, rows) in enumerate(series):
        if not rows:
            continue
        lines.append((f"{name}pass@k", f"s{2 * index}", [(row.k, row.pass_at_k) for row in rows]))
        lines.append((f"{name}pass^k", f"s{2 * index + 1}", [(row.k, row.pass_hat_k) for row in rows]))
    return line_chart(lines, "k (attempts drawn)", "mean pass@k and pass^k by k") if lines else None


def run_charts(report: RunReport) -> dict[str, Markup | None]:
    bars = [_bar(row.repo, row.rate) for row in report.repos]
    if len(report.repos) > 1:
        bars.append(_bar("all repositories", report.resolved, "bar-b"))
    phases = [(p.phase, p.minimum, p.q1, p.median, p.q3, p.maximum, f"median {p.median:.3g} s (n={p.instances})")
              for p in report.phases]
    return {
        "repo_rates": interval_chart(bars, "resolved rate per repository with 95% Wilson intervals") if bars else None,
        "phases": box_chart(phases, "evaluation time by phase: min, quartiles, max") if phases else None,
        # an agent run's rows have the run's fixed denominator (every instance, K attempts each)
        "pass_k": _pass_k([("", report.agent.figures.pass_k if report.agent else _rows(report.attempts))]),
    }


def instance_timeline(detail: InstanceDetail) -> Markup | None:
    phases = [(phase, seconds) for phase, seconds in detail.timings if phase not in _TOTALS]
    return timeline_chart(phases, "time spent in each phase") if phases else None


def claims_charts(result: ClaimsComparison) -> dict[str, Markup | None]:
    rates = interval_chart([_bar("claimed", result.claimed, "bar-claimed"), _bar("reproduced", result.reproduced, "bar-b")],
                           "claimed and reproduced resolved rates with 95% Wilson intervals")
    rows = [(r.repo, r.claimed_only, r.reproduced_only) for r in result.repos if r.claimed_only or r.reproduced_only]
    rows.append(("all instances", result.agreement.first_only, result.agreement.second_only))
    return {"rates": rates,
            "flips": diverging_chart(rows, "claimed only", "reproduced only", "discordant instances per repository"),
            "pass_k": _pass_k([("", _rows(result.attempts))])}


def runs_charts(result: RunsComparison) -> dict[str, Markup | None]:
    bars: list[Bar] = []
    for s in result.repo_slices:
        bars.append(Bar(f"{s.repo} · A", s.rate_a, *s.interval_a, f"{s.rate_a * 100:.1f}% ({s.resolved_a}/{s.instances})", "bar-a"))
        bars.append(Bar(f"{s.repo} · B", s.rate_b, *s.interval_b, f"{s.rate_b * 100:.1f}% ({s.resolved_b}/{s.instances})", "bar-b"))
    bars += [_bar("all · A", result.rate_a, "bar-a"), _bar("all · B", result.rate_b, "bar-b")]
    rows = [(s.repo, s.broken_in_b, s.fixed_in_b) for s in result.repo_slices]
    rows.append(("all instances", result.broken_in_b, result.fixed_in_b))
    return {"rates": interval_chart(bars, "resolved rate per repository, A and B, with 95% Wilson intervals"),
            "flips": diverging_chart(rows, "broken in B", "fixed in B", "flips per repository"),
            "pass_k": _pass_k([("A ", _rows(result.attempts_a)), ("B ", _rows(result.attempts_b))])}
