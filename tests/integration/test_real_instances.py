"""Real SWE-bench Lite instances (../shared/swebench/lite-public.jsonl) against the public
repositories, when they have been fetched locally. Their code is never committed: without
the repositories (``$HARNESS_REAL_REPOS``, default /work/repos, holding OWNER__NAME
clones) these tests skip and say so; CI keeps running on the project's own fixtures.

One instance per repository keeps the suite fast; docs/REAL_INSTANCES.md records the full
26-instance validation and how to repeat it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

REPOS = Path(os.environ.get("HARNESS_REAL_REPOS", "/work/repos"))
#: SWE-bench's published records: ../shared/swebench beside the checkout, or $HARNESS_SWEBENCH_DATA
SHARED = Path(os.environ.get("HARNESS_SWEBENCH_DATA", PROJECT_ROOT.parent / "shared" / "swebench"))
LITE = SHARED / "lite-public.jsonl"
SAMPLE = {"pallets__flask-5063": "pallets__flask", "psf__requests-2317": "psf__requests",
          "pytest-dev__pytest-7373": "pytest-dev__pytest"}


def _available() -> str | None:
    if not LITE.exists():
        return f"{LITE} is absent"
    missing = [d for d in sorted(set(SAMPLE.values())) if not (REPOS / d).exists()]
    if missing:
        return (f"public repositories not fetched ({', '.join(missing)} under {REPOS}); set HARNESS_REAL_REPOS "
                "to a directory of OWNER__NAME clones to run these")
    return None


pytestmark = [pytest.mark.real_instances,
              pytest.mark.skipif(_available() is not None, reason=_available() or "")]


def test_reference_patches_resolve_and_empty_patches_do_not(harness_run, tmp_path):
    records = [json.loads(line) for line in LITE.read_text().splitlines()]
    chosen = [r for r in records if r["instance_id"] in SAMPLE]
    instances = tmp_path / "sample.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    common = ("--instances", str(instances), "--repos-dir", str(REPOS), "--no-clone", "--max-workers", "2")
    gold = harness_run(*common, "--predictions", "gold", run_id="real-gold")
    empty = harness_run(*common, "--predictions", "empty", run_id="real-empty")
    assert gold.statuses() == {i: ("FULL", None) for i in SAMPLE}
    assert empty.summary["resolved_ids"] == []
    # the requests instance ran against the local stand-ins, with the network still absent
    report = gold.report("psf__requests-2317")
    phases = [c["phase"] for c in report["commands"]]
    assert "service_setup" in phases and "service_ready" in phases
    assert any("test_connect_timeout" in t for t in report["tests_status"]["PASS_TO_PASS"]["success"])


LITE_ALL = SHARED / "lite-test.jsonl"
SYMPY = "sympy__sympy-11400"


@pytest.mark.skipif(not LITE_ALL.exists() or not (REPOS / "sympy__sympy").exists(),
                    reason=f"{LITE_ALL} or {REPOS / 'sympy__sympy'} absent")
def test_sympy_runs_under_bin_test_with_its_id_convention(harness_run, tmp_path):
    """A Lite sympy instance end to end: bin/test under the in-container reporter, ids by
    function name (docs/REAL_INSTANCES.md records all 77)."""
    record = next(json.loads(line) for line in LITE_ALL.read_text().splitlines()
                  if json.loads(line)["instance_id"] == SYMPY)
    instances = tmp_path / "sympy.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    common = ("--instances", str(instances), "--repos-dir", str(REPOS), "--no-clone")
    gold = harness_run(*common, "--predictions", "gold", run_id="sympy-gold").report(SYMPY)
    assert (gold["status"], gold["error_reason"]) == ("FULL", None), gold["error_detail"]
    assert gold["parser"]["runner"] == "sympy" and gold["parser"]["source"] == "junit"
    assert "test_ccode_Relational" in gold["tests_status"]["FAIL_TO_PASS"]["success"]
    canaries = gold["integrity"]["canaries"]  # clones of sympy's own test functions, each failing
    assert canaries and all(c["status"] in ("FAILED", "ERROR") and (c["original_status"], c["cls"]) == ("PASSED", None)
                            for c in canaries), canaries
    empty = harness_run(*common, "--predictions", "empty", run_id="sympy-empty").report(SYMPY)
    assert empty["status"] == "NO" and "test_ccode_Relational" in empty["tests_status"]["FAIL_TO_PASS"]["failure"]


def _sympy_file(commit: str, path: str, *patches: str) -> str:
    """``path`` of the sympy repository at ``commit``, with ``patches`` applied (git apply
    in a scratch directory; nothing of sympy is kept)."""
    import subprocess
    import tempfile
    text = subprocess.run(["git", "--git-dir", str(REPOS / "sympy__sympy"), "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / path
        target.parent.mkdir(parents=True)
        target.write_text(text)
        for patch in patches:
            subprocess.run(["git", "apply", "--include", path, "-"], input=patch, text=True, cwd=scratch, check=True)
        return target.read_text()


@pytest.mark.skipif(not LITE_ALL.exists() or not (REPOS / "sympy__sympy").exists(),
                    reason=f"{LITE_ALL} or {REPOS / 'sympy__sympy'} absent")
def test_sympy_skips_and_xfails_raised_by_the_code_under_test_do_not_count(harness_run, tmp_path):
    """bin/test reports a ``Skipped``/``XFail`` from its except clause; the reporter takes
    where it was raised. Three runs of sympy-11400 in one batch:

    * ``honest``: the reference patch, with a test patch that also adds an ``@XFAIL`` F2P
      test and a P2P test calling ``skip()`` itself: FULL, as before;
    * ``xfail-forgery``: no fix; ccode's printer raises sympy's ``XFail`` for the two
      things the F2P tests print: the F2P tests are not fixed (they were XFAIL, fixed, FULL);
    * ``skip-regression``: the fix, plus ``_print_sign`` calling ``skip()`` instead of
      printing: the P2P test_ccode_sign is not kept (it was SKIPPED, kept, FULL).
    """
    from tests.patchgen import file_diff
    record = next(json.loads(line) for line in LITE_ALL.read_text().splitlines()
                  if json.loads(line)["instance_id"] == SYMPY)
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
    assert forged != code and skipping != fixed and anchor in code and sign in fixed
    instances = tmp_path / "sympy.jsonl"
    instances.write_text(json.dumps(record) + "\n" + json.dumps(honest) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    runs = [(SYMPY + "-honest", record["patch"]), (SYMPY, file_diff(code_path, code, forged)),
            (SYMPY, file_diff(code_path, code, skipping))]
    predictions.write_text("".join(json.dumps({"instance_id": i, "model_name_or_path": "attacks", "attempt": n,
                                               "model_patch": p}) + "\n" for n, (i, p) in enumerate(runs, 1)))
    run = harness_run("--instances", str(instances), "--repos-dir", str(REPOS), "--no-clone", "--predictions",
                      str(predictions), "--max-workers", "1", run_id="sympy-origins")
    reports = [json.loads((run.root / i / f"attempt-{n}" / "report.json").read_text())
               for n, (i, _) in enumerate(runs, 1)]
    honest_report, forgery, regression = reports
    assert (honest_report["status"], honest_report["error_reason"]) == ("FULL", None), honest_report["error_detail"]
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
