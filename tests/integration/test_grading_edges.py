"""Edges of the grading sequence against the real engine: timeouts, malformed records,
a broken test patch, and a model patch that edits the tests (the order matters)."""

from __future__ import annotations

import json
import time

from harness.inputs.demo import DEMO_DIR
from tests.conftest import leftover_containers
from tests.patchgen import base_file, demo_instance, edit, write_predictions

CALCLY = "harness-demo__calcly-1"


def _instances_file(tmp_path, records):
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_test_that_sleeps_past_the_timeout_is_invalid_timeout(harness_run, tmp_path, engine):
    stats = base_file(CALCLY, "calcly/stats.py")
    slow = stats.replace('    """Return the median (middle value) of *values*."""',
                         '    """Return the median (middle value) of *values*."""\n    import time; time.sleep(3600)')
    assert slow != stats
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: edit(CALCLY, {"calcly/stats.py": slow})})
    started = time.monotonic()
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, "--timeout", "6", run_id="timeout")
    elapsed = time.monotonic() - started
    report = run.report(CALCLY)
    assert (report["status"], report["error_reason"], report["error_origin"]) == ("INVALID", "timeout", "model")
    assert report["resolved"] is False
    assert elapsed < 120
    assert CALCLY in run.summary["unresolved_ids"] and CALCLY in run.summary["invalid_ids"]
    assert leftover_containers(engine, "timeout") == []


def test_a_malformed_record_is_named_and_the_rest_still_runs(harness_run, tmp_path, capsys):
    good = demo_instance(CALCLY)
    bad = dict(demo_instance("harness-demo__textkit-1"))
    bad["FAIL_TO_PASS"] = "[not json"
    run = harness_run("--instances", _instances_file(tmp_path, [good, bad]), "--predictions", "gold",
                      run_id="malformed")
    err = capsys.readouterr().err
    assert "harness-demo__textkit-1" in err and "FAIL_TO_PASS" in err
    summary = run.summary
    assert summary["resolved_ids"] == [CALCLY]
    assert summary["error_ids"] == ["harness-demo__textkit-1"]
    assert "FAIL_TO_PASS" in summary["input_errors"]["harness-demo__textkit-1"]
    assert summary["total_instances"] == 2


def test_a_test_patch_that_does_not_apply_is_a_loud_instance_error(harness_run, tmp_path):
    record = dict(demo_instance(CALCLY))
    record["test_patch"] = record["test_patch"].replace(
        "         assert median([1, 2, 3]) == 2\n", "         assert median([1, 2, 3]) == 99\n", 1)
    assert record["test_patch"] != demo_instance(CALCLY)["test_patch"]
    run = harness_run("--instances", _instances_file(tmp_path, [record]), "--predictions", "gold",
                      run_id="badtestpatch")
    report = run.report(CALCLY)
    assert (report["status"], report["error_reason"], report["error_origin"]) == \
        ("INVALID", "test_patch_apply_failed", "instance")
    assert run.summary["error_ids"] == [CALCLY]


def test_a_model_patch_that_edits_the_tests_does_not_survive(harness_run, tmp_path):
    """The model rewrites the F2P tests so they pass against the buggy code, and adds a
    conftest.py; the harness restores the tests before applying the test patch, so the
    real tests run and fail. Without the restore step the verdict would be FULL."""
    tests = base_file(CALCLY, "tests/test_stats.py")
    gutted = tests + "\n\ndef test_unsorted_input():\n    pass\n"
    conftest = "import pytest\n\n@pytest.fixture(autouse=True)\ndef _x():\n    yield\n"
    patch = edit(CALCLY, {"tests/test_stats.py": gutted, "conftest.py": conftest})
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: patch})
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, run_id="edits-tests")
    report = run.report(CALCLY)
    assert report["patch_successfully_applied"] is True
    assert report["status"] == "NO" and not report["resolved"]
    assert "patch_touched_tests" in report["integrity"]["flags"]
    assert "patch_touched_test_infra" in report["integrity"]["flags"]
    assert set(report["tests_status"]["FAIL_TO_PASS"]["failure"]) == set(demo_instance(CALCLY)["FAIL_TO_PASS"])


