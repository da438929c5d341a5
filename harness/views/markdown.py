"""The Markdown view of comparison and run results (same figures as the JSON view).

Markdown goes into pull requests and terminals; every cell is escaped for tables
(``|`` is common in pytest parametrisation ids).
"""

from __future__ import annotations

from harness.results import stats
from harness.results.agent_metrics import AgentFigures, AgentMetrics
from harness.results.comparison import ClaimsComparison, RateWithInterval, Result, RunsComparison
from harness.results.run_report import RunReport
from harness.results.vendor_tests import CLASS_LABELS

def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _pp(value: float) -> str:
    return f"{value * 100:+.1f} pp"


def _cell(text: object) -> str:
    # Test ids routinely contain "|" (pytest parametrisation); escape it for tables.
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _rate_line(rate: RateWithInterval) -> str:
    return (f"{rate.successes}/{rate.denominator} = {_pct(rate.rate)} "
            f"(95% Wilson CI {_pct(rate.ci_low)}–{_pct(rate.ci_high)})")


def _p(value: float) -> str:
    return f"{value:.4g}"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _figure(value: float | None) -> str:
    if value is None:
        return "n/a"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _secs(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def _spread(spread: stats.Distribution, seconds: bool = False) -> str:
    show = _secs if seconds else _figure
    return f"{show(spread.p50)} / {show(spread.p95)} / {show(spread.maximum)}"


def _exits(figures: AgentFigures) -> str:
    parts = [f"{_cell(status)} × {n}" for status, n in figures.exit_statuses]
    if figures.exit_status_unrecorded:
        parts.append(f"unrecorded × {figures.exit_status_unrecorded}")
    return ", ".join(parts) or "—"


def _agent_md(agent: AgentMetrics | None) -> list[str]:
    if agent is None:
        return []
    a = agent.figures
    k = a.attempts_per_instance
    lines = ["## Agent", "",
             f"- Resolved, first attempt: {_rate_line(a.resolved)}",
             f"- Attempts: {a.instances} instances × {k} = {a.attempts}; {a.attempts_recorded} graded, "
             f"{a.attempts_lost} lost (failed infra-error attempts of unknown cost), {a.infra_error_attempts} infra errors "
             "in all (counted as failed)",
             f"- Cost per resolved instance: {_money(a.costs.cost_per_solved_instance)} (total {_money(a.costs.total_cost)}"
             + ("" if a.costs.cost_complete else f", known for {a.costs.attempts_with_cost}/{a.costs.attempts} attempts")
             + f"; {a.costs.solved_instances} instances resolved by some attempt; calls {a.costs.total_calls}"
             + ("" if a.costs.calls_complete else " (not all recorded)") + ")",
             f"- Steps per attempt p50 / p95 / max: {_spread(a.steps)} ({a.steps.count} recorded, {a.steps.missing} not)",
             f"- Agent time per attempt p50 / p95 / max: {_spread(a.agent_seconds, seconds=True)} "
             f"({a.agent_seconds.count} recorded, {a.agent_seconds.missing} not)",
             f"- Exit statuses: {_exits(a)}" + (f"; lost × {a.attempts_lost}" if a.attempts_lost else ""),
             f"- Denominator: {a.resolved.denominator_note}; pass@k and pass^k: unbiased estimates from each instance's "
             f"{k} attempts, averaged over all {a.instances} instances", "",
             "| k | pass@k | pass^k |", "|---:|---:|---:|"]
    lines += [f"| {row.k} | {_pct(row.pass_at_k)} | {_pct(row.pass_hat_k)} |" for row in a.pass_k]
    last = f"pass@{k} | pass^{k} | " if k > 1 else ""
    lines += ["", "### Agent, per repository", "",
              f"| repository | instances | resolved (first) | pass@1 | {last}cost per resolved | steps p50 / p95 / max | "
              "time p50 / p95 / max | exit statuses |",
              "|---|---:|---|---:|" + ("---:|---:|" if k > 1 else "") + "---:|---:|---:|---|"]
    for row in agent.repos:
        f = row.figures
        extra = f"{_pct(f.pass_k[-1].pass_at_k)} | {_pct(f.pass_k[-1].pass_hat_k)} | " if k > 1 else ""
        lines.append(f"| {_cell(row.repo)} | {f.instances} | {_rate_line(f.resolved)} | {_pct(f.pass_k[0].pass_at_k)} | "
                     f"{extra}{_money(f.costs.cost_per_solved_instance)} | {_spread(f.steps)} | "
                     f"{_spread(f.agent_seconds, seconds=True)} | {_exits(f)} |")
    return lines + [""]


def _agent_compare_md(result: RunsComparison) -> list[str]:
    a, b = result.agent_a, result.agent_b
    if a is None and b is None:
        return []

    def cell(agent: AgentMetrics | None, show) -> str:
        return "—" if agent is None else show(agent.figures)

    def pass_cell(agent: AgentMetrics | None, k: int, hat: bool) -> str:
        if agent is None or k > agent.figures.attempts_per_instance:
            return "—"
        row = agent.figures.pass_k[k - 1]
        return _pct(row.pass_hat_k if hat else row.pass_at_k)

    d = result.difference
    rows = [("resolved, first attempt", lambda f: _rate_line(f.resolved)),
            ("attempts per instance", lambda f: f"{f.attempts_per_instance} ({f.attempts_lost} lost, "
                                                f"{f.infra_error_attempts} infra errors)")]
    lines = ["## Agent runs side by side", "",
             f"Paired test on the first attempts of the {result.shared} shared instances: McNemar exact p = "
             f"{_p(result.mcnemar_p)}; difference B − A {_pp(d.difference)} (paired bootstrap 95% CI {_pp(d.ci_low)} "
             f"to {_pp(d.ci_high)}). Each run's figures are over the shared instances.", "",
             f"| | A ({_cell(result.run_a.run_id)}) | B ({_cell(result.run_b.run_id)}) |", "|---|---|---|"]
    lines += [f"| {label} | {cell(a, show)} | {cell(b, show)} |" for label, show in rows]
    most = max(agent.figures.attempts_per_instance for agent in (a, b) if agent is not None)
    for k in range(1, most + 1):
        lines.append(f"| pass@{k} | {pass_cell(a, k, False)} | {pass_cell(b, k, False)} |")
        lines.append(f"| pass^{k} | {pass_cell(a, k, True)} | {pass_cell(b, k, True)} |")
    rows = [("cost, total", lambda f: _money(f.costs.total_cost)),
            ("cost per resolved instance", lambda f: _money(f.costs.cost_per_solved_instance)),
            ("model calls", lambda f: str(f.costs.total_calls)),
            ("steps p50 / p95 / max", lambda f: _spread(f.steps)),
            ("agent time p50 / p95 / max", lambda f: _spread(f.agent_seconds, seconds=True)),
            ("exit statuses", _exits)]
    lines += [f"| {label} | {cell(a, show)} | {cell(b, show)} |" for label, show in rows]
    return lines + [""]


def _attempts_md(title: str, summary: stats.AttemptSummary | None) -> list[str]:
    if summary is None:
        return []
    budget, costs = summary.budget, summary.costs
    lines = [f"### Repeated attempts — {title}", "",
             f"{summary.attempts} attempts over {summary.instances} instances "
             f"(at most {summary.max_attempts_observed} per instance); "
             f"{summary.infra_error_attempts} infra-error attempts (counted as failed tries, listed apart).", "",
             f"- First-attempt rate: {_pct(summary.first_attempt_rate)} of {summary.instances} instances",
             f"- Success within budget (attempts ≤ {budget.max_attempts or 'all'}, "
             f"calls ≤ {budget.max_calls if budget.max_calls is not None else 'unlimited'}): "
             f"{budget.successes}/{budget.assigned_instances} = {_pct(budget.rate)}; "
             f"over-budget attempts {budget.over_budget_attempts} "
             f"({budget.over_budget_successes} successes not counted); "
             f"unverifiable spend {budget.unknown_calls_attempts}",
             f"- Conditional on ≥1 non-infra attempt: {budget.successes}/{budget.executed_instances} = "
             f"{_pct(budget.conditional_rate)} (secondary)", ""]
    if summary.pass_k:
        lines += ["| k | instances with n ≥ k | mean pass@k | mean pass^k |", "|---:|---:|---:|---:|"]
        lines += [f"| {row.k} | {row.instances} | {_pct(row.pass_at_k)} | {_pct(row.pass_hat_k)} |"
                  for row in summary.pass_k]
        lines.append("")
    cost_note = "" if costs.cost_complete else f" (cost known for {costs.attempts_with_cost}/{costs.attempts} attempts)"
    per_attempt = "n/a" if costs.cost_per_attempt is None else f"{costs.cost_per_attempt:.4g}"
    per_solved = "n/a" if costs.cost_per_solved_instance is None else f"{costs.cost_per_solved_instance:.4g}"
    total = "n/a" if costs.total_cost is None else f"{costs.total_cost:.4g}"
    lines += [f"- Cost: total {total}{cost_note}; per attempt {per_attempt}; "
              f"per solved instance {per_solved} ({costs.solved_instances} solved by any attempt)",
              f"- Calls: total {costs.total_calls}" + ("" if costs.calls_complete else " (some attempts did not report calls)"),
              ""]
    return lines


def _why_md(result: ClaimsComparison) -> list[str]:
    """Each discordant instance's reason class and the tests that differ (decisive first)."""
    counts = ", ".join(f"{CLASS_LABELS.get(c, c)} {n}" for c, n in result.reason_counts.items())
    control = f"`{result.control_dir}`" if result.control_dir else "none given"
    defects = f"`{result.defects_path}`" if result.defects_path else "none read"
    lines = ["## Why they differ", "", f"By class: {counts}." if counts else "", "",
             f"Reference control: {control}; dataset defects: {defects}.", ""]
    for d in result.discordant:
        if d.reason_class == "not_in_run":
            continue
        lines += [f"### {_cell(d.instance_id)}: {CLASS_LABELS.get(d.reason_class, d.reason_class)}", "",
                  f"Claimed {'resolved' if d.claimed_resolved else 'unresolved'}, reproduced "
                  f"{'resolved' if d.reproduced_resolved else 'unresolved'}: {_cell(d.explanation)}.", ""]
        if d.tests:
            lines += ["| test | list | vendor | ours | control | decisive | class | why |",
                      "|---|---|---|---|---|---|---|---|"]
            for t in sorted(d.tests, key=lambda t: (not t.decisive, t.test)):
                lines.append(f"| {_cell(t.test)} | {t.category} | {t.vendor} | {t.ours} | {t.control or '–'} | "
                             f"{'yes' if t.decisive else ''} | {CLASS_LABELS.get(t.reason_class, t.reason_class)} | "
                             f"{_cell(t.why)} |")
            lines.append("")
    if result.agreeing_with_test_differences:
        lines += [f"Verdicts agree but some tests differ ({len(result.agreeing_with_test_differences)}): "
                  f"{', '.join(result.agreeing_with_test_differences)}", ""]
    return lines


def _claims_md(result: ClaimsComparison) -> list[str]:
    t = result.agreement
    lines = [f"# Claims vs reproduction: {result.run_id}", "",
             f"- Run: `{result.run_dir}`",
             f"- Claims: `{result.claims_path}`" + (f" — {result.submission}" if result.submission else "")
             + f" (format: {result.claims_format})",
             f"- Denominator: {result.denominator_note}", "",
             "| | resolved | rate (95% Wilson CI) |", "|---|---:|---|",
             f"| claimed | {result.claimed.successes}/{result.denominator} | {_rate_line(result.claimed)} |",
             f"| reproduced | {result.reproduced.successes}/{result.denominator} | {_rate_line(result.reproduced)} |", "",
             "## Agreement", "",
             "| | reproduced resolved | reproduced unresolved |", "|---|---:|---:|",
             f"| claimed resolved | {t.both_resolved} | {t.first_only} |",
             f"| claimed unresolved | {t.second_only} | {t.neither} |", "",
             f"McNemar exact p = {_p(result.mcnemar_p)} (discordant: {t.first_only} claimed only, "
             f"{t.second_only} reproduced only)", ""]
    lines += [f"## Discordant instances ({len(result.discordant)})", ""]
    if result.discordant:
        header = "| instance | claimed | reproduced | claim detail |"
        rule = "|---|---|---|---|"
        if result.validity_path:
            header += " reference control |"
            rule += "---|"
        lines += [header + " harness reason | class |", rule + "---|---|"]
        for d in result.discordant:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(d.claim_detail.items()) if k != "resolved") or d.claim_list
            row = (f"| {_cell(d.instance_id)} | {'resolved' if d.claimed_resolved else d.claim_list} | "
                   f"{'resolved' if d.reproduced_resolved else 'unresolved'} | {_cell(detail)} |")
            if result.validity_path:
                row += f" {d.reference_control} |"
            reason = d.evidence.reason(limit=5) if (d.evidence and not d.reproduced_resolved) else d.reason
            lines.append(row + f" {_cell(reason)} | {CLASS_LABELS.get(d.reason_class, d.reason_class)} |")
        lines.append("")
        lines += _why_md(result)
    else:
        lines += ["None.", ""]
    if result.validity_path:
        lines += [f"## Reference control failed ({len(result.reference_control_failed)}) — still in the denominator", ""]
        lines += [f"- {_cell(f.instance_id)}: claimed {'resolved' if f.claimed_resolved else 'unresolved'}, "
                  f"reproduced {'resolved' if f.reproduced_resolved else 'unresolved'}"
                  for f in result.reference_control_failed] or ["None."]
        if result.reference_control_unknown:
            lines.append(f"- No validity entry for: {', '.join(result.reference_control_unknown)}")
        lines.append("")
    if result.not_in_run:
        lines += [f"Not in the run (counted unresolved): {', '.join(result.not_in_run)}", ""]
    if result.claimed_no_prediction:
        lines += [f"Vendor had no prediction (counted claimed-unresolved): {', '.join(result.claimed_no_prediction)}", ""]
    if result.claimed_outside_run:
        lines += [f"Named by the claim file but not in the run (not counted): {', '.join(result.claimed_outside_run)}", ""]
    if result.extra_in_run:
        lines += [f"In the run but outside the claim universe (not counted): {', '.join(result.extra_in_run)}", ""]
    lines += _attempts_md(result.run_id, result.attempts)
    return lines


