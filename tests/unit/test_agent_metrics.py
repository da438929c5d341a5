"""The agent run's metric vector (harness/results/agent_metrics.py) against values computed
by hand, and its way from a predictions file through report.json into summary.json's
``agent`` block, the run's pages and ``harness compare``.

The hand values come from the definitions, never from the code under test: pass@k =
1 - C(n-c, k)/C(n, k) and pass^k = C(c, k)/C(n, k) per instance, averaged over instances;
percentiles interpolate linearly at position p(n-1) of the sorted values; the Wilson
interval from its closed form."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.grading.status import ErrorReason, InstanceStatus
from harness.results import stats
from harness.results.agent_metrics import LOST, agent_figures, agent_metrics, arrange
from harness.results.report import InstanceResult, summarise
from harness.results.run_data import load_run
from harness.results.run_report import load_run_report

S, F = True, False
Z95 = 1.959963984540054


def wilson(successes: int, n: int) -> tuple[float, float]:
    p = successes / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / (1 + Z95 ** 2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def attempt(success: bool, cost: float | None = 1.0, steps: int | None = 10, seconds: float | None = 5.0,
            exit_status: str | None = "Submitted", infra: bool = False, calls: int | None = 3) -> stats.Attempt:
    return stats.Attempt(success=success, infra_error=infra, calls=calls, cost=cost, steps=steps,
                         agent_seconds=seconds, exit_status=exit_status)


def numbered(plan: dict[str, list[stats.Attempt | None]]) -> dict[str, dict[int, stats.Attempt]]:
    """{id: [attempt 1, attempt 2, ...]} with None for an attempt that left no record."""
    return {i: {n: a for n, a in enumerate(tried, start=1) if a is not None} for i, tried in plan.items()}


# --------------------------------------------------------------------------- the figures by hand

# Four instances, three attempts each; b-1's third attempt is an infra error (the grading
# broke: a failed attempt, its cost still spent). Steps hold ties (four 5s) and one
# attempt that recorded none; exit statuses hold a tie in counts and one unrecorded.
COMPLETE = {
    "o__a-1": [attempt(S, 1.0, 5, 10.0), attempt(S, 1.0, 5, 20.0), attempt(S, 1.0, 5, 30.0)],
    "o__a-2": [attempt(S, 0.5, 5, 40.0), attempt(F, 0.25, 7, 50.0, "LimitsExceeded"),
               attempt(F, 0.25, 9, 60.0, "LimitsExceeded")],
    "p__b-1": [attempt(F, 2.0, 2, 70.0, "LimitsExceeded"), attempt(S, 2.0, 9, 80.0),
               attempt(S, 2.0, None, 90.0, None, infra=True)],
    "p__b-2": [attempt(F, 1.0, 30, 100.0, "Timeout"), attempt(F, 1.0, 40, 110.0, "Timeout"),
               attempt(F, 1.0, 12, None, "Timeout")],
}
REPOS = {"o__a-1": "o/a", "o__a-2": "o/a", "p__b-1": "p/b", "p__b-2": "p/b"}


def test_complete_run_every_figure_by_hand():
    metrics = agent_metrics(numbered(COMPLETE), COMPLETE, REPOS, has_attempts=True)
    f = metrics.figures
    assert (f.instances, f.attempts_per_instance, f.attempts, f.attempts_recorded, f.attempts_lost) == (4, 3, 12, 12, 0)
    assert f.infra_error_attempts == 1
    # first attempts: a-1 and a-2 resolved
    assert (f.resolved.successes, f.resolved.denominator) == (2, 4)
    assert (f.resolved.ci_low, f.resolved.ci_high) == pytest.approx(wilson(2, 4))
    # successes per instance c = 3, 1, 1 (the infra-error "success" does not count), 0
    rows = {row.k: row for row in f.pass_k}
    assert [row.k for row in f.pass_k] == [1, 2, 3] and all(row.instances == 4 for row in f.pass_k)
    assert rows[1].pass_at_k == pytest.approx((1 + 1 / 3 + 1 / 3 + 0) / 4)          # 5/12
    assert rows[2].pass_at_k == pytest.approx((1 + 2 / 3 + 2 / 3 + 0) / 4)          # 7/12
    assert rows[3].pass_at_k == pytest.approx(3 / 4)
    assert rows[1].pass_hat_k == pytest.approx(5 / 12)
    assert rows[2].pass_hat_k == pytest.approx(1 / 4) and rows[3].pass_hat_k == pytest.approx(1 / 4)
    # cost: every attempt's (failed and infra ones too) over the 3 instances some attempt resolved
    assert f.costs.total_cost == pytest.approx(3 + 1 + 6 + 3) and f.costs.cost_complete
    assert f.costs.solved_instances == 3
    assert f.costs.cost_per_solved_instance == pytest.approx(13 / 3)
    # steps: 11 recorded, sorted 2 5 5 5 5 7 9 9 12 30 40; p50 at position 5, p95 at 9.5
    assert (f.steps.count, f.steps.missing) == (11, 1)
    assert f.steps.p50 == 7 and f.steps.p95 == pytest.approx(35.0) and f.steps.maximum == 40
    # seconds 10..110 (11 values): p50 60, p95 at position 9.5 -> 105
    assert (f.agent_seconds.p50, f.agent_seconds.p95, f.agent_seconds.maximum) == pytest.approx((60.0, 105.0, 110.0))
    # counts, most frequent first, a tie (3 and 3) broken by name
    assert f.exit_statuses == (("Submitted", 5), ("LimitsExceeded", 3), ("Timeout", 3))
    assert f.exit_status_unrecorded == 1


def test_repository_slices_by_hand():
    metrics = agent_metrics(numbered(COMPLETE), COMPLETE, REPOS, has_attempts=True)
    slices = {row.repo: row.figures for row in metrics.repos}
    assert list(slices) == ["o/a", "p/b"]
    a, b = slices["o/a"], slices["p/b"]
    assert (a.resolved.successes, a.resolved.denominator, b.resolved.successes) == (2, 2, 0)
    assert a.pass_k[0].pass_at_k == pytest.approx((1 + 1 / 3) / 2) and a.pass_k[2].pass_hat_k == pytest.approx(1 / 2)
    assert b.pass_k[0].pass_at_k == pytest.approx((1 / 3 + 0) / 2) and b.pass_k[2].pass_at_k == pytest.approx(1 / 2)
    assert a.costs.cost_per_solved_instance == pytest.approx(4 / 2)
    assert b.costs.cost_per_solved_instance == pytest.approx(9 / 1)
    assert b.steps.count == 5 and b.steps.missing == 1  # 2 9 30 40 12 -> sorted 2 9 12 30 40
    assert b.steps.p50 == 12 and b.steps.p95 == pytest.approx(30 + 0.8 * 10)


def test_k_equal_one_pass_at_one_is_the_first_attempt_rate():
    plan = {"o__a-1": [attempt(S)], "o__a-2": [attempt(F)], "o__a-3": [attempt(F)]}
    f = agent_metrics(numbered(plan), plan, {i: "o/a" for i in plan}, has_attempts=False).figures
    assert f.attempts_per_instance == 1 and len(f.pass_k) == 1
    assert f.pass_k[0].pass_at_k == pytest.approx(1 / 3) == f.pass_k[0].pass_hat_k == f.resolved.rate
    assert f.costs.cost_per_solved_instance == pytest.approx(3.0)  # 3 attempts at 1.0 over 1 resolved


def test_ties_everywhere_give_that_value():
    plan = {f"o__a-{n}": [attempt(F, steps=7, seconds=2.5)] for n in range(5)}
    f = agent_metrics(numbered(plan), plan, {i: "o/a" for i in plan}, has_attempts=False).figures
    assert (f.steps.p50, f.steps.p95, f.steps.maximum) == (7, 7, 7)
    assert (f.agent_seconds.p50, f.agent_seconds.p95) == (2.5, 2.5)
    assert f.costs.cost_per_solved_instance is None and f.costs.solved_instances == 0  # nothing resolved


def test_a_missing_cost_leaves_cost_per_resolved_unknown_and_says_so():
    plan = {"o__a-1": [attempt(S, cost=2.0), attempt(S, cost=None)], "o__a-2": [attempt(F, cost=1.0), attempt(F)]}
    f = agent_metrics(numbered(plan), plan, {i: "o/a" for i in plan}, has_attempts=True).figures
    assert f.costs.total_cost == pytest.approx(4.0) and f.costs.attempts_with_cost == 3
    assert not f.costs.cost_complete
    assert f.costs.cost_per_solved_instance is None  # a partial total would understate it


def test_lost_attempts_and_instances_without_prediction_stay_in_every_denominator():
    plan = {"o__a-1": [attempt(S), None, attempt(S)],   # a gap: attempt 2 left no record
            "o__a-2": [attempt(S)]}                    # fewer attempts than the run's K = 3
    universe = [*plan, "o__a-3"]                        # no prediction at all
    f = agent_metrics(numbered(plan), universe, {i: "o/a" for i in universe}, has_attempts=True).figures
    assert (f.instances, f.attempts, f.attempts_recorded, f.attempts_lost, f.infra_error_attempts) == (3, 9, 3, 6, 6)
    assert f.resolved.denominator == 3 and f.resolved.successes == 2
    # c = 2, 1, 0 of n = 3 each
    assert f.pass_k[0].pass_at_k == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert f.pass_k[2].pass_at_k == pytest.approx(2 / 3) and f.pass_k[2].pass_hat_k == 0
    assert all(row.instances == 3 and row.excluded_instances == 0 for row in f.pass_k)
    assert f.costs.cost_per_solved_instance is None  # six attempts' cost is unknown
    assert f.steps.count == 3 and f.steps.missing == 0  # lost attempts are counted as lost, not as missing
    assert arrange(numbered(plan), universe)["o__a-3"] == (LOST, LOST, LOST)


def test_a_run_without_agent_fields_or_attempts_has_no_vector():
    plain = {"o__a-1": {1: stats.Attempt(success=True, cost=1.0, calls=2)}}
    assert agent_metrics(plain, ["o__a-1"], {"o__a-1": "o/a"}, has_attempts=False) is None
    assert agent_metrics(plain, ["o__a-1"], {"o__a-1": "o/a"}, has_attempts=True) is not None
    assert agent_metrics({}, [], {}, has_attempts=True) is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same number"):
        agent_figures({"a": (attempt(S),), "b": (attempt(S), attempt(S))}, "x")
    with pytest.raises(ValueError, match="outside the run"):
        agent_metrics({"x": {1: attempt(S)}}, ["y"], {"y": "o/a"}, has_attempts=True)
    with pytest.raises(ValueError, match="steps"):
        agent_figures({"a": (stats.Attempt(success=True, steps=-1),)}, "x")
    with pytest.raises(ValueError, match="agent_seconds"):
        agent_figures({"a": (stats.Attempt(success=True, agent_seconds=float("nan")),)}, "x")
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        arrange({"a": {0: attempt(S)}}, ["a"])


def test_distribution_interpolates_linearly():
    spread = stats.distribution([None, 1, 2, 3, 4, None])
    assert (spread.count, spread.missing, spread.p50, spread.maximum) == (4, 2, 2.5, 4.0)
    assert spread.p95 == pytest.approx(float(Fraction(385, 100)))  # position 2.85: 3 + 0.85
    assert stats.distribution([None]).p50 is None
    with pytest.raises(ValueError):
        stats.distribution([True])


# --------------------------------------------------------------------------- predictions


def _predictions(tmp_path: Path, *records: dict, raw: str = "") -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + raw)
    return path


def _pred(iid: str, **fields) -> dict:
    return {"instance_id": iid, "model_name_or_path": "mini-swe-agent-1.15.0__m", "model_patch": "diff\n", **fields}


AGENT = {"cost": 0.25, "calls": 7, "steps": 6, "agent_seconds": 41.5, "exit_status": "Submitted"}


def test_agent_fields_are_read_typed_and_a_null_is_unknown(tmp_path):
    from harness.inputs.predictions import load_predictions
    loaded = load_predictions(_predictions(tmp_path, _pred("o__a-1", attempt=2, **AGENT),
                                           _pred("o__a-2", cost=1, steps=None, exit_status=None, other="kept")))
    assert loaded.errors == []
    first, second = loaded.predictions
    assert first.usage() == AGENT and first.extra == {}
    assert second.usage() == {"cost": 1.0, "calls": None, "steps": None, "agent_seconds": None, "exit_status": None}
    assert isinstance(second.cost, float) and second.extra == {"other": "kept"}


@pytest.mark.parametrize("field, value", [
    ("cost", "0.5"), ("cost", -0.01), ("cost", True), ("cost", 10 ** 400), ("calls", 2.0), ("calls", -1),
    ("steps", "12"), ("steps", 3.5), ("steps", False), ("agent_seconds", -1), ("agent_seconds", [1]),
    ("exit_status", 3), ("exit_status", ""), ("exit_status", "x" * 201)])
def test_a_mistyped_agent_field_refuses_that_record_naming_it_and_the_field(tmp_path, field, value):
    from harness.inputs.predictions import load_predictions
    loaded = load_predictions(_predictions(tmp_path, _pred("o__a-1", **{**AGENT, field: value}), _pred("o__a-2", **AGENT)))
    assert [p.instance_id for p in loaded.predictions] == ["o__a-2"]  # one bad record never stops the others
    [error] = loaded.errors
    assert (error.record, error.field) == ("o__a-1", field)
    assert field in str(error) and "preds.jsonl" in str(error)


def test_a_nan_cost_is_refused(tmp_path):
    from harness.inputs.predictions import load_predictions
    loaded = load_predictions(_predictions(tmp_path, raw='{"instance_id": "o__a-1", "model_name_or_path": "m", '
                                                        '"model_patch": "", "cost": NaN}\n'))
    assert [(e.record, e.field) for e in loaded.errors] == [("o__a-1", "cost")]


# --------------------------------------------------------------------------- into report.json


RECORD = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "patch": "",
          "test_patch": "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x\n+y\n",
          "FAIL_TO_PASS": ["t.py::f"], "PASS_TO_PASS": [], "version": "1.0"}


def test_the_evaluator_and_a_failed_task_carry_the_agent_fields_into_report_json():
    from harness.evaluation.evaluator import Evaluator
    from harness.evaluation.setup import EvalConfig
    from harness.evaluation.tasks import Task, failure_result
    from harness.inputs.instances import parse_instance
    from harness.inputs.predictions import Prediction
    from harness.inputs.specs import EnvSpec
    instance = parse_instance(RECORD)
    prediction = Prediction(instance.instance_id, "m", "diff\n", 2, **AGENT)
    evaluated = Evaluator(instance, prediction, EnvSpec(repo="o/r", version="1.0"), lambda path: None,
                          EvalConfig()).result
    failed = failure_result(Task(instance, prediction), ErrorReason.ENGINE_LOST, RuntimeError("gone"), "k")
    for result in (evaluated, failed):
        report = result.to_report()
        assert {name: report[name] for name in AGENT} == AGENT
        assert InstanceResult.from_report(json.loads(json.dumps(report))).steps == 6
        assert InstanceResult.from_report(report).exit_status == "Submitted"


# --------------------------------------------------------------------------- a run directory


def write_agent_run(root: Path, run_id: str, plan: dict[str, list[dict | None]], *, without: tuple[str, ...] = (),
                    directory: bool = True) -> Path:
    """A run directory as a run writes it: each attempt's InstanceResult.to_report() in
    <id>/attempt-<n>/, summary.json by summarise_run_directory (None: no report)."""
    from harness.paths import RunPaths
    from harness.results.report import summarise_run_directory
    run = RunPaths(root / run_id)
    for instance_id, tried in plan.items():
        for number, fields in enumerate(tried, start=1):
            if fields is None:
                continue
            fields = dict(fields)
            resolved = fields.pop("resolved")
            reason = fields.pop("error_reason", None)
            status = InstanceStatus.INVALID if reason else InstanceStatus.FULL if resolved else InstanceStatus.NO
            result = InstanceResult(instance_id=instance_id, repo=REPOS.get(instance_id, "o/a"),
                                    model_name_or_path="agent-model", status=status, resolved=resolved,
                                    attempt=number if directory else None, error_reason=reason, patch_exists=True,
                                    **fields)
            files = run.instance(instance_id, number if directory else None)
            files.root.mkdir(parents=True, exist_ok=True)
            files.report.write_text(json.dumps(result.to_report()))
    keys = [(i, n if directory else None) for i, tried in plan.items() for n, f in enumerate(tried, 1) if f]
    summary = summarise_run_directory(run_id, "agent-model", run.root, [*plan, *without], keys, {}, without)
    run.summary.write_text(json.dumps(summary))
    return run.root


def spent(resolved: bool, cost: float | None, steps: int | None, seconds: float | None, status: str | None,
          **more) -> dict:
    return {"resolved": resolved, "cost": cost, "calls": 2, "steps": steps, "agent_seconds": seconds,
            "exit_status": status, **more}


PLAN = {
    "o__a-1": [spent(S, 1.0, 5, 10.0, "Submitted"), spent(S, 1.0, 5, 20.0, "Submitted"),
               spent(S, 1.0, 5, 30.0, "Submitted")],
    "o__a-2": [spent(S, 0.5, 5, 40.0, "Submitted"), spent(F, 0.25, 7, 50.0, "LimitsExceeded"),
               spent(F, 0.25, 9, 60.0, "LimitsExceeded")],
    "p__b-1": [spent(F, 2.0, 2, 70.0, "LimitsExceeded"), spent(S, 2.0, 9, 80.0, "Submitted"),
               spent(F, 2.0, None, 90.0, None, error_reason=ErrorReason.CONTAINER_DIED)],
    "p__b-2": [spent(F, 1.0, 30, 100.0, "Timeout"), spent(F, 1.0, 40, 110.0, "Timeout"),
               spent(F, 1.0, 12, None, "Timeout")],
}


def test_summary_json_agent_block_by_hand_and_the_pages_show_the_same_figures(tmp_path):
    run_dir = write_agent_run(tmp_path, "agent", PLAN)
    summary = json.loads((run_dir / "summary.json").read_text())
    agent = summary["agent"]
    assert agent["instances"] == 4 and agent["attempts_per_instance"] == 3 and agent["attempts_lost"] == 0
    assert agent["infra_error_attempts"] == 1  # container_died: the harness's, a failed attempt
    assert agent["resolved"]["resolved"] == 2 and agent["resolved"]["denominator"] == 4
    assert agent["resolved"]["rate"] == summary["resolve_rate"]["rate"] == 0.5  # the summary's own verdicts
    assert [agent["resolved"]["ci_low"], agent["resolved"]["ci_high"]] == pytest.approx(wilson(2, 4))
    assert agent["pass_at_k"] == pytest.approx({"1": 5 / 12, "2": 7 / 12, "3": 3 / 4})
    assert agent["pass_hat_k"] == pytest.approx({"1": 5 / 12, "2": 1 / 4, "3": 1 / 4})
    assert agent["cost"]["per_resolved_instance"] == pytest.approx(13 / 3) and agent["cost"]["total"] == 13
    assert agent["calls"] == {"total": 24, "complete": True}
    assert agent["steps"] == pytest.approx({"count": 11, "missing": 1, "p50": 7, "p95": 35, "max": 40})
    assert agent["agent_seconds"]["p95"] == pytest.approx(105)
    assert agent["exit_statuses"] == {"Submitted": 5, "LimitsExceeded": 3, "Timeout": 3}
    assert agent["exit_status_unrecorded"] == 1
    assert list(agent["repos"]) == ["o/a", "p/b"]
    assert agent["repos"]["p/b"]["cost"]["per_resolved_instance"] == pytest.approx(9)
    # the run's page is built from the reports (run_data), the summary from the same reports: one vector
    assert load_run_report(run_dir).agent.to_json() == agent
    # every key a SWE-bench reader knows is still there, with its meaning
    for key in ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "resolved_ids", "unresolved_ids",
                "error_ids", "empty_patch_ids", "completed_ids", "schema_version"):
        assert key in summary
    assert summary["resolved_ids"] == ["o__a-1", "o__a-2"]


def test_a_run_of_plain_predictions_has_no_agent_block(tmp_path):
    plan = {"o__a-1": [{"resolved": True, "cost": 1.0, "calls": 2}], "o__a-2": [{"resolved": False}]}
    run_dir = write_agent_run(tmp_path, "plain", plan, directory=False)
    assert "agent" not in json.loads((run_dir / "summary.json").read_text())
    assert load_run_report(run_dir).agent is None


def test_flat_agent_run_and_an_instance_without_prediction(tmp_path):
    plan = {"o__a-1": [spent(S, 0.5, 4, 3.0, "Submitted")], "o__a-2": [spent(F, 1.5, 8, 9.0, "LimitsExceeded")]}
    run_dir = write_agent_run(tmp_path, "flat", plan, without=("o__a-3",), directory=False)
    agent = json.loads((run_dir / "summary.json").read_text())["agent"]
    assert (agent["instances"], agent["attempts_per_instance"], agent["attempts_lost"]) == (3, 1, 1)
    assert agent["pass_at_k"] == pytest.approx({"1": 1 / 3})
    assert agent["cost"]["total"] == 2.0 and agent["cost"]["per_resolved_instance"] is None  # o__a-3's is unknown
    assert agent["steps"]["p50"] == 6 and agent["steps"]["p95"] == pytest.approx(4 + 0.95 * 4)
    assert load_run_report(run_dir).agent.to_json() == agent


def test_an_unreadable_attempt_is_counted_lost_and_named_never_dropped():
    results = [InstanceResult(instance_id="o__a-1", repo="o/a", model_name_or_path="m", status=InstanceStatus.FULL,
                              resolved=True, attempt=1, cost=-3.0, steps=2),
               InstanceResult(instance_id="o__a-1", repo="o/a", model_name_or_path="m", status=InstanceStatus.NO,
                              attempt=2, cost=1.0, steps=4)]
    agent = summarise("r", "m", ["o__a-1"], results, {})["agent"]
    assert agent["attempts_lost"] == 1 and agent["attempts_recorded"] == 1
    assert agent["unreadable_attempts"] == ["o__a-1 attempt 1: cost must be a finite number >= 0, got -3.0"]
    assert agent["resolved"]["resolved"] == 0  # the lost first attempt is a failed infra error


@pytest.mark.parametrize("field, value", [("steps", "12"), ("agent_seconds", -2), ("exit_status", 5),
                                          ("cost", "free")])
def test_a_mistyped_field_in_report_json_is_refused_naming_file_and_field(tmp_path, field, value):
    run_dir = write_agent_run(tmp_path, "agent", PLAN)
    report = run_dir / "o__a-2" / "attempt-2" / "report.json"
    data = json.loads(report.read_text())
    data[field] = value
    report.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        load_run(run_dir)
    assert (caught.value.field, caught.value.record) == (field, "o__a-2") and "attempt-2" in str(caught.value)
    shown = load_run_report(run_dir)  # the pages: the instance is shown unreadable, its attempts lost
    assert shown.agent.figures.attempts_lost == 3
    assert [row.status for row in shown.instances if row.instance_id == "o__a-2"] == ["UNREADABLE"]


# --------------------------------------------------------------------------- the views

HOSTILE_STATUS = '</script><script>window.__pwned=1</script><b>x</b>'


def _figure(html: str, name: str) -> str:
    import re
    found = re.findall(rf'data-figure="{name}"[^>]*>([^<]*)<', html)
    assert len(found) == 1, (name, found)
    return found[0]


def test_the_run_page_and_report_md_render_the_agent_section(tmp_path):
    from harness.views.site import write_run_pages
    plan = {**PLAN, "p__b-2": [spent(F, 1.0, 30, 100.0, HOSTILE_STATUS), *PLAN["p__b-2"][1:]]}
    run_dir = write_agent_run(tmp_path, "agent", plan)
    pages = write_run_pages(run_dir)
    html = pages.page.read_text()
    assert '<section id="agent">' in html
    assert (_figure(html, "pass_at_1"), _figure(html, "pass_at_3"), _figure(html, "pass_hat_3")) == \
        ("41.7%", "75.0%", "25.0%")
    assert _figure(html, "cost_per_resolved") == "4.333" and _figure(html, "steps_p95") == "35"
    assert _figure(html, "resolved_rate") == "50.0%" and _figure(html, "seconds_p95") == "105.0 s"
    assert HOSTILE_STATUS not in html and "&lt;/script&gt;&lt;script&gt;window.__pwned=1" in html
    markdown = pages.markdown.read_text()
    assert "## Agent" in markdown and "| 3 | 75.0% | 25.0% |" in markdown
    assert "Cost per resolved instance: 4.333" in markdown and "p50 / p95 / max: 7 / 35 / 40" in markdown


def test_each_attempt_page_shows_every_attempt_and_follows_a_sibling_change(tmp_path):
    import re
    from harness.views.site import write_run_pages
    plan = {**PLAN, "p__b-2": [spent(F, 1.0, 30, 100.0, HOSTILE_STATUS), *PLAN["p__b-2"][1:]]}
    run_dir = write_agent_run(tmp_path, "agent", plan)
    write_run_pages(run_dir)

    def attempts_shown(page: Path) -> list[tuple[str, ...]]:
        table = page.read_text().split('id="agent-attempt-table"')[1].split("</table>")[0]
        return [tuple(re.findall(r'data-field="[a-z_]+">([^<]*)<', row)) for row in table.split("<tr data-attempt")[1:]]

    page = run_dir / "o__a-2" / "attempt-1" / "report.html"
    assert attempts_shown(page) == [("0.5", "2", "5", "40.0 s", "Submitted"),
                                    ("0.25", "2", "7", "50.0 s", "LimitsExceeded"),
                                    ("0.25", "2", "9", "60.0 s", "LimitsExceeded")]
    hostile = (run_dir / "p__b-2" / "attempt-3" / "report.html").read_text()
    assert HOSTILE_STATUS not in hostile and "&lt;b&gt;x&lt;/b&gt;" in hostile
    # a sibling's report changes (a re-grade): the page that shows it is rendered again
    sibling = run_dir / "o__a-2" / "attempt-3" / "report.json"
    sibling.write_text(sibling.read_text().replace('"cost": 0.25', '"cost": 0.75'))
    write_run_pages(run_dir)
    assert attempts_shown(page)[2][0] == "0.75"


def test_a_page_without_agent_fields_has_no_agent_sections(tmp_path):
    from harness.views.site import write_run_pages
    run_dir = write_agent_run(tmp_path, "plain", {"o__a-1": [{"resolved": True}]}, directory=False)
    pages = write_run_pages(run_dir)
    assert 'id="agent"' not in pages.page.read_text() and "## Agent" not in pages.markdown.read_text()
    assert 'id="agent-attempts"' not in (run_dir / "o__a-1" / "report.html").read_text()


# --------------------------------------------------------------------------- harness compare


def test_compare_two_agent_runs_paired_on_first_attempts_with_costs_side_by_side(tmp_path):
    from harness import compare
    from harness.views.html import render_comparison
    from harness.views.markdown import render_markdown
    run_a = write_agent_run(tmp_path, "a", PLAN)
    # B: first attempts resolve o__a-1, p__b-1 and p__b-2 (A: o__a-1, o__a-2); two attempts each
    run_b = write_agent_run(tmp_path, "b", {
        "o__a-1": [spent(S, 3.0, 3, 1.0, "Submitted"), spent(S, 3.0, 3, 1.0, "Submitted")],
        "o__a-2": [spent(F, 3.0, 50, 2.0, "LimitsExceeded"), spent(S, 3.0, 3, 1.0, "Submitted")],
        "p__b-1": [spent(S, 3.0, 3, 1.0, "Submitted"), spent(F, 3.0, 3, 1.0, "Submitted")],
        "p__b-2": [spent(S, 3.0, 3, 1.0, "Submitted"), spent(S, 3.0, 3, 1.0, "Submitted")]})
    result = compare.compare_runs(run_a, run_b)
    # discordant first attempts: o__a-2 only in A (b = 1), p__b-1 and p__b-2 only in B (c = 2)
    assert result.mcnemar_p == pytest.approx(2 * (math.comb(3, 0) + math.comb(3, 1)) / 2 ** 3)
    assert result.difference.difference == pytest.approx((3 - 2) / 4)
    assert result.agent_a.to_json() == json.loads((run_a / "summary.json").read_text())["agent"]
    b = result.agent_b.figures
    assert b.attempts_per_instance == 2 and b.costs.cost_per_solved_instance == pytest.approx(24 / 4)
    assert b.pass_k[1].pass_hat_k == pytest.approx(2 / 4) and b.steps.maximum == 50
    markdown = render_markdown(result)
    assert "## Agent runs side by side" in markdown and "| pass^3 | 25.0% | — |" in markdown
    assert "| cost per resolved instance | 4.333 | 6 |" in markdown
    html = render_comparison(result, tmp_path)
    assert 'id="agent-compare-table"' in html and 'data-row="pass_hat_3"' in html
    plain = write_agent_run(tmp_path, "plain", {"o__a-1": [{"resolved": True}]}, directory=False)
    assert compare.compare_runs(plain, plain).agent_a is None
    assert "Agent runs side by side" not in render_markdown(compare.compare_runs(plain, plain))
