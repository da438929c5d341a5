"""harness.compare on small run directories written by hand (the run-directory contract)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness import compare
from harness.results.stats import mcnemar_exact, paired_bootstrap_diff, wilson_interval

SHARED_SWEBENCH = Path(__file__).resolve().parents[3] / "shared" / "swebench"


# --------------------------------------------------------------------------- builders


def report(instance_id: str, resolved: bool, **fields) -> dict:
    """A report.json in the harness's shape; keyword arguments override defaults."""
    data = {
        "instance_id": instance_id,
        "model_name_or_path": "test-model",
        "status": "FULL" if resolved else "NO",
        "resolved": resolved,
        "error_reason": None,
        "error_origin": None,
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": True,
        "f2p_rate": 1.0 if resolved else 0.0,
        "p2p_rate": 1.0,
        "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": []},
                         "PASS_TO_PASS": {"success": [], "failure": []}},
        "missing": [],
        "integrity": {"flags": []},
        "attempt": None,
        "cost": None,
        "calls": None,
    }
    data.update(fields)
    return data


def write_run(root: Path, run_id: str, reports: dict[str, dict | None], *,
              attempts: dict[str, list[dict | None]] | None = None, summary_overrides: dict | None = None) -> Path:
    """Write runs/<run_id>: a summary derived from the reports, and the reports.

    ``None`` as a report means "listed in the summary as an error, but no report.json".
    ``attempts`` writes ``<id>/attempt-<n>/report.json`` (``None`` leaves the dir empty).
    """
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    resolved = sorted(i for i, r in reports.items() if r is not None and r["resolved"])
    errors = sorted(i for i, r in reports.items() if r is None)
    unresolved = sorted(i for i, r in reports.items() if r is not None and not r["resolved"])
    for instance_id, instance_attempts in (attempts or {}).items():
        if instance_id not in reports:
            (resolved if instance_attempts[0] and instance_attempts[0]["resolved"] else unresolved).append(instance_id)
    summary = {
        "run_id": run_id, "total_instances": len(set(reports) | set(attempts or {})),
        "submitted_instances": len(reports), "completed_instances": len(reports) - len(errors),
        "resolved_instances": len(resolved), "unresolved_instances": len(unresolved),
        "empty_patch_instances": 0, "error_instances": len(errors),
        "resolved_ids": resolved, "unresolved_ids": unresolved, "empty_patch_ids": [], "error_ids": errors,
        "invalid_ids": [], "error_reasons": {i: "container_died" for i in errors},
        "schema_version": 2, "model_name_or_path": "test-model",
    }
    summary.update(summary_overrides or {})
    (run_dir / "summary.json").write_text(json.dumps(summary))
    for instance_id, data in reports.items():
        (run_dir / instance_id).mkdir()
        if data is not None:
            (run_dir / instance_id / "report.json").write_text(json.dumps(data))
    for instance_id, instance_attempts in (attempts or {}).items():
        (run_dir / instance_id).mkdir(exist_ok=True)
        for number, data in enumerate(instance_attempts, start=1):
            attempt_dir = run_dir / instance_id / f"attempt-{number}"
            attempt_dir.mkdir()
            if data is not None:
                (attempt_dir / "report.json").write_text(json.dumps(data))
    return run_dir


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


P1, P2, P3 = "pytest-dev__pytest-1", "pytest-dev__pytest-2", "pytest-dev__pytest-3"
R1, R2 = "psf__requests-1", "psf__requests-2"
F1 = "pallets__flask-1"
EXTRA = "pallets__flask-99"


@pytest.fixture
def claims_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "vendor-x.results.json", {
        "submission": "vendor x",
        "resolved": [P1, P2, P3],
        "unresolved": [R1, R2],
        "no_prediction": [F1],
        "per_instance": {P2: {"resolved": True, "applied": True}, R1: {"resolved": False}},
    })


@pytest.fixture
def claims_run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "runs", "ours", {
        P1: report(P1, True),
        P2: report(P2, False, status="NO", tests_status={
            "FAIL_TO_PASS": {"success": [], "failure": ["tests/test_a.py::test_fix[a|b]"]},
            "PASS_TO_PASS": {"success": ["t_ok"], "failure": ["tests/test_b.py::test_old"]}},
            integrity={"flags": ["tests_modified"]}),
        P3: None,  # listed as an error, no report.json
        R1: report(R1, True),
        R2: report(R2, False, error_reason="patch_apply_failed", error_origin="model",
                   patch_successfully_applied=False),
        EXTRA: report(EXTRA, True),  # outside the claim universe
        # F1 is absent from the run entirely
    })