def _runs_md(result: RunsComparison) -> list[str]:
    t = result.agreement
    d = result.difference
    lines = [f"# Run comparison: {result.run_a.run_id} (A) vs {result.run_b.run_id} (B)", "",
             f"- A: `{result.run_a.run_dir}`" + (f" — {result.run_a.model_name_or_path}" if result.run_a.model_name_or_path else ""),
             f"- B: `{result.run_b.run_dir}`" + (f" — {result.run_b.model_name_or_path}" if result.run_b.model_name_or_path else ""),
             f"- Denominator: {result.denominator_note}"
             + (f"; only in A (not counted): {len(result.only_in_a)}" if result.only_in_a else "")
             + (f"; only in B (not counted): {len(result.only_in_b)}" if result.only_in_b else ""), "",
             "| run | resolved | rate (95% Wilson CI) |", "|---|---:|---|",
             f"| A | {result.rate_a.successes}/{result.shared} | {_rate_line(result.rate_a)} |",
             f"| B | {result.rate_b.successes}/{result.shared} | {_rate_line(result.rate_b)} |", "",
             f"- Difference B − A: {_pp(d.difference)} (paired bootstrap 95% CI {_pp(d.ci_low)} to {_pp(d.ci_high)}; "
             f"{d.iterations} resamples of instances, seed {d.seed})",
             f"- McNemar exact p = {_p(result.mcnemar_p)}",
             f"- Flips: {result.fixed_in_b} fixed in B, {result.broken_in_b} broken in B; "
             f"flip rate {_pct(result.flip_rate)} of {result.shared}; net flip rate {_pp(result.net_flip_rate)}", "",
             "## Agreement", "",
             "| | B resolved | B unresolved |", "|---|---:|---:|",
             f"| A resolved | {t.both_resolved} | {t.first_only} |",
             f"| A unresolved | {t.second_only} | {t.neither} |", "",
             f"## Flipped instances ({len(result.flips)})", ""]
    if result.flips:
        lines += ["| instance | direction | A | B |", "|---|---|---|---|"]
        for flip in result.flips:
            lines.append(f"| {_cell(flip.instance_id)} | {flip.direction} | {_cell(flip.reason_a)} | {_cell(flip.reason_b)} |")
        lines.append("")
    else:
        lines += ["None.", ""]
    lines += ["## Per repository", "",
              "| repository | instances | A | B | B − A | fixed | broken |", "|---|---:|---:|---:|---:|---:|---:|"]
    for s in result.repo_slices:
        lines.append(f"| {_cell(s.repo)} | {s.instances} | {s.resolved_a} ({_pct(s.rate_a)}) | "
                     f"{s.resolved_b} ({_pct(s.rate_b)}) | {_pp(s.difference)} | {s.fixed_in_b} | {s.broken_in_b} |")
    for avg in (result.macro_average, result.micro_average):
        lines.append(f"| **{avg.kind} average** — {_cell(avg.denominator_note)} | | {_pct(avg.rate_a)} | "
                     f"{_pct(avg.rate_b)} | {_pp(avg.difference)} | | |")
    lines.append("")
    lines += _agent_compare_md(result)
    lines += _attempts_md(f"A ({result.run_a.run_id})", result.attempts_a)
    lines += _attempts_md(f"B ({result.run_b.run_id})", result.attempts_b)
    return lines


