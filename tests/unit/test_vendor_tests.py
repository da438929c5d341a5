"""A vendor's own SWE-bench per-instance reports against a run, test by test
(harness.results.claims ``swebench_instance_reports``, harness.results.vendor_tests, the
``harness compare --claimed DIR --control RUN --defects FILE`` command and its three views).

The hand-made reports each give one reason class its shape; the last tests read the real
reports of ../shared (a third party's run, and the Verified vendor files).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import InputError
from harness.results.claims import load_claims
from harness.results.claims_vs_run import compare_with_claims
from harness.results.vendor_tests import SideOutcomes, explain, load_defects, outcomes_of
from tests.unit.test_compare import report, write_run

SHARED = Path(__file__).resolve().parents[3] / "shared"
VENDOR62 = SHARED / "trajectories" / "mini-swe-agent-1.15.0__gemini-3-pro-preview"

F = "t.py::test_fix"
P = "t.py::test_keep"
Q = "t.py::test_other"


def status(f2p: dict[str, bool], p2p: dict[str, bool]) -> dict:
    return {cat: {"success": [t for t, ok in tests.items() if ok], "failure": [t for t, ok in tests.items() if not ok]}
            for cat, tests in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p))}


def vendor(resolved: bool, f2p: dict[str, bool], p2p: dict[str, bool], applied: bool = True) -> dict:
    """A SWE-bench per-instance report (the shape swebench.harness.grading writes)."""
    return {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": applied,
            "resolved": resolved, "tests_status": status(f2p, p2p)}


def ours(instance_id: str, f2p: dict[str, bool], p2p: dict[str, bool], **fields) -> dict:
    resolved = all(f2p.values()) and all(p2p.values()) and not fields.get("error_reason")
    return report(instance_id, resolved, tests_status=status(f2p, p2p), **fields)


CASES = {
    # id: (vendor report, our report, control report)
    "psf__requests-1": (vendor(False, {F: True}, {P: False, Q: True}),
                        ours("psf__requests-1", {F: True}, {P: True, Q: True},
                             integrity={"flags": [], "network_stand_ins": ["httpbin.org"]}),
                        ours("psf__requests-1", {F: True}, {P: True, Q: True})),
    "org__lint-2": (vendor(False, {F: True}, {P: False}),
                    ours("org__lint-2", {F: True}, {P: True}), ours("org__lint-2", {F: True}, {P: True})),
    "org__astro-3": (vendor(True, {F: True}, {P: True}),
                     ours("org__astro-3", {F: True}, {P: True, Q: False}), ours("org__astro-3", {F: True}, {P: True})),
    "org__pyt-4": (vendor(True, {F: True}, {P: True, "inner.py::test_hello": True}),
                   ours("org__pyt-4", {F: True}, {P: True, "inner.py::test_hello": False},
                        missing=["inner.py::test_hello"]),
                   ours("org__pyt-4", {F: True}, {P: True, "inner.py::test_hello": False})),
    "org__sphinx-5": (vendor(True, {F: True}, {P: True}),
                      ours("org__sphinx-5", {F: False}, {P: False}, status="INVALID", error_reason="patch_apply_failed",
                           error_origin="model", patch_successfully_applied=False,
                           error_detail="no strategy applied the model patch"),
                      ours("org__sphinx-5", {F: True}, {P: True})),
    "org__x-6": (vendor(True, {F: True}, {P: True}),
                 ours("org__x-6", {F: False}, {P: True}), ours("org__x-6", {F: True}, {P: True})),
    "org__same-7": (vendor(True, {F: True}, {P: True}),
                    ours("org__same-7", {F: True}, {P: True}), ours("org__same-7", {F: True}, {P: True})),
}
DEFECTS = """
org__pyt-4:
  summary: a PASS_TO_PASS id is a test of a nested pytester run
  evidence: >-
    `inner.py::test_hello` names no file of the tree.
org__x-6:
  summary: something about another test
  evidence: test_unrelated fails.