# --------------------------------------------------------------------------- claims


def test_claims_denominator_is_the_whole_claim_universe(claims_run, claims_file):
    result = compare.compare_with_claims(claims_run, claims_file)
    assert result.denominator == 6
    assert (result.claimed.successes, result.claimed.denominator) == (3, 6)
    # P1 and R1 reproduce; EXTRA is resolved too but outside the universe, so not counted.
    assert (result.reproduced.successes, result.reproduced.denominator) == (2, 6)
    assert (result.claimed.ci_low, result.claimed.ci_high) == wilson_interval(3, 6)
    assert (result.reproduced.ci_low, result.reproduced.ci_high) == wilson_interval(2, 6)
    assert "6 instances" in result.denominator_note and "no_prediction" in result.denominator_note
    assert result.not_in_run == (F1,)
    assert result.extra_in_run == (EXTRA,)
    assert result.claimed_no_prediction == (F1,)


def test_claims_agreement_table_and_mcnemar(claims_run, claims_file):
    result = compare.compare_with_claims(claims_run, claims_file)
    table = result.agreement
    assert (table.both_resolved, table.first_only, table.second_only, table.neither) == (1, 2, 1, 2)
    assert table.total == 6
    assert result.mcnemar_p == mcnemar_exact(2, 1)


def test_claims_discordant_instances_carry_the_harness_reason(claims_run, claims_file):
    result = compare.compare_with_claims(claims_run, claims_file)
    by_id = {d.instance_id: d for d in result.discordant}
    assert sorted(by_id) == sorted([P2, P3, R1])

    p2 = by_id[P2]
    assert (p2.claimed_resolved, p2.reproduced_resolved) == (True, False)
    assert "tests/test_a.py::test_fix[a|b]" in p2.reason  # failed F2P test
    assert "tests/test_b.py::test_old" in p2.reason  # P2P regression
    assert "tests_modified" in p2.reason  # integrity flag
    assert p2.claim_detail == {"resolved": True, "applied": True}
    assert p2.repo == "pytest-dev/pytest"

    p3 = by_id[P3]
    assert "no_report" in p3.reason
    assert "container_died" in p3.reason  # summary's error_reasons as fallback
    assert p3.reproduced_resolved is False

    r1 = by_id[R1]
    assert (r1.claimed_resolved, r1.reproduced_resolved) == (False, True)
    assert r1.claim_list == "unresolved"


def test_claims_no_prediction_stays_in_denominator_even_when_we_resolve_it(tmp_path, claims_file):
    run_dir = write_run(tmp_path / "runs", "r", {F1: report(F1, True)})
    result = compare.compare_with_claims(run_dir, claims_file)
    assert result.denominator == 6
    assert result.reproduced.successes == 1
    [d] = [d for d in result.discordant if d.instance_id == F1]
    assert (d.claim_list, d.claimed_resolved, d.reproduced_resolved) == ("no_prediction", False, True)
    # Every other universe instance is missing from this run and counts unresolved.
    assert set(result.not_in_run) == {P1, P2, P3, R1, R2}


def test_claims_adding_an_unresolved_instance_does_not_raise_the_rate(tmp_path, claims_run, claims_file):
    base = compare.compare_with_claims(claims_run, claims_file)
    data = json.loads(claims_file.read_text())
    data["unresolved"].append("psf__requests-3")
    bigger = compare.compare_with_claims(claims_run, write_json(tmp_path / "bigger.json", data))
    assert bigger.denominator == base.denominator + 1
    assert bigger.reproduced.rate < base.reproduced.rate
    assert bigger.claimed.rate < base.claimed.rate


