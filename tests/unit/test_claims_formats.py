"""Vendor claim files in the formats vendors publish (harness.results.claims) and their
comparison with a run: SWE-bench's run report, the experiments repo's results.json, a
per-instance map, and this project's own format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.claims import detect_format, load_claims
from harness.results.claims_vs_run import compare_with_claims
from tests.unit.test_compare import F1, P1, P2, P3, R1, R2, report, write_json, write_run

SHARED_SWEBENCH = Path(__file__).resolve().parents[3] / "shared" / "swebench"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "runs", "ours", {
        P1: report(P1, True), P2: report(P2, False), P3: report(P3, True),
        R1: report(R1, False), R2: report(R2, True), F1: report(F1, False)})


def swebench_report(**overrides) -> dict:
    """The keys swebench.harness.reporting.make_run_report writes (v4)."""
    data = {"total_instances": 6, "submitted_instances": 5, "completed_instances": 4, "resolved_instances": 2,
            "unresolved_instances": 1, "empty_patch_instances": 1, "error_instances": 1,
            "completed_ids": [P1, P2, P3, R1], "incomplete_ids": [F1], "empty_patch_ids": [R2],
            "submitted_ids": [P1, P2, P3, R1, R2], "resolved_ids": [P1, P3], "unresolved_ids": [P2],
            "error_ids": [R1], "schema_version": 2}
    data.update(overrides)
    return data


def test_swebench_run_report_maps_its_lists(tmp_path):
    claims = load_claims(write_json(tmp_path / "model__x.run-1.json", swebench_report()))
    assert claims.format == "swebench_run_report"
    assert claims.resolved == {P1, P3}
    assert claims.unresolved == {P2, R1}  # error_ids count as claimed unresolved
    assert claims.no_prediction == {F1, R2}  # incomplete and empty patch: no prediction
    assert claims.universe_explicit and len(claims.universe) == 6
    assert claims.per_instance[R1] == {"listed_in": ["error_ids", "submitted_ids", "completed_ids"]}
    assert claims.submission == "model__x.run-1"


def test_swebench_run_report_against_a_run(run, tmp_path):
    path = write_json(tmp_path / "m.r.json", swebench_report())
    result = compare_with_claims(run, path)
    assert result.claims_format == "swebench_run_report"
    assert result.denominator == 6
    assert (result.claimed.successes, result.reproduced.successes) == (2, 3)
    by_id = {d.instance_id: d for d in result.discordant}
    assert sorted(by_id) == [R2]  # claimed empty patch, we resolved it
    assert by_id[R2].claim_list == "no_prediction"
    assert by_id[R2].claim_detail == {"listed_in": ["empty_patch_ids", "submitted_ids"]}


def test_swebench_report_total_mismatch_is_a_warning(run, tmp_path):
    path = write_json(tmp_path / "m.r.json", swebench_report(total_instances=300))
    result = compare_with_claims(run, path)
    assert any("total_instances=300" in w for w in result.warnings)


def test_swebench_report_id_in_two_verdict_lists_is_refused(tmp_path):
    path = write_json(tmp_path / "m.r.json", swebench_report(error_ids=[P1]))
    with pytest.raises(ValueError) as excinfo:
        load_claims(path)
    assert "m.r.json" in str(excinfo.value) and "error_ids" in str(excinfo.value) and P1 in str(excinfo.value)


def test_experiments_results_universe_is_the_run(run, tmp_path):
    folder = tmp_path / "evaluation" / "lite" / "20240101_agent" / "results"
    folder.mkdir(parents=True)
    outside = "django__django-11099"
    path = write_json(folder / "results.json", {"resolved": [P1, P2, outside], "no_generation": [F1],
                                                "no_logs": [R1]})
    claims = load_claims(path)
    assert claims.format == "experiments_results" and not claims.universe_explicit
    assert claims.submission == "20240101_agent"
    result = compare_with_claims(run, path)
    # The denominator is the run's six instances, fixed before outcomes; the claim's
    # outside id is reported, not counted.
    assert result.denominator == 6
    assert result.claimed.successes == 2  # P1, P2
    assert result.reproduced.successes == 3  # P1, P3, R2
    assert result.claimed_outside_run == (outside,)
    assert result.not_in_run == ()
    assert "does not list every unresolved instance" in result.denominator_note
    lists = {d.instance_id: d.claim_list for d in result.discordant}
    assert lists == {P2: "resolved", P3: "unresolved", R2: "unresolved"}
    assert result.claimed_no_prediction == (F1,)


def test_legacy_experiments_results_with_every_list(tmp_path):
    path = write_json(tmp_path / "results.json", {
        "no_generation": [F1], "generated": [P1, P2, R1], "with_logs": [P1, P2, R1], "install_fail": [],
        "reset_failed": [], "no_apply": [R1], "applied": [P1, P2], "test_errored": [], "test_timeout": [P2],
        "resolved": [P1]})
    claims = load_claims(path)
    assert claims.format == "experiments_results"
    assert (claims.resolved, claims.unresolved, claims.no_prediction) == ({P1}, {P2, R1}, {F1})
    assert claims.per_instance[R1] == {"listed_in": ["generated", "with_logs", "no_apply"]}
    assert claims.per_instance[P2] == {"listed_in": ["generated", "with_logs", "applied", "test_timeout"]}


def test_experiments_resolved_and_no_generation_overlap_is_refused(tmp_path):
    path = write_json(tmp_path / "results.json", {"resolved": [P1], "no_generation": [P1], "no_logs": []})
    with pytest.raises(ValueError, match="no_generation"):
        load_claims(path)


def test_per_instance_map(run, tmp_path):
    path = write_json(tmp_path / "per_instance_details.json", {
        P1: {"resolved": True, "cost": 0.5, "api_calls": 12}, P2: {"resolved": False},
        R2: {"resolved": False, "patch_is_None": True}})
    claims = load_claims(path)
    assert claims.format == "per_instance_map"
    assert (claims.resolved, claims.unresolved, claims.no_prediction) == ({P1}, {P2}, {R2})
    result = compare_with_claims(run, path)
    assert result.denominator == 3
    [discordant] = result.discordant
    assert discordant.instance_id == R2 and discordant.claim_detail["patch_is_None"] is True


def test_per_instance_map_resolved_without_prediction_is_refused(tmp_path):
    path = write_json(tmp_path / "m.json", {P1: {"resolved": True, "no_prediction": True}})
    with pytest.raises(ValueError) as excinfo:
        load_claims(path)
    assert P1 in str(excinfo.value) and "resolved" in str(excinfo.value)


@pytest.mark.parametrize("data, expected", [
    ({"resolved": [], "unresolved": [], "no_prediction": [], "no_apply": []}, "harness"),
    ({"resolved_ids": [], "unresolved_ids": []}, "swebench_run_report"),
    ({"resolved": [], "no_logs": []}, "experiments_results"),
    ({P1: {"resolved": True}}, "per_instance_map"),
    ({"resolved": []}, "harness"),  # incomplete: the harness reader names what is missing
])
def test_detect_format(data, expected):
    assert detect_format(data) == expected


def test_unknown_shape_names_the_missing_lists(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        load_claims(write_json(tmp_path / "odd.json", {"something": 1}))
    assert "odd.json" in str(excinfo.value) and "resolved" in str(excinfo.value)


@pytest.mark.parametrize("name", ["vendor-autocoderover-v20240408.results.json",
                                  "vendor-autocoderover-v20240408-lite-full.results.json",
                                  "vendor-sweagent-gpt4-acr-rerun-cost21.results.json",
                                  "vendor-verified-20240628_autocoderover-v20240620.resolved-claims.json"])
def test_shared_vendor_files_load(name):
    path = SHARED_SWEBENCH / name
    if not path.is_file():
        pytest.skip("../shared/swebench is not available")
    claims = load_claims(path)
    data = json.loads(path.read_text())
    assert claims.format == "harness"
    assert claims.resolved == set(data["resolved"])
    assert len(claims.universe) == len(data["resolved"]) + len(data["unresolved"]) + len(data["no_prediction"])
