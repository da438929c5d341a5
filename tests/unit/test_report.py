"""Reports (harness.results.report): summarise, report.json round trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.grading.status import ErrorReason, InstanceStatus
from harness.results.report import SCHEMA_VERSION, CommandRecord, InstanceResult, summarise

FULL, PARTIAL, NO, INVALID = (InstanceStatus.FULL, InstanceStatus.PARTIAL, InstanceStatus.NO,
                              InstanceStatus.INVALID)


def result(iid: str, status: InstanceStatus, reason: ErrorReason | None = None, **kw) -> InstanceResult:
    return InstanceResult(instance_id=iid, repo="o/r", model_name_or_path="m", status=status,
                          resolved=status is FULL, error_reason=reason, **kw)


def buckets(summary: dict) -> list[str]:
    return [*summary["resolved_ids"], *summary["unresolved_ids"], *summary["error_ids"]]


# --------------------------------------------------------------------------- summarise

def test_every_id_is_in_exactly_one_bucket():
    results = [
        result("full-1", FULL), result("partial-1", PARTIAL), result("no-1", NO),
        result("apply-1", INVALID, ErrorReason.PATCH_APPLY_FAILED),
        result("timeout-1", INVALID, ErrorReason.TIMEOUT),
        result("died-1", INVALID, ErrorReason.CONTAINER_DIED),
        result("testpatch-1", INVALID, ErrorReason.TEST_PATCH_APPLY_FAILED),
    ]
    input_errors = {"broken-1": "record 'broken-1', field 'repo': bad"}
    all_ids = [r.instance_id for r in results] + list(input_errors)
    s = summarise("run", "m", all_ids, results, input_errors)
    assert sorted(buckets(s)) == sorted(all_ids)  # each exactly once
    assert s["resolved_ids"] == ["full-1"]
    assert s["unresolved_ids"] == ["apply-1", "no-1", "partial-1", "timeout-1"]
    assert s["error_ids"] == ["broken-1", "died-1", "testpatch-1"]
    assert (s["resolved_instances"], s["unresolved_instances"], s["error_instances"]) == (1, 4, 3)
    assert s["total_instances"] == 8


def test_model_origin_invalid_is_unresolved_and_listed_as_invalid():
    s = summarise("run", "m", ["a-1"], [result("a-1", INVALID, ErrorReason.PATCH_APPLY_FAILED)], {})
    assert s["unresolved_ids"] == ["a-1"]
    assert s["error_ids"] == [] and s["error_instances"] == 0
    assert s["invalid_ids"] == ["a-1"]
    assert s["errors_by_origin"]["model"] == ["a-1"]
    assert s["error_reasons"] == {"a-1": "patch_apply_failed"}


@pytest.mark.parametrize("reason", [r for r in ErrorReason if r.origin != "model"])
def test_harness_or_instance_origin_invalid_is_an_error(reason):
    s = summarise("run", "m", ["a-1"], [result("a-1", INVALID, reason)], {})
    assert s["error_ids"] == ["a-1"] and s["unresolved_ids"] == [] and s["resolved_ids"] == []
    assert s["invalid_ids"] == ["a-1"]
    assert s["errors_by_origin"][reason.origin] == ["a-1"]
    assert s["error_reasons"] == {"a-1": reason.value}


@pytest.mark.parametrize("reason", [r for r in ErrorReason if r.origin == "model"])
def test_every_model_origin_reason_is_unresolved(reason):
    s = summarise("run", "m", ["a-1"], [result("a-1", INVALID, reason)], {})
    assert s["unresolved_ids"] == ["a-1"] and s["error_ids"] == []


def test_malformed_inputs_count_as_errors_with_a_reason():
    errors = {"bad-1": "record 'bad-1', field 'repo': must look like OWNER/NAME",
              "#4": "record '#4': not an object"}
    s = summarise("run", "m", ["ok-1", *errors], [result("ok-1", NO)], errors)
    assert s["error_ids"] == ["#4", "bad-1"] and s["error_instances"] == 2
    assert s["error_reasons"] == {"bad-1": "malformed_input", "#4": "malformed_input"}
    assert s["errors_by_origin"]["instance"] == ["#4", "bad-1"]
    assert s["input_errors"] == errors
    assert s["submitted_instances"] == 1  # a malformed record was never submitted


def test_input_error_for_an_evaluated_id_does_not_double_count():
    """A duplicate record (or prediction) for an id that was also evaluated: one bucket only."""
    results = [result("dup-1", FULL), result("dup-2", NO)]
    errors = {"dup-1": "duplicate instance_id", "dup-2": "duplicate prediction"}
    s = summarise("run", "m", ["dup-1", "dup-2"], results, errors)
    assert sorted(buckets(s)) == ["dup-1", "dup-2"]
    assert s["error_ids"] == ["dup-1", "dup-2"]
    assert s["resolved_instances"] == 0


def test_resolve_rate_denominator_is_every_instance():
    results = [result("a-1", FULL), result("b-2", FULL), result("c-3", NO),
               result("d-4", INVALID, ErrorReason.ENVIRONMENT_BUILD_FAILED)]
    total = ["a-1", "b-2", "c-3", "d-4", "e-5", "f-6", "g-7", "h-8"]  # e..h: no prediction
    s = summarise("run", "m", total, results, {"h-8": "bad"})
    assert s["resolve_rate"] == {"resolved": 2, "denominator": 8, "rate": 0.25}
    assert s["total_instances"] == 8
    assert s["submitted_instances"] == 4
    assert s["completed_instances"] == 3 and s["completed_ids"] == ["a-1", "b-2", "c-3"]


def test_resolve_rate_of_an_empty_set_is_none():
    s = summarise("run", "m", [], [], {})
    assert s["resolve_rate"] == {"resolved": 0, "denominator": 0, "rate": None}
    assert buckets(s) == []


def test_total_ids_are_deduplicated():
    s = summarise("run", "m", ["a-1", "a-1", "b-2"], [result("a-1", FULL)], {})
    assert s["total_instances"] == 2
    assert s["resolve_rate"]["denominator"] == 2


def test_status_counts_empty_patches_and_header():
    results = [result("a-1", FULL), result("b-2", NO), result("c-3", NO),
               result("d-4", INVALID, ErrorReason.PATCH_REJECTED)]
    s = summarise("the-run", "model-x", ["a-1", "b-2", "c-3", "d-4"], results, {},
                  empty_patch_ids=["c-3", "c-3"])
    assert s["status_counts"] == {"FULL": 1, "NO": 2, "INVALID": 1}
    assert s["empty_patch_ids"] == ["c-3"] and s["empty_patch_instances"] == 1
    assert (s["run_id"], s["model_name_or_path"]) == ("the-run", "model-x")
    assert s["schema_version"] == SCHEMA_VERSION
    assert json.loads(json.dumps(s)) == s  # plain JSON


ids_st = st.lists(st.text(alphabet="abcxyz-1", min_size=1, max_size=5), unique=True, max_size=15)
status_reason_st = st.one_of(
    st.tuples(st.sampled_from([FULL, PARTIAL, NO]), st.none()),
    st.tuples(st.just(INVALID), st.sampled_from(list(ErrorReason))),
)


@settings(max_examples=200, deadline=None)
@given(ids_st, st.data())
def test_partition_property(ids, data):
    results, input_errors = [], {}
    for iid in ids:
        kind = data.draw(st.sampled_from(["result", "input_error", "both", "neither"]))
        if kind in ("result", "both"):
            status, reason = data.draw(status_reason_st)
            results.append(result(iid, status, reason))
        if kind in ("input_error", "both"):
            input_errors[iid] = "bad"
    s = summarise("r", "m", ids, results, input_errors)
    placed = buckets(s)
    assert len(placed) == len(set(placed))  # nobody twice
    assert set(placed) == {r.instance_id for r in results} | set(input_errors)
    assert set(s["resolved_ids"]) <= {r.instance_id for r in results if r.resolved}
    assert s["resolve_rate"]["denominator"] == len(ids)
    assert set(s["error_reasons"]) == {r.instance_id for r in results if r.error_reason} | set(input_errors)


# --------------------------------------------------------------------------- report.json

def full_result() -> InstanceResult:
    return InstanceResult(
        instance_id="o__r-7", repo="o/r", model_name_or_path="org/model", status=INVALID, resolved=False,
        attempt=2, error_reason=ErrorReason.TIMEOUT, error_detail="took too long",
        patch_is_None=False, patch_exists=True, patch_successfully_applied=True, apply_strategy="git-apply",
        f2p_success=["t::a"], f2p_failure=["t::b"], p2p_success=["t::c"], p2p_failure=["t::d"],
        missing=["t::b"], f2p_rate=0.5, p2p_rate=0.5, integrity_flags=["patch_touched_tests"],
        integrity_details={"patch_touched_tests": ["tests/test_x.py"]}, parser="pytest",
        parse_source="junit", parse_notes=["n1"], test_exit_code=1,
        timings={"total": 1.25, "tests": 0.5}, image={"tag": "img:1", "id": "sha256:abc"},
        checksums={"patch": "abc"},
        commands=[CommandRecord("tests", ["pytest", "-rA"], 1, 0.5, timed_out=False, truncated=True,
                                output_tail="...")],
        exception={"type": "X", "message": "y"}, attempts=[{"attempt": 1, "error": "ContainerDied"}],
        collected=[], cost=0.12, calls=3,
    )


def test_to_report_has_swe_bench_keys_and_ours():
    data = full_result().to_report()
    for key in ("instance_id", "patch_is_None", "patch_exists", "patch_successfully_applied",
                "resolved", "tests_status"):
        assert key in data
    assert data["tests_status"] == {"FAIL_TO_PASS": {"success": ["t::a"], "failure": ["t::b"]},
                                    "PASS_TO_PASS": {"success": ["t::c"], "failure": ["t::d"]}}
    assert data["status"] == "INVALID"
    assert data["error_reason"] == "timeout" and data["error_origin"] == "model"
    assert data["integrity"] == {"flags": ["patch_touched_tests"], "patch_touched_tests": ["tests/test_x.py"]}
    assert data["parser"] == {"name": "pytest", "source": "junit", "notes": ["n1"], "runner": "", "id_convention": ""}
    assert data["commands"][0]["argv"] == ["pytest", "-rA"]
    assert data["schema_version"] == SCHEMA_VERSION


def test_report_round_trip_through_json():
    original = full_result()
    data = json.loads(json.dumps(original.to_report()))
    again = InstanceResult.from_report(data)
    # 'collected' is not part of report.json; everything else must survive
    assert again == original
    assert again.to_report() == original.to_report()


@pytest.mark.parametrize("status, reason", [(FULL, None), (NO, None),
                                            (INVALID, ErrorReason.CONTAINER_DIED)])
def test_minimal_round_trip(status, reason):
    original = result("a-1", status, reason)
    again = InstanceResult.from_report(json.loads(json.dumps(original.to_report())))
    assert again == original
    assert again.error_origin == (reason.origin if reason else None)


def test_from_report_tolerates_missing_optional_keys():
    r = InstanceResult.from_report({"instance_id": "a-1", "status": "NO"})
    assert (r.instance_id, r.status, r.resolved, r.error_reason) == ("a-1", NO, False, None)
    assert r.commands == [] and r.integrity_flags == [] and r.parse_source == "none"


def test_from_report_rejects_unknown_status():
    with pytest.raises(ValueError):
        InstanceResult.from_report({"instance_id": "a-1", "status": "MAYBE"})