def test_a_run_collecting_fewer_graded_tests_than_the_control_is_flagged(harness_run, tmp_path):
    """The model's patch renames a name the test module imports, so the module no longer
    collects: compared with the reference-patch run, fewer graded tests were collected."""
    control = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                          "--instance-ids", CALCLY, run_id="control")
    stats = base_file(CALCLY, "calcly/stats.py")
    patched = stats.replace("class StatsError(ValueError):", "class _StatsError(ValueError):")
    assert patched != stats
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: edit(CALCLY, {"calcly/stats.py": patched})})
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, "--control", str(control.root), run_id="fewer")
    report = run.report(CALCLY)
    assert not report["resolved"]
    assert "collected_fewer_than_control" in report["integrity"]["flags"]
    assert report["integrity"]["not_collected_but_in_control"]
    assert report["integrity"]["control_collected"] == len(demo_instance(CALCLY)["FAIL_TO_PASS"]) + \
        len(demo_instance(CALCLY)["PASS_TO_PASS"])


def test_harness_report_regrades_a_run_against_its_control_as_the_run_did(harness_run, tmp_path):
    """Two variants of calcly-1, run with --control against the reference patch, then
    re-graded from disk with ``harness report``:

    * ``ctl-skip``: the test patch makes a P2P test skip itself after its check, and the
      model's mean() raises that skip from library code (with the fix otherwise). The
      skip the code under test raised is kept only because the control skipped the same
      test: FULL, and FULL again after the re-grade (it was NO when the re-grade forgot
      the control);
    * ``ctl-broken``: the test patch imports a module that does not exist, so the control
      and the model both fail to collect: INVALID collection_error, charged to the
      environment (``failed_like_control``), and the same after the re-grade (the flag
      and the origin were lost before).
    """
    from harness.cli import main
    base_tests = base_file(CALCLY, "tests/test_stats.py")
    fixed_tests = base_tests.replace(
        "    def test_empty_raises(self):\n        with pytest.raises(StatsError):\n            median([])",
        "    def test_unsorted_input(self):\n        assert median([3, 1, 2]) == 2\n\n"
        "    def test_even_length(self):\n        assert median([1, 2, 3, 4]) == 2.5\n\n"
        "    def test_even_length_unsorted(self):\n        assert median([4, 1, 3, 2]) == 2.5\n\n"
        "    def test_empty_raises(self):\n        with pytest.raises(StatsError):\n            median([])")
    # (a decorated test is never cloned into a canary, which the model's mean() would skip too)
    skipping = fixed_tests.replace(
        "    def test_single_value(self):\n        assert mean([7]) == 7\n",
        "    @pytest.mark.filterwarnings(\"default\")\n    def test_single_value(self):\n"
        "        assert mean([7]) == 7\n        pytest.skip(\"the test skips itself\")\n")
    broken = "import calcly_no_such_module  # noqa: F401\n" + fixed_tests
    assert base_tests != fixed_tests != skipping and broken != fixed_tests
    record = demo_instance(CALCLY)
    skip_id, broken_id = f"{CALCLY}-ctl-skip", f"{CALCLY}-ctl-broken"
    instances = _instances_file(tmp_path, [
        dict(record, instance_id=skip_id, test_patch=edit(CALCLY, {"tests/test_stats.py": skipping})),
        dict(record, instance_id=broken_id, test_patch=edit(CALCLY, {"tests/test_stats.py": broken}))])
    control = harness_run("--instances", instances, "--predictions", "gold", "--max-workers", "1",
                          run_id="regrade-control")
    assert control.statuses() == {skip_id: ("FULL", None), broken_id: ("INVALID", "collection_error")}

    gold_stats = base_file(CALCLY, "calcly/stats.py").replace(
        "    data = list(values)\n    if not data:\n        raise StatsError(\"median() of empty data\")\n"
        "    return data[len(data) // 2]",
        "    data = sorted(values)\n    if not data:\n        raise StatsError(\"median() of empty data\")\n"
        "    mid = len(data) // 2\n    if len(data) % 2:\n        return data[mid]\n"
        "    return divide(add(data[mid - 1], data[mid]), 2)")
    skips_from_library = gold_stats.replace(
        "        raise StatsError(\"mean() of empty data\")\n",
        "        raise StatsError(\"mean() of empty data\")\n    if len(data) == 1:\n"
        "        import unittest\n        raise unittest.SkipTest(\"one value\")\n")
    assert skips_from_library != gold_stats != base_file(CALCLY, "calcly/stats.py")
    preds = write_predictions(tmp_path / "p.jsonl", {
        skip_id: edit(CALCLY, {"calcly/stats.py": skips_from_library}),
        broken_id: edit(CALCLY, {"calcly/stats.py": base_file(CALCLY, "calcly/stats.py") + "\n# unrelated\n"})})
    run = harness_run("--instances", instances, "--predictions", str(preds), "--max-workers", "1",
                      "--control", str(control.root), run_id="regrade-model")

    def verdicts() -> dict:
        out = {}
        for instance_id in (skip_id, broken_id):
            report = run.report(instance_id)
            out[instance_id] = {"status": report["status"], "resolved": report["resolved"],
                                "error_reason": report["error_reason"], "error_origin": report["error_origin"],
                                "flags": sorted(report["integrity"]["flags"]), "tests_status": report["tests_status"]}
        return out

    live = verdicts()
    skip, broken_run = live[skip_id], live[broken_id]
    assert (skip["status"], skip["error_reason"]) == ("FULL", None), skip
    assert "outcome_raised_by_code" in skip["flags"]
    assert "tests/test_stats.py::TestMean::test_single_value" in skip["tests_status"]["PASS_TO_PASS"]["success"]
    assert (broken_run["status"], broken_run["error_reason"], broken_run["error_origin"]) == \
        ("INVALID", "collection_error", "harness"), broken_run
    assert "failed_like_control" in broken_run["flags"]
    recorded = run.report(skip_id)["integrity"]["control"]
    assert recorded["skipped"] == ["tests/test_stats.py::TestMean::test_single_value"]

    assert main(["report", str(run.root)]) == 0
    assert verdicts() == live
    assert json.loads((run.root / "summary.json").read_text())["regraded_changed_ids"] == []