def test_claims_reference_failures_are_listed_but_stay_in_denominator(tmp_path, claims_run, claims_file):
    validity = write_json(tmp_path / "validity.json", {"instances": {
        P2: {"reference_full": False, "note": "x"}, R2: {"reference_full": False},
        P1: {"reference_full": True}, R1: {"reference_full": True}}})
    without = compare.compare_with_claims(claims_run, claims_file)
    result = compare.compare_with_claims(claims_run, claims_file, validity)
    assert [f.instance_id for f in result.reference_control_failed] == sorted([P2, R2])
    [failed_p2] = [f for f in result.reference_control_failed if f.instance_id == P2]
    assert (failed_p2.claimed_resolved, failed_p2.reproduced_resolved) == (True, False)
    assert result.denominator == without.denominator == 6
    assert result.reproduced == without.reproduced and result.claimed == without.claimed
    assert result.reference_control_unknown == (F1, P3)
    controls = {d.instance_id: d.reference_control for d in result.discordant}
    assert controls == {P2: "failed", P3: "unknown", R1: "passed"}


def test_summary_and_report_disagreeing_counts_unresolved(tmp_path, claims_file):
    run_dir = write_run(tmp_path / "runs", "r", {P1: report(P1, True)},
                        summary_overrides={"resolved_ids": [], "unresolved_ids": [P1]})
    result = compare.compare_with_claims(run_dir, claims_file)
    assert result.reproduced.successes == 0
    [d] = [d for d in result.discordant if d.instance_id == P1]
    assert "summary_report_mismatch" in d.reason
    assert any(P1 in warning for warning in result.warnings)


def test_mirror_of_real_vendor_claims_agrees_exactly(tmp_path):
    claims_path = SHARED_SWEBENCH / "vendor-autocoderover-v20240408.results.json"
    if not claims_path.is_file():
        pytest.skip("../shared/swebench is not available")
    claims = json.loads(claims_path.read_text())
    reports = {i: report(i, True) for i in claims["resolved"]}
    reports.update({i: report(i, False) for i in claims["unresolved"]})
    reports.update({i: report(i, False, patch_is_None=True, patch_exists=False) for i in claims["no_prediction"]})
    run_dir = write_run(tmp_path / "runs", "mirror", reports)
    result = compare.compare_with_claims(run_dir, claims_path)
    assert result.denominator == 26
    assert result.claimed.successes == result.reproduced.successes == 7
    assert result.discordant == ()
    assert result.mcnemar_p == 1.0
    assert result.agreement.neither == 19


# --------------------------------------------------------------------------- run vs run


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    run_a = write_run(runs, "run-a", {
        P1: report(P1, True), P2: report(P2, True), P3: report(P3, False),
        R1: report(R1, False, repo="psf/requests"), R2: None,
        F1: report(F1, True), "pallets__flask-7": report("pallets__flask-7", True),
    })
    run_b = write_run(runs, "run-b", {
        P1: report(P1, True),
        P2: report(P2, False, error_reason="timeout", error_origin="model"),
        P3: report(P3, True), R1: report(R1, True, repo="psf/requests"), R2: report(R2, True),
        F1: report(F1, True), "pallets__flask-8": report("pallets__flask-8", False),
    })
    return run_a, run_b


def test_compare_runs_rates_and_tests_on_shared_instances(two_runs):
    result = compare.compare_runs(*two_runs, seed=0, iterations=500)
    assert result.shared == 6
    assert result.only_in_a == ("pallets__flask-7",)
    assert result.only_in_b == ("pallets__flask-8",)
    assert (result.rate_a.successes, result.rate_a.denominator) == (3, 6)  # P1 P2 F1
    assert (result.rate_b.successes, result.rate_b.denominator) == (5, 6)  # P1 P3 R1 R2 F1
    assert (result.rate_b.ci_low, result.rate_b.ci_high) == wilson_interval(5, 6)
    table = result.agreement
    assert (table.both_resolved, table.first_only, table.second_only, table.neither) == (2, 1, 3, 0)
    assert result.mcnemar_p == mcnemar_exact(1, 3)
    assert (result.fixed_in_b, result.broken_in_b) == (3, 1)
    assert result.flip_rate == pytest.approx(4 / 6)
    assert result.net_flip_rate == pytest.approx(2 / 6)


def test_compare_runs_bootstrap_matches_stats_on_same_pairs(two_runs):
    result = compare.compare_runs(*two_runs, seed=5, iterations=400)
    ids = sorted([P1, P2, P3, R1, R2, F1])
    a = [i in {P1, P2, F1} for i in ids]
    b = [i in {P1, P3, R1, R2, F1} for i in ids]
    diff, low, high = paired_bootstrap_diff(a, b, iterations=400, seed=5)
    d = result.difference
    assert (d.difference, d.ci_low, d.ci_high) == (diff, low, high)
    assert d.difference == pytest.approx(2 / 6)
    assert d.definition == "rate_b - rate_a" and d.seed == 5


