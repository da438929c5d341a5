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