"""
EXPECTED = {"psf__requests-1": "network", "org__lint-2": "vendor_environment", "org__astro-3": "label_fix",
            "org__pyt-4": "dataset_defect", "org__sphinx-5": "apply_difference", "org__x-6": "unexplained"}


@pytest.fixture
def layout(tmp_path):
    reports = tmp_path / "vendor" / "reports"
    reports.mkdir(parents=True)
    for number, (instance_id, (theirs, _, _)) in enumerate(CASES.items()):
        if number % 3 == 0:      # SWE-bench's own layout: <id>/report.json, wrapped in {id: ...}
            (reports / instance_id).mkdir()
            (reports / instance_id / "report.json").write_text(json.dumps({instance_id: theirs}))
        else:                    # the flat copy: <id>.report.json, unwrapped
            (reports / f"{instance_id}.report.json").write_text(json.dumps(theirs))
    run = write_run(tmp_path / "runs", "ours", {i: c[1] for i, c in CASES.items()})
    control = write_run(tmp_path / "runs", "gold", {i: c[2] for i, c in CASES.items()})
    defects = tmp_path / "defects.yaml"
    defects.write_text(DEFECTS)
    return reports, run, control, defects


def test_a_directory_of_instance_reports_is_a_claims_format(layout):
    reports = layout[0]
    claims = load_claims(reports)
    assert claims.format == "swebench_instance_reports" and claims.submission == "vendor"
    assert claims.resolved == {"org__astro-3", "org__pyt-4", "org__sphinx-5", "org__x-6", "org__same-7"}
    assert claims.unresolved == {"psf__requests-1", "org__lint-2"}
    assert claims.per_instance["org__pyt-4"]["tests_status"]["PASS_TO_PASS"]["success"][1] == "inner.py::test_hello"


def test_every_disagreement_gets_its_class_and_its_tests(layout):
    reports, run, control, defects = layout
    result = compare_with_claims(run, reports, control_dir=control, defects_path=defects)
    by_id = {d.instance_id: d for d in result.discordant}
    assert {i: d.reason_class for i, d in by_id.items()} == EXPECTED
    assert result.reason_counts == {c: 1 for c in EXPECTED.values()}
    network = by_id["psf__requests-1"]
    assert [(t.test, t.vendor, t.ours, t.control, t.decisive) for t in network.tests] == [
        (P, "failure", "success", "success", True)]
    assert "httpbin.org" in network.tests[0].why
    label = by_id["org__astro-3"].tests
    assert [(t.test, t.vendor, t.ours, t.reason_class) for t in label] == [(Q, "absent", "failure", "label_fix")]
    assert by_id["org__pyt-4"].tests[0].reason_class == "dataset_defect"
    assert "patch_apply_failed" in by_id["org__sphinx-5"].explanation and by_id["org__sphinx-5"].tests == ()
    unexplained = by_id["org__x-6"].tests[0]
    assert (unexplained.test, unexplained.vendor, unexplained.ours, unexplained.control) == (F, "success", "failure",
                                                                                            "success")
    assert "org__same-7" not in by_id and result.agreeing_with_test_differences == ()


def test_without_a_control_or_defects_the_classes_say_less(layout):
    reports, run, _, _ = layout
    by_id = {d.instance_id: d for d in compare_with_claims(run, reports).discordant}
    assert by_id["org__lint-2"].reason_class == "vendor_environment"
    assert "no reference control" in by_id["org__lint-2"].tests[0].why
    assert by_id["org__pyt-4"].reason_class == "unexplained"          # the defect is not read


def test_a_test_failing_in_our_control_too_is_never_explained_away(layout):
    reports, run, control, defects = layout
    gold = json.loads((control / "org__x-6" / "report.json").read_text())
    gold["tests_status"] = status({F: False}, {P: True})
    (control / "org__x-6" / "report.json").write_text(json.dumps(gold))
    d = {d.instance_id: d for d in compare_with_claims(run, reports, control_dir=control,
                                                         defects_path=defects).discordant}["org__x-6"]
    assert d.reason_class == "unexplained" and "reference patch too" in d.tests[0].why


def test_the_command_writes_three_views_beside_the_run(layout, capsys):
    reports, run, control, defects = layout
    code = main(["compare", str(run), "--claimed", str(reports), "--control", str(control), "--defects", str(defects)])
    assert code == 0
    out = capsys.readouterr().out
    assert "## Why they differ" in out and "### psf__requests-1: network test" in out
    data = json.loads((run / "compare-claims-vendor.json").read_text())
    assert {d["instance_id"]: d["reason_class"] for d in data["discordant"]} == EXPECTED
    assert data["discordant"][0]["tests"][0]["test"]
    page = (run / "compare-claims-vendor.html").read_text()
    assert 'id="why"' in page and "recorded dataset defect" in page and 'data-tests-of="org__x-6"' in page
    assert "label fix after the vendor&#39;s run" in page or "label fix after the vendor's run" in page


@pytest.mark.parametrize("option", ["--control", "--defects"])
def test_control_and_defects_need_claims(layout, option, capsys):
    reports, run, control, defects = layout
    assert main(["compare", str(run), str(control), option, str(defects)]) == 2
    assert f"{option} only applies together with --claimed" in capsys.readouterr().err


def test_bad_reports_are_refused_naming_the_file_and_field(tmp_path):
    directory = tmp_path / "reports"
    directory.mkdir()
    with pytest.raises(InputError, match="no SWE-bench instance reports"):
        load_claims(directory)
    (directory / "a__b-1.report.json").write_text(json.dumps({"tests_status": {}}))
    with pytest.raises(InputError) as info:
        load_claims(directory)
    assert "a__b-1.report.json" in str(info.value) and "resolved" in str(info.value)
    (directory / "a__b-1.report.json").write_text(json.dumps(
        {"resolved": True, "tests_status": {"FAIL_TO_PASS": {"success": "t.py::x"}}}))
    with pytest.raises(InputError, match="FAIL_TO_PASS.success"):
        load_claims(directory)
    (directory / "a__b-1.report.json").write_text(json.dumps({"resolved": True}))
    (directory / "a__b-1").mkdir()
    (directory / "a__b-1" / "report.json").write_text(json.dumps({"resolved": True}))
    with pytest.raises(InputError, match="two reports for one instance"):
        load_claims(directory)


def test_defects_file_is_read_and_checked(tmp_path):
    good = tmp_path / "d.yaml"
    good.write_text(DEFECTS)
    assert "inner.py::test_hello" in load_defects(good)["org__pyt-4"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("x:\n  evidence: no summary\n")
    with pytest.raises(InputError, match="summary"):
        load_defects(bad)
    with pytest.raises(InputError, match="not found"):
        load_defects(tmp_path / "missing.yaml")


def test_a_verdict_only_claim_is_explained_from_our_side():
    """A vendor file without per-test data (the Verified positives): only what fails here
    can explain a claimed resolve."""
    mine = outcomes_of(ours("a__b-1", {F: True}, {P: False}))
    why = explain(True, SideOutcomes({}, per_test=False, applied=None), mine, None,
                  "linkcheck tests fetch www.google.com: test_keep fails")
    assert why.reason_class == "dataset_defect"
    assert [(t.test, t.vendor, t.ours) for t in why.tests] == [(P, "unknown", "failure")]


# --------------------------------------------------------------------------- the real files of ../shared

@pytest.mark.skipif(not VENDOR62.is_dir(), reason="no shared data here")
def test_the_real_shared_reports_load_and_explain_the_two_network_cases(tmp_path):
    claims = load_claims(VENDOR62 / "reports")
    assert claims.format == "swebench_instance_reports" and len(claims.universe) == 62
    assert len(claims.resolved) == 41 == sum(v["resolved"] for v in json.loads(
        (VENDOR62 / "claims.json").read_text()).values())
    # our side, written as a harness run that resolves the two httpbin.org cases
    ids = ("psf__requests-1921", "psf__requests-2317")
    reports = {}
    for instance_id in ids:
        theirs = claims.per_instance[instance_id]["tests_status"]
        every = {c: {t: True for t in (*theirs[c]["success"], *theirs[c]["failure"])} for c in theirs}
        reports[instance_id] = ours(instance_id, every["FAIL_TO_PASS"], every["PASS_TO_PASS"],
                                    integrity={"flags": [], "network_stand_ins": ["httpbin.org", "www.google.co.uk"]},
                                    repo="psf/requests")
    run = write_run(tmp_path / "runs", "ours", reports)
    result = compare_with_claims(run, VENDOR62 / "reports")
    by_id = {d.instance_id: d for d in result.discordant if d.reason_class != "not_in_run"}
    assert {i: d.reason_class for i, d in by_id.items()} == {i: "network" for i in ids}
    assert [t.test for t in by_id["psf__requests-1921"].tests] == [
        "test_requests.py::RequestsTestCase::test_mixed_case_scheme_acceptable"]
    assert [t.test for t in by_id["psf__requests-2317"].tests] == [
        "test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_WITH_PARAMS"]
    assert len(result.discordant) - len(by_id) == 41 - 0      # the vendor's resolved ones we did not run


@pytest.mark.skipif(not (SHARED / "swebench").is_dir(), reason="no shared data here")
@pytest.mark.parametrize("name", ["vendor-verified-20240628_autocoderover-v20240620.resolved-claims.json",
                                  "vendor-verified-20240721_amazon-q-developer-agent-20240719-dev.resolved-claims.json"])
def test_the_verified_vendor_files_work_too(tmp_path, name):
    """Positives only: a claimed resolve our run misses is explained from our side (here a
    recorded network defect of the real defects file); the rest are not graded here."""
    claims = load_claims(SHARED / "swebench" / name)
    instance = "sphinx-doc__sphinx-8269" if "sphinx-doc__sphinx-8269" in claims.resolved else sorted(claims.resolved)[0]
    linkcheck = "tests/test_build_linkcheck.py::test_defaults"
    run = write_run(tmp_path / "runs", "ours", {
        instance: ours(instance, {F: True}, {linkcheck: False}),
        "astropy__astropy-12907": ours("astropy__astropy-12907", {F: True}, {P: True})})
    defects = Path(__file__).resolve().parents[2] / "docs" / "notes" / "dataset-defects.yaml"
    result = compare_with_claims(run, SHARED / "swebench" / name, defects_path=defects)
    by_class = {}
    for d in result.discordant:
        by_class.setdefault(d.reason_class, []).append(d.instance_id)
    assert result.claims_format == "harness" and result.denominator == len(claims.universe)
    if instance == "sphinx-doc__sphinx-8269":
        assert by_class.pop("dataset_defect") == [instance]
    assert set(by_class) <= {"not_in_run", "unexplained"} and len(by_class["not_in_run"]) >= len(claims.resolved) - 2