def test_compare_runs_lists_flips_both_ways_with_reasons(two_runs):
    result = compare.compare_runs(*two_runs, iterations=100)
    flips = {f.instance_id: f for f in result.flips}
    assert {i: f.direction for i, f in flips.items()} == {
        P2: "broken_in_b", P3: "fixed_in_b", R1: "fixed_in_b", R2: "fixed_in_b"}
    assert "timeout" in flips[P2].reason_b
    assert "no_report" in flips[R2].reason_a


def test_compare_runs_repo_slices_with_macro_and_micro(two_runs):
    result = compare.compare_runs(*two_runs, iterations=100)
    slices = {s.repo: s for s in result.repo_slices}
    # R1 has an explicit repo field, R2 has no report at all: both land in one slice.
    assert sorted(slices) == ["pallets/flask", "psf/requests", "pytest-dev/pytest"]
    assert (slices["pytest-dev/pytest"].instances, slices["pytest-dev/pytest"].resolved_a,
            slices["pytest-dev/pytest"].resolved_b) == (3, 2, 2)
    assert (slices["pytest-dev/pytest"].fixed_in_b, slices["pytest-dev/pytest"].broken_in_b) == (1, 1)
    assert (slices["psf/requests"].instances, slices["psf/requests"].resolved_a,
            slices["psf/requests"].resolved_b) == (2, 0, 2)
    assert (slices["pallets/flask"].rate_a, slices["pallets/flask"].rate_b) == (1.0, 1.0)
    assert result.macro_average.kind == "macro" and result.micro_average.kind == "micro"
    assert result.macro_average.rate_a == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert result.macro_average.rate_b == pytest.approx((2 / 3 + 1 + 1) / 3)
    assert result.micro_average.rate_a == pytest.approx(3 / 6)
    assert result.micro_average.rate_b == pytest.approx(5 / 6)
    assert "repositories weigh equally" in result.macro_average.denominator_note
    assert "instances weigh equally" in result.micro_average.denominator_note


def test_compare_runs_does_not_depend_on_summary_id_order(tmp_path, two_runs):
    run_a, run_b = two_runs
    summary = json.loads((run_a / "summary.json").read_text())
    for key in ("resolved_ids", "unresolved_ids", "error_ids"):
        summary[key] = list(reversed(summary[key]))
    (run_a / "summary.json").write_text(json.dumps(summary))
    first = compare.to_dict(compare.compare_runs(run_a, run_b, iterations=300))
    second = compare.to_dict(compare.compare_runs(run_a, run_b, iterations=300))
    assert first == second
    assert [f["instance_id"] for f in first["flips"]] == sorted(f["instance_id"] for f in first["flips"])


def test_compare_runs_without_shared_instances_is_an_error(tmp_path):
    run_a = write_run(tmp_path / "runs", "a", {P1: report(P1, True)})
    run_b = write_run(tmp_path / "runs", "b", {P2: report(P2, True)})
    with pytest.raises(ValueError, match="share no instance"):
        compare.compare_runs(run_a, run_b)


# --------------------------------------------------------------------------- attempts layout


def attempt(instance_id: str, number: int, resolved: bool, calls: int, cost: float | None, **fields) -> dict:
    return report(instance_id, resolved, attempt=number, calls=calls, cost=cost, **fields)