#: calcly-1's tests with the F2P checks compared to a name (no literal to change), and one
#: added test whose object under test equals every digit: a canary changing its expected
#: digit passes honestly, and no static rule can see it
TOLERANT_TESTS = base_file(CALCLY, "tests/test_stats.py").replace('''    def test_empty_raises(self):
        with pytest.raises(StatsError):
            median([])
''', '''    def test_unsorted_input(self):
        expected = 2
        assert median([3, 1, 2]) == expected

    def test_even_length(self):
        expected = 2.5
        assert median([1, 2, 3, 4]) == expected

    def test_even_length_unsorted(self):
        expected = 2.5
        assert median([4, 1, 3, 2]) == expected

    def test_empty_raises(self):
        with pytest.raises(StatsError):
            median([])


class Reading:
    """What a gauge shows equals every digit it could show."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, int) and 0 <= other <= 9


class TestReading:
    def test_gauge_reading(self):
        # a gauge shows a digit
        assert Reading(median([3, 1, 2])) == 2
''')


def test_a_canary_that_cannot_fail_is_disproved_by_the_reference_and_charged_to_nobody(harness_run, tmp_path):
    """The pvlib case with what no rule can see: the copy of ``test_gauge_reading`` with
    another expected digit passes with the reference patch. The reference run drops it
    (``canary_disproved``, FULL, never tampered); an honest patch graded against that run
    plants the same canaries, drops the same one and is FULL; graded without a control,
    the passing canary proves nothing either way until the harness runs the reference
    patch with the same canaries (on demand), which disproves it: FULL again, never a
    verdict against the model."""
    from harness.cli import main
    record = dict(demo_instance(CALCLY), instance_id=f"{CALCLY}-tolerant",
                  test_patch=edit(CALCLY, {"tests/test_stats.py": TOLERANT_TESTS}))
    instances = _instances_file(tmp_path, [record])
    control = harness_run("--instances", instances, "--predictions", "gold", "--canary-seed", "1",
                          run_id="tolerant-control")
    gold = control.report(record["instance_id"])
    (canary,) = gold["integrity"]["canaries"]
    assert (canary["original"], canary["observed"], canary["verdict"]) == \
        ("test_gauge_reading", "passed_with_original", "disproved"), canary
    assert (gold["status"], gold["error_reason"]) == ("FULL", None) and "canary_disproved" in gold["integrity"]["flags"]

    patch = record["patch"].replace("+    data = sorted(values)\n", "+    data = sorted(values)  # in order\n")
    assert patch != record["patch"]
    honest = write_predictions(tmp_path / "p.jsonl", {record["instance_id"]: patch})
    graded = harness_run("--instances", instances, "--predictions", str(honest), "--control", str(control.root),
                         run_id="tolerant-graded")
    report = graded.report(record["instance_id"])
    assert report["integrity"]["canary_seed"] == gold["integrity"]["canary_seed"]
    assert report["integrity"]["canary_proof"] == {canary["test_id"]: "disproved"}
    assert (report["status"], report["error_reason"]) == ("FULL", None), report["error_detail"]
    assert main(["report", str(graded.root)]) == 0 and graded.report(record["instance_id"])["status"] == "FULL"

    alone = harness_run("--instances", instances, "--predictions", str(honest), "--canary-seed", "1",
                        run_id="tolerant-alone")
    report = alone.report(record["instance_id"])
    assert (report["status"], report["error_reason"]) == ("FULL", None), report["error_detail"]
    proved = report["integrity"]["canary_control"]
    assert proved["on_demand"] and proved["reference_status"] == "FULL", proved
    assert report["integrity"]["canary_proof"] == {canary["test_id"]: "disproved"}
    assert "canary_unproven" not in report["integrity"]["flags"] and "canary_proof" in report["timings"]


