"""The demo set end to end against the real engine: every designed outcome, the gold and
empty controls, and the no-argument run."""

from __future__ import annotations

import json

import pytest

from harness.inputs.demo import DEMO_DIR
from tests.conftest import leftover_containers

EXPECTED = json.loads((DEMO_DIR / "expected.json").read_text())
INSTANCES = str(DEMO_DIR / "instances.jsonl")


def _expected(name: str) -> dict[str, tuple[str, str | None]]:
    return {iid: (e["status"], e.get("error_reason")) for iid, e in EXPECTED[name].items()}


@pytest.mark.parametrize("predictions", ["gold", "empty", "predictions.jsonl", "predictions-extra.jsonl"])
def test_demo_outcomes_are_exactly_as_designed(harness_run, engine, predictions):
    source = predictions if predictions in ("gold", "empty") else str(DEMO_DIR / predictions)
    run = harness_run("--instances", INSTANCES, "--predictions", source, run_id=f"demo-{predictions}")
    assert run.exit_code == 0
    assert run.statuses() == _expected(predictions)
    summary = run.summary
    expected_resolved = sorted(i for i, e in EXPECTED[predictions].items() if e["resolved"])
    assert summary["resolved_ids"] == expected_resolved
    assert summary["total_instances"] == len(EXPECTED[predictions])
    assert summary["error_ids"] == []  # no harness or instance failure on the demo set
    assert leftover_containers(engine, f"demo-{predictions}") == []


def test_gold_control_resolves_everything_and_empty_nothing(harness_run):
    gold = harness_run("--instances", INSTANCES, "--predictions", "gold", run_id="gold").summary
    empty = harness_run("--instances", INSTANCES, "--predictions", "empty", run_id="empty").summary
    assert gold["resolved_instances"] == gold["total_instances"] == len(EXPECTED["gold"])
    assert empty["resolved_instances"] == 0
    assert empty["empty_patch_instances"] == empty["total_instances"]


def test_no_argument_run_grades_the_demo_set(tmp_path, monkeypatch, cache_dir, engine, capsys):
    from harness.cli import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache_dir))
    assert main(["run"]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "runs" / "demo" / "summary.json").read_text())
    assert summary["resolved_ids"] == sorted(i for i, e in EXPECTED["predictions.jsonl"].items() if e["resolved"])
    assert "resolved 1 of 4" in out.replace("\n", " ") or f"resolved {summary['resolved_instances']}" in out


def test_report_carries_swebench_keys_and_provenance(harness_run):
    run = harness_run("--instances", INSTANCES, "--predictions", "gold", "--instance-ids",
                      "harness-demo__calcly-1", run_id="keys")
    report = run.report("harness-demo__calcly-1")
    for key in ("patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status",
                "status", "f2p_rate", "p2p_rate", "missing", "error_reason", "timings", "image", "checksums"):
        assert key in report, key
    assert report["apply_strategy"] == "git_apply"
    assert report["image"]["id"].startswith("sha256:")
    assert report["parser"]["source"] == "junit"
    phases = [c["phase"] for c in report["commands"]]
    # the grading sequence, in order: one set-up step (history check, apply), then the test step
    assert phases.index("prepare") < phases.index("history_check") < phases.index("apply:git_apply") \
        < phases.index("tests")
    # each step timed its own parts in the sandbox (what the fixed cost is made of: benchmarks/overhead.py)
    steps = report["resources"]["step_seconds"]
    assert set(steps["prepare"]) == {"python_start", "reset", "history", "apply", "tree_diff"}
    assert {"since_process_start", "delete_restore_install", "seal", "tests", "results", "checks"} <= set(steps["launch"])
    assert all(isinstance(v, float) and v >= 0 for step in steps.values() for v in step.values())
    directory = run.root / "harness-demo__calcly-1"
    assert (directory / "patch.diff").read_text() == \
        json.loads((DEMO_DIR / "instances.jsonl").read_text().splitlines()[0])["patch"]
    assert (directory / "results.xml").exists() and (directory / "test_output.txt").exists()
    summary = run.summary
    for key in ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "resolved_ids",
                "unresolved_ids", "error_ids", "empty_patch_ids", "schema_version", "invalid_ids",
                "error_reasons"):
        assert key in summary, key


def test_validate_reports_every_demo_instance_valid(tmp_path, cache_dir, engine, capsys):
    from harness.cli import main
    code = main(["validate", "--instances", INSTANCES, "--repeat", "2", "--output-dir", str(tmp_path),
                 "--cache-dir", str(cache_dir), "--quiet", "--run-id", "v"])
    assert code == 0
    report = json.loads((tmp_path / "v" / "validity.json").read_text())
    assert report["instances_validated"] == len(EXPECTED["gold"])
    assert report["valid_instances"] == report["instances_validated"]
    for row in report["instances"].values():
        assert row["reference_statuses"] == ["FULL", "FULL"] and row["empty_status"] == "NO"
    assert (tmp_path / "v" / "validity.md").read_text().startswith("# Validity report")