def test_attempts_layout_main_verdict_is_first_attempt_and_section_is_present(tmp_path, claims_file):
    run_dir = write_run(tmp_path / "runs", "multi", {}, attempts={
        P1: [attempt(P1, 1, True, 2, 1.0), attempt(P1, 2, True, 2, 1.0), attempt(P1, 3, False, 2, 1.0)],
        # First attempt fails, second succeeds but pushes cumulative calls to 7.
        P2: [attempt(P2, 1, False, 3, 0.5), attempt(P2, 2, True, 4, 0.5)],
        # Attempt 2 left no report: an infra error with unknown spend.
        R1: [attempt(R1, 1, False, 1, 0.25), None, attempt(R1, 3, True, 1, 0.25)],
        R2: [attempt(R2, 1, False, 1, 0.1, error_reason="container_died", error_origin="harness")],
    })
    result = compare.compare_with_claims(run_dir, claims_file, max_calls=6)
    assert result.reproduced.successes == 1  # only P1 succeeded on its first attempt
    summary = result.attempts
    assert summary is not None
    assert summary.instances == 6  # the claim universe: P3 and F1 have no attempts
    assert summary.attempts == 9
    assert summary.first_attempt_rate == pytest.approx(1 / 6)
    assert summary.infra_error_attempts == 2  # R1's missing attempt, R2's container_died
    rows = {row.k: row for row in summary.pass_k}
    assert rows[1].instances == 4
    # pass@1 per instance: P1 2/3, P2 1/2, R1 1/3, R2 0.
    assert rows[1].pass_at_k == pytest.approx((2 / 3 + 1 / 2 + 1 / 3 + 0) / 4)
    assert rows[3].instances == 2  # P1 and R1
    budget = summary.budget
    assert budget.max_calls == 6
    assert budget.solved_ids == (P1,)  # P2's success is over budget; R1's spend is unverifiable
    assert budget.over_budget_successes == 1
    assert budget.assigned_instances == 6
    costs = summary.costs
    assert not costs.cost_complete  # R1's attempt 2 has no cost
    assert costs.cost_per_solved_instance is None
    assert costs.total_cost == pytest.approx(3 * 1.0 + 2 * 0.5 + 2 * 0.25 + 0.1)


def test_attempt_number_mismatch_names_file_and_field(tmp_path, claims_file):
    run_dir = write_run(tmp_path / "runs", "multi", {}, attempts={P1: [attempt(P1, 2, True, 1, None)]})
    with pytest.raises(ValueError) as excinfo:
        compare.compare_with_claims(run_dir, claims_file)
    message = str(excinfo.value)
    assert "attempt-1" in message and "'attempt'" in message


def test_flat_run_has_no_attempt_section(claims_run, claims_file):
    assert compare.compare_with_claims(claims_run, claims_file).attempts is None


# --------------------------------------------------------------------------- bad input


def test_missing_run_dir_is_named(tmp_path, claims_file):
    with pytest.raises(ValueError, match="run directory not found") as excinfo:
        compare.compare_with_claims(tmp_path / "nope", claims_file)
    assert "nope" in str(excinfo.value)


def test_malformed_summary_json_is_named(tmp_path, claims_run, claims_file):
    (claims_run / "summary.json").write_text("{not json")
    with pytest.raises(ValueError, match="malformed JSON") as excinfo:
        compare.compare_with_claims(claims_run, claims_file)
    assert "summary.json" in str(excinfo.value)


def test_summary_missing_field_is_named(tmp_path, claims_run, claims_file):
    summary = json.loads((claims_run / "summary.json").read_text())
    del summary["resolved_ids"]
    (claims_run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError) as excinfo:
        compare.compare_with_claims(claims_run, claims_file)
    assert "summary.json" in str(excinfo.value) and "resolved_ids" in str(excinfo.value)


