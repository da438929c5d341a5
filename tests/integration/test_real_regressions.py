"""Regressions that real SWE-bench Lite instances showed (records of
``../shared/swebench/lite-test.jsonl``, repositories of ``../shared/swebench/repos``), each
graded as a user grades it: one evaluation per test, images shared through the test cache.

* astropy 1.3 runs pytest 3.3, whose node ids carry the class instance (``::()::``): the
  outcome plugin's reports must be read as the same tests the results file names;
* pylint counts cores from the cgroup: the sandbox must show it the engine host's cores,
  as SWE-bench's containers do, or ``test_jobs_score`` is skipped;
* the empty patch of requests-863 resolves (its F2P tests pass without the fix, a dataset
  defect): the run's pages must still be written;
* sympy's bin/test runs with its string hashing randomised, as in SWE-bench's runs, with the
  seed recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

SHARED = Path(os.environ.get("HARNESS_SWEBENCH_DATA", PROJECT_ROOT.parent / "shared" / "swebench"))
LITE = SHARED / "lite-test.jsonl"
REPOS = SHARED / "repos"

pytestmark = [pytest.mark.real_instances,
              pytest.mark.skipif(not (LITE.is_file() and REPOS.is_dir()),
                                 reason=f"{LITE} or {REPOS} absent (set HARNESS_SWEBENCH_DATA)")]


def _grade(harness_run, tmp_path, instance_id: str, predictions: str, *extra: str):
    record = next(r for r in map(json.loads, LITE.read_text().splitlines()) if r["instance_id"] == instance_id)
    instances = tmp_path / f"{instance_id}.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    return harness_run("--instances", str(instances), "--repos-dir", str(REPOS), "--no-clone",
                       "--predictions", predictions, *extra, run_id=f"{instance_id}-{predictions}")


def test_pytest3_class_tests_are_the_tests_the_results_file_names(harness_run, tmp_path):
    run = _grade(harness_run, tmp_path, "astropy__astropy-6938", "gold")
    report = run.report("astropy__astropy-6938")
    assert (report["status"], report["error_reason"]) == ("FULL", None), report["error_detail"]
    assert "results_disagree_with_runner" not in report["integrity"]["flags"]
    events = (run.root / "astropy__astropy-6938" / "events.jsonl").read_text()
    assert "::TestChecksumFunctions::()::" in events     # pytest 3's spelling, read as the JUnit file's
    assert "astropy/io/fits/tests/test_checksum.py::TestChecksumFunctions::test_ascii_table_data" in \
        report["tests_status"]["FAIL_TO_PASS"]["success"]


def test_pylint_counts_the_engine_hosts_cores(harness_run, tmp_path, engine):
    run = _grade(harness_run, tmp_path, "pylint-dev__pylint-7080", "gold")
    report = run.report("pylint-dev__pylint-7080")
    cores = engine.info()["NCPU"]
    assert report["resources"]["cpus"]["cpus"] is None and report["resources"]["cpus"]["engine_cores"] == cores
    jobs = "tests/test_self.py::TestRunTC::test_jobs_score"         # needs two cores, else skipped
    skipped = report["integrity"].get("skipped_or_xfailed") or {}
    if cores >= 2:
        assert jobs in report["tests_status"]["PASS_TO_PASS"]["success"] and jobs not in skipped, skipped
    assert "skipped_under_cpu_cap" not in report["integrity"]["flags"]


def test_an_empty_patch_that_resolves_still_gets_its_pages(harness_run, tmp_path):
    run = _grade(harness_run, tmp_path, "psf__requests-863", "empty")
    assert run.exit_code == 0
    summary = run.summary
    assert summary["resolved_ids"] == ["psf__requests-863"] == summary["empty_patch_ids"]
    page = (run.root / "report.html").read_text()
    assert "psf__requests-863" in page
    assert (run.root / "psf__requests-863" / "report.html").is_file()


def test_sympy_hashes_strings_randomised_with_the_seed_recorded(harness_run, tmp_path):
    run = _grade(harness_run, tmp_path, "sympy__sympy-11400", "gold")
    report = run.report("sympy__sympy-11400")
    assert (report["status"], report["error_reason"]) == ("FULL", None), report["error_detail"]
    seed = report["resources"]["python_hash_seed"]
    assert 0 < int(seed) < 2**32
    output = (run.root / "sympy__sympy-11400" / "test_output.txt").read_text()
    assert f"hash randomization: on (PYTHONHASHSEED={seed})" in output   # what SWE-bench's bin/test prints