def render_markdown(result: Result) -> str:
    """Markdown report of a comparison (same numbers as :func:`to_dict`)."""
    if isinstance(result, ClaimsComparison):
        lines = _claims_md(result)
    elif isinstance(result, RunsComparison):
        lines = _runs_md(result)
    else:
        raise TypeError(f"render_markdown: unsupported result {type(result).__name__}")
    if result.warnings:
        lines += ["## Warnings", ""] + [f"- {_cell(w)}" for w in result.warnings] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"



def render_run_markdown(report: RunReport) -> str:
    """Markdown report of a run (same figures as its HTML page)."""
    r = report.resolved
    lines = [f"# Run {report.run_id}", "",
             f"- Model: `{report.model_name_or_path or 'unknown'}`",
             f"- Resolved: {_rate_line(r)}",
             f"- Denominator: {r.denominator_note}",
             "- Verdicts: " + ", ".join(f"{status} {count}" for status, count in report.status_counts.items()),
             "- Instances: " + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in report.counts.items()), "",
             "## Per repository", "",
             "| repository | instances | resolved | rate (95% Wilson CI) | errors | flagged |",
             "|---|---:|---:|---|---:|---:|"]
    lines += [f"| {_cell(row.repo)} | {row.rate.denominator} | {row.rate.successes} | {_rate_line(row.rate)} | "
              f"{row.errors} | {row.flagged} |" for row in report.repos]
    lines += ["", "## Errors by origin", ""]
    lines += [f"- {o.origin}: {o.instances} ("
              + ", ".join(f"{reason} × {n}" for reason, n in o.reasons.items()) + ")" for o in report.origins] or ["None."]
    def flag_lines(rows: list) -> list[str]:
        return [f"- {f.flag}: {len(f.instance_ids)} ({', '.join(f.instance_ids[:20])}"
                + (" …" if len(f.instance_ids) > 20 else "") + f"): {f.meaning}" for f in rows]

    notes = [f for f in report.integrity if f.note]
    lines += ["", "## Integrity flags", ""] + (flag_lines([f for f in report.integrity if not f.note]) or ["None."])
    if notes:   # a section only when there is one: notes hold nothing against the run
        lines += ["", "## Integrity notes (nothing held against the run)", ""] + flag_lines(notes)
    if report.phases:
        lines += ["", "## Evaluation time by phase (seconds)", "",
                  "| phase | instances | min | q1 | median | q3 | max | sum |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {_cell(p.phase)} | {p.instances} | {p.minimum:.3f} | {p.q1:.3f} | {p.median:.3f} | {p.q3:.3f} | "
                  f"{p.maximum:.3f} | {p.total:.3f} |" for p in report.phases]
    if report.agent is not None:
        lines += [""] + _agent_md(report.agent)[:-1]
    lines += ["", "## Instances", "", "| instance | repository | status | F2P | P2P | missing | integrity | reason |",
              "|---|---|---|---:|---:|---:|---|---|"]
    lines += [f"| {_cell(i.instance_id)} | {_cell(i.repo)} | {i.status} | {i.f2p_passed}/{i.f2p_total} | "
              f"{i.p2p_passed}/{i.p2p_total} | {i.missing} | {_cell(', '.join((*i.flags, *(f'({n})' for n in i.notes))))} | {_cell(i.reason)} |"
              for i in report.instances]
    lines.append("")
    if report.agent is None:  # the Agent section holds these figures, over fixed denominators
        lines += _attempts_md(report.run_id, report.attempts)
    if report.warnings:
        lines += ["## Warnings", ""] + [f"- {_cell(w)}" for w in report.warnings] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"