def test_the_perturbed_run_catches_what_passes_every_expected_value(harness_run, tmp_path):
    """``--perturbed-run`` on calcly-1 with its canaries turned off by the spec (so that
    only the perturbed run can see anything): ``median()`` returns an object equal to
    everything, so every graded test passes and the first run is FULL; the second run,
    with one FAIL_TO_PASS test's expected value changed in place, passes that test too,
    which the reference patch does not (proven on demand): INVALID tampered. The
    reference patch itself is FULL, its changed test having failed."""
    from harness.inputs.specs import DEFAULT_SPECS_DIR
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = (DEFAULT_SPECS_DIR / "harness-demo__calcly.yaml").read_text()
    (specs / "harness-demo__calcly.yaml").write_text(spec.replace("defaults:\n", "defaults:\n  canaries: 0\n", 1))
    stats = base_file(CALCLY, "calcly/stats.py")
    forger = stats.replace("    return data[len(data) // 2]",
                           "    return _Anything()\n\n\nclass _Anything:\n"
                           "    def __eq__(self, other):\n        return True")
    assert forger != stats
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: edit(CALCLY, {"calcly/stats.py": forger})})
    common = ("--instances", str(DEMO_DIR / "instances.jsonl"), "--instance-ids", CALCLY, "--specs", str(specs),
              "--perturbed-run", "--canary-seed", "3")
    forged = harness_run(*common, "--predictions", str(preds), run_id="perturbed-forger").report(CALCLY)
    assert forged["integrity"]["canary_count_source"] == "spec" and "canaries_off" in forged["integrity"]["flags"]
    record = forged["integrity"]["perturbed_run"]
    (change,) = record["perturbations"]
    assert (change["observed"], change["proof"], record["proof_run"]["on_demand"]) == ("passed", "proven", True)
    assert change["test_id"] in {f"tests/test_stats.py::TestMedian::{t.split('::')[-1]}"
                                 for t in demo_instance(CALCLY)["FAIL_TO_PASS"]}
    assert (forged["status"], forged["error_reason"], forged["error_origin"]) == ("INVALID", "tampered", "model")
    assert "perturbed_passed" in forged["integrity"]["flags"] and record["same_canaries"]

    gold = harness_run(*common, "--predictions", "gold", run_id="perturbed-gold").report(CALCLY)
    (change,) = gold["integrity"]["perturbed_run"]["perturbations"]
    assert (gold["status"], change["observed"], change["proof"]) == ("FULL", "ok", "proven")
    assert "perturbed_run" in gold["timings"]
