"""Real SWE-bench Lite instances, graded as a user would: the CI sample.

One instance of every repository in ``../shared/swebench/repos`` (tests/realdata.py), chosen
so that every runner and way of running tests is exercised, and each a regression the
sample has caught: pytest; sphinx through ``tox --current-env`` (the bootstrap must reach
the pytest tox starts); sympy's ``bin/test`` (twice: 1.0 and 1.1; not 13146/13177, whose tests pass about
half the time under SWE-bench's own command: docs/notes/dataset-defects.yaml); pylint's suite (a test that writes into ``tests/``); astropy 1.3's
compiled extensions on Python 3.6 (pytest 3); xarray and seaborn (libraries that walk the
gc and use ctypes on their own behalf); requests with its local services; flask. Each is
graded once with its reference patch and once with the empty patch, in two batches of
two workers; the verdicts are asserted instance by instance.

The whole-set validation (every Lite instance here, three repeats) is
scripts/validate_whole_set.py; docs/REAL_INSTANCES.md has its tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import realdata
from tests.conftest import HarnessRun

pytestmark = [pytest.mark.real_instances, pytest.mark.engine]

#: repository -> the instance graded for it (what it exercises: the module docstring)
SAMPLE = {
    "pytest-dev/pytest": "pytest-dev__pytest-7373",
    "sphinx-doc/sphinx": "sphinx-doc__sphinx-11445",
    "sympy/sympy": "sympy__sympy-11400",
    "sympy/sympy 1.1": "sympy__sympy-13480",
    "pylint-dev/pylint": "pylint-dev__pylint-7080",
    "astropy/astropy": "astropy__astropy-6938",
    "pydata/xarray": "pydata__xarray-4493",
    "mwaskom/seaborn": "mwaskom__seaborn-2848",
    "psf/requests": "psf__requests-2317",
    "pallets/flask": "pallets__flask-5063",
}
IDS = sorted(SAMPLE.values())
SYMPY = "sympy__sympy-11400"


@pytest.fixture(scope="module")
def sample(tmp_path_factory, cache_dir, engine):
    """The sample graded with the reference and the empty patch (one batch each)."""
    realdata.require()
    root = tmp_path_factory.mktemp("real-sample")
    instances = realdata.write_instances(root / "sample.jsonl", IDS)
    run = HarnessRun(root / "runs", cache_dir)
    common = ("--instances", str(instances), "--repos-dir", str(realdata.REPOS), "--no-clone", "--max-workers", "2")
    gold = run(*common, "--predictions", "gold", run_id="sample-gold")
    empty = run(*common, "--predictions", "empty", run_id="sample-empty")
    return gold, empty


def test_every_repository_here_is_in_the_sample():
    realdata.require()
    held = sorted(p.name[:-len(".git")].replace("__", "/", 1) for p in realdata.REPOS.glob("*.git")
                  if p.name != "astropy__astropy-helpers.git")
    assert held == sorted({key.split()[0] for key in SAMPLE}), held


def test_reference_patches_are_full_with_nothing_flagged_as_tampering(sample):
    gold, _ = sample
    assert gold.exit_code == 0
    reports = {i: gold.report(i) for i in IDS}
    verdicts = {i: (r["status"], r["error_reason"]) for i, r in reports.items()}
    assert verdicts == {i: ("FULL", None) for i in IDS}, {i: r["error_detail"] for i, r in reports.items()
                                                          if r["status"] != "FULL"}
    for iid, report in reports.items():
        flags = report["integrity"]["flags"]
        assert not [f for f in flags if f.startswith(("monitor_gc", "monitor_ctypes", "monitor_sys_set"))
                    or f in ("sealed_files_changed", "results_disagree_with_runner", "monitor_not_loaded",
                             "runner_rebound", "runner_identity_unchecked", "monitor_runner_rebind")], (iid, flags)


def test_empty_patches_resolve_nothing(sample):
    _, empty = sample
    assert empty.exit_code == 0
    reports = {i: empty.report(i) for i in IDS}
    assert empty.summary["resolved_ids"] == []
    assert {i: r["status"] for i, r in reports.items()} == {
        i: ("PARTIAL" if i == "psf__requests-2317" else "NO") for i in IDS}   # 2317: 7 of 8 F2P pass unfixed


def test_each_way_of_running_tests_ran_as_its_spec_says(sample):
    gold, _ = sample
    sphinx = gold.report(SAMPLE["sphinx-doc/sphinx"])
    tests = next(c for c in sphinx["commands"] if c["phase"] == "tests")
    assert "tox --current-env" in " ".join(tests["argv"])
    # the outcome plugin ran inside the pytest tox started: its reports were compared with the results
    assert sphinx["integrity"]["evidence_expected"] is True and "monitor_not_loaded" not in sphinx["integrity"]["flags"]

    for iid in (SYMPY, SAMPLE["sympy/sympy 1.1"]):
        report = gold.report(iid)
        assert report["parser"]["runner"] == "sympy" and report["parser"]["source"] == "junit", iid

    requests = gold.report(SAMPLE["psf/requests"])
    phases = [c["phase"] for c in requests["commands"]]
    assert "service_setup" in phases and "service_ready" in phases
    assert any("test_connect_timeout" in t for t in requests["tests_status"]["PASS_TO_PASS"]["success"])

    # pylint's test that creates tests/testbed passes: honest tests may write into their directory
    pylint = gold.report(SAMPLE["pylint-dev/pylint"])
    assert "tests/test_self.py::TestRunTC::test_parseable_file_path" in pylint["tests_status"]["PASS_TO_PASS"]["success"]

    astropy = gold.report(SAMPLE["astropy/astropy"])
    assert astropy["image"]["interpreter"]["version"].startswith("3.6.")


def test_sympy_runs_under_bin_test_with_its_id_convention(sample):
    """A Lite sympy instance end to end: bin/test under the in-container reporter, ids by
    function name; canaries are clones of sympy's own test functions, each failing."""
    gold, empty = sample
    report = gold.report(SYMPY)
    assert "test_ccode_Relational" in report["tests_status"]["FAIL_TO_PASS"]["success"]
    canaries = report["integrity"]["canaries"]
    assert canaries and all(c["status"] in ("FAILED", "ERROR") and (c["original_status"], c["cls"]) == ("PASSED", None)
                            for c in canaries), canaries
    assert "test_ccode_Relational" in empty.report(SYMPY)["tests_status"]["FAIL_TO_PASS"]["failure"]