def test_report_missing_resolved_is_named(tmp_path, claims_run, claims_file):
    path = claims_run / P1 / "report.json"
    data = json.loads(path.read_text())
    del data["resolved"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as excinfo:
        compare.compare_with_claims(claims_run, claims_file)
    assert str(path) in str(excinfo.value) and "'resolved'" in str(excinfo.value)


def test_claims_missing_list_is_named(tmp_path, claims_run):
    bad = write_json(tmp_path / "bad.results.json", {"resolved": [P1], "unresolved": []})
    with pytest.raises(ValueError) as excinfo:
        compare.compare_with_claims(claims_run, bad)
    assert "bad.results.json" in str(excinfo.value) and "no_prediction" in str(excinfo.value)


def test_claims_id_in_two_lists_is_rejected(tmp_path, claims_run):
    bad = write_json(tmp_path / "dup.json", {"resolved": [P1], "unresolved": [P1], "no_prediction": []})
    with pytest.raises(ValueError, match="unresolved"):
        compare.compare_with_claims(claims_run, bad)


def test_validity_entry_without_reference_full_is_named(tmp_path, claims_run, claims_file):
    validity = write_json(tmp_path / "validity.json", {"instances": {P1: {"reference": True}}})
    with pytest.raises(ValueError) as excinfo:
        compare.compare_with_claims(claims_run, claims_file, validity)
    assert "validity.json" in str(excinfo.value) and f"instances.{P1}.reference_full" in str(excinfo.value)


def test_unsafe_instance_id_is_rejected(tmp_path, claims_file):
    run_dir = write_run(tmp_path / "runs", "r", {}, summary_overrides={"unresolved_ids": ["../../etc"]})
    with pytest.raises(ValueError, match="safe directory name"):
        compare.compare_with_claims(run_dir, claims_file)


# --------------------------------------------------------------------------- output


def test_write_outputs_is_atomic_and_round_trips(tmp_path, claims_run, claims_file):
    result = compare.compare_with_claims(claims_run, claims_file)
    out = tmp_path / "out"
    json_path, md_path, html_path = compare.write_outputs(result, out, "cmp")
    compare.write_outputs(result, out, "cmp")  # overwriting is fine
    assert sorted(p.name for p in out.iterdir()) == ["cmp.html", "cmp.json", "cmp.md"]  # no temp files left behind
    assert html_path.read_text().startswith("<!DOCTYPE html>")
    data = json.loads(json_path.read_text())
    assert data == compare.to_dict(result)
    assert data["kind"] == "claims_comparison"
    assert data["reproduced"]["successes"] == 2 and data["reproduced"]["denominator"] == 6
    assert md_path.read_text() == compare.render_markdown(result)


def test_write_outputs_rejects_a_path_as_stem(tmp_path, claims_run, claims_file):
    result = compare.compare_with_claims(claims_run, claims_file)
    with pytest.raises(ValueError):
        compare.write_outputs(result, tmp_path, "../escape")


def test_markdown_states_denominators_and_escapes_pipes(claims_run, claims_file):
    text = compare.render_markdown(compare.compare_with_claims(claims_run, claims_file))
    assert "2/6 = 33.3%" in text and "3/6 = 50.0%" in text
    assert "all 6 instances in the claim file's universe" in text
    assert "test_fix[a\\|b]" in text  # a raw '|' would break the table row
    assert "| claimed resolved | 1 | 2 |" in text
    assert "| claimed unresolved | 1 | 2 |" in text


def test_markdown_labels_macro_and_micro(two_runs):
    text = compare.render_markdown(compare.compare_runs(*two_runs, iterations=100))
    assert "**macro average**" in text and "**micro average**" in text
    assert "3/6 = 50.0%" in text and "5/6 = 83.3%" in text


# --------------------------------------------------------------------------- CLI


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="harness")
    compare.add_compare_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_claims_writes_into_run_dir_and_prints(claims_run, claims_file, capsys):
    args = _parse(["compare", str(claims_run), "--claimed", str(claims_file)])
    assert args.func is compare.run_compare
    assert compare.run_compare(args) == 0
    out = capsys.readouterr().out
    written = json.loads((claims_run / "compare-claims-vendor-x.json").read_text())
    assert written["reproduced"]["successes"] == 2
    assert (claims_run / "compare-claims-vendor-x.md").is_file()
    assert "2/6 = 33.3%" in out and "3/6 = 50.0%" in out


def test_cli_runs_with_output_dir_and_seed(tmp_path, two_runs, capsys):
    out_dir = tmp_path / "reports"
    args = _parse(["compare", str(two_runs[0]), str(two_runs[1]), "--seed", "3", "--output-dir", str(out_dir)])
    assert compare.run_compare(args) == 0
    written = json.loads((out_dir / "compare-run-a-vs-run-b.json").read_text())
    assert written["difference"]["seed"] == 3
    assert written["fixed_in_b"] == 3 and written["broken_in_b"] == 1
    assert "5/6 = 83.3%" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [[], ["--validity", "v.json"]])
def test_cli_usage_errors_return_2(claims_run, capsys, extra):
    args = _parse(["compare", str(claims_run), *extra])
    assert compare.run_compare(args) == 2
    assert "error" in capsys.readouterr().err


def test_cli_bad_input_returns_2_and_names_file(tmp_path, claims_run, capsys):
    bad = write_json(tmp_path / "claims.json", {"resolved": []})
    args = _parse(["compare", str(claims_run), "--claimed", str(bad)])
    assert compare.run_compare(args) == 2
    err = capsys.readouterr().err
    assert "claims.json" in err and "unresolved" in err
    assert not list(claims_run.glob("compare-*"))