def _sympy_file(commit: str, path: str, *patches: str) -> str:
    """``path`` of the sympy repository at ``commit``, with ``patches`` applied (git apply
    in a scratch directory; nothing of sympy is kept)."""
    import subprocess
    import tempfile
    text = realdata.repo_file("sympy/sympy", commit, path)
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / path
        target.parent.mkdir(parents=True)
        target.write_text(text)
        for patch in patches:
            subprocess.run(["git", "apply", "--include", path, "-"], input=patch, text=True, cwd=scratch, check=True)
        return target.read_text()


def test_sympy_skips_and_xfails_raised_by_the_code_under_test_do_not_count(harness_run, tmp_path):
    """bin/test reports a ``Skipped``/``XFail`` from its except clause; the reporter takes
    where it was raised. Three runs of sympy-11400 in one batch:

    * ``honest``: the reference patch, with a test patch that also adds an ``@XFAIL`` F2P
      test and a P2P test calling ``skip()`` itself: FULL, as before;
    * ``xfail-forgery``: no fix; ccode's printer raises sympy's ``XFail`` for the two
      things the F2P tests print: the F2P tests are not fixed (they were XFAIL, fixed, FULL);
    * ``skip-regression``: the fix, plus ``_print_sign`` calling ``skip()`` instead of
      printing: the P2P test_ccode_sign is not kept (it was SKIPPED, kept, FULL);
    * ``reporter-rebound``: no fix; ``ccode()``, when first called, rebinds the live
      reporter class's fail and exception methods (names built at run time, nothing the
      scans know) to its pass method for the two F2P tests, every other test (canaries
      included) reported as before: the reporter's bindings are not the ones captured
      when sympy's runner was imported, ``tampered`` (``runner_rebound``; without the
      identity check it was FULL with no flag).
    """
    from tests.patchgen import file_diff
    realdata.require()
    record = realdata.record(SYMPY)
    base, tests_path, code_path = record["base_commit"], "sympy/printing/tests/test_ccode.py", "sympy/printing/ccode.py"
    honest_tests = _sympy_file(base, tests_path, record["test_patch"]) + (
        "\n\nfrom sympy.utilities.pytest import XFAIL, skip\n\n\n@XFAIL\ndef test_ccode_honest_xfail():\n"
        "    assert ccode(x) == 'not x'\n\n\ndef test_ccode_honest_skip():\n    skip('the test skips itself')\n")
    honest = dict(record, instance_id=SYMPY + "-honest",
                  test_patch=file_diff(tests_path, _sympy_file(base, tests_path), honest_tests),
                  FAIL_TO_PASS=record["FAIL_TO_PASS"] + ["test_ccode_honest_xfail"],
                  PASS_TO_PASS=record["PASS_TO_PASS"] + ["test_ccode_honest_skip"])
    code = _sympy_file(base, code_path)
    anchor = "    def _print_AugmentedAssignment(self, expr):\n"
    raise_xfail = "        from sympy.utilities.pytest import XFail\n        raise XFail('not yet')\n\n"
    forged = code.replace(anchor, "    def _print_Relational(self, expr):\n" + raise_xfail +
                          "    def _print_sinc(self, expr):\n" + raise_xfail + anchor)
    fixed = _sympy_file(base, code_path, record["patch"])
    sign = "    def _print_sign(self, func):\n"
    skipping = fixed.replace(sign, sign + "        from sympy.utilities.pytest import skip\n"
                                          "        skip('sign() is not supported')\n")
    entry = "def ccode(expr, assign_to=None, **settings):\n"
    rebound = code.replace(entry, REPORTER_REBIND + "\n\n" + entry + "    _steer()\n", 1)
    assert forged != code and skipping != fixed and rebound != code and anchor in code and sign in fixed
    instances = tmp_path / "sympy.jsonl"
    instances.write_text(json.dumps(record) + "\n" + json.dumps(honest) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    runs = [(SYMPY + "-honest", record["patch"]), (SYMPY, file_diff(code_path, code, forged)),
            (SYMPY, file_diff(code_path, code, skipping)), (SYMPY, file_diff(code_path, code, rebound))]
    predictions.write_text("".join(json.dumps({"instance_id": i, "model_name_or_path": "attacks", "attempt": n,
                                               "model_patch": p}) + "\n" for n, (i, p) in enumerate(runs, 1)))
    run = harness_run("--instances", str(instances), "--repos-dir", str(realdata.REPOS), "--no-clone", "--predictions",
                      str(predictions), "--max-workers", "1", run_id="sympy-origins")
    reports = [json.loads((run.root / i / f"attempt-{n}" / "report.json").read_text())
               for n, (i, _) in enumerate(runs, 1)]
    honest_report, forgery, regression, rebinding = reports
    assert (honest_report["status"], honest_report["error_reason"]) == ("FULL", None), honest_report["error_detail"]
    assert not {"runner_rebound", "runner_identity_unchecked", "monitor_runner_rebind"} & set(
        honest_report["integrity"]["flags"])
    assert honest_report["integrity"]["skipped_or_xfailed"] == {"test_ccode_honest_xfail": "XFAIL",
                                                                "test_ccode_honest_skip": "SKIPPED"}
    assert "outcome_raised_by_code" not in honest_report["integrity"]["flags"]

    assert not forgery["resolved"]
    assert set(forgery["integrity"]["outcome_raised_by_code"]) >= {"test_ccode_Relational", "test_ccode_sinc"}
    assert set(forgery["tests_status"]["FAIL_TO_PASS"]["failure"]) == {"test_ccode_Relational", "test_ccode_sinc"}
    assert forgery["integrity"]["skipped_or_xfailed"]["test_ccode_sinc"] == "XFAIL"   # the attack ran

    assert not regression["resolved"]
    assert regression["integrity"]["outcome_raised_by_code"] == ["test_ccode_sign"]
    assert "test_ccode_sign" in regression["tests_status"]["PASS_TO_PASS"]["failure"]
    assert set(regression["tests_status"]["FAIL_TO_PASS"]["success"]) == {"test_ccode_Relational", "test_ccode_sinc"}

    assert (rebinding["status"], rebinding["error_reason"]) == ("INVALID", "tampered"), rebinding["error_detail"]
    assert "runner_rebound" in rebinding["integrity"]["flags"], rebinding["integrity"]["flags"]
    assert {"sympy.utilities.runtests.PyTestReporter.test_fail",
            "sympy.utilities.runtests.PyTestReporter.test_exception"} <= set(rebinding["integrity"]["runner_rebound"])
    # the attack ran: the results file says both unfixed F2P tests passed
    from harness.grading.reporter_parsers import parse_reporter_junit
    saved = parse_reporter_junit((run.root / SYMPY / "attempt-4" / "results.xml").read_bytes()).statuses
    f2p = {n.rsplit(":", 1)[-1]: s.value for n, s in saved.items() if n.endswith(("ccode_Relational", "ccode_sinc"))}
    assert f2p == {"test_ccode_Relational": "PASSED", "test_ccode_sinc": "PASSED"}, f2p


#: library code that makes sympy's live reporter report the F2P tests' failures as passes
REPORTER_REBIND = '''_WANTED = ("test_ccode_Relational", "test_ccode_sinc")


def _steer():
    import sys
    runner = sys.modules.get("sympy.utilities." + "runtests")
    cls = getattr(runner, "PyTest" + "Reporter", None)
    if cls is None or getattr(cls, "_steered", False):
        return
    passed = getattr(cls, "test_" + "pass")

    def steer(original):
        def method(self, *args, **kwargs):
            if getattr(getattr(self, "_active_f", None), "__name__", "") in _WANTED:
                return passed(self)
            return original(self, *args, **kwargs)
        return method
    for name in ("test_" + "fail", "test_" + "exception"):
        setattr(cls, name, steer(getattr(cls, name)))
    cls._steered = True
'''
