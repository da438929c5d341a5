"""A failed build says what failed: the resolver's explanation with the origin of each side
of a conflict, the failing package and command of an install; the whole log is kept
beside the report, and no earlier artefact stays beside a new report."""

from __future__ import annotations

import json

from tests.integration.test_new_repository import SPEC, _make_repo


def _run(tmp_path, harness_run, spec_text: str, run_id: str, sitting: int = 1):
    where = tmp_path / f"{run_id}-{sitting}"
    repo, record = _make_repo(where)
    specs = where / "specs"
    specs.mkdir()
    (specs / "example__tinyparse.yaml").write_text(spec_text)
    instances = where / "instances.json"
    instances.write_text(json.dumps([record]))
    return harness_run("--instances", str(instances), "--specs", str(specs), "--repo", f"example/tinyparse={repo}",
                       "--no-clone", "--predictions", "gold", run_id=run_id)


def test_a_resolution_conflict_names_both_sides_and_where_they_came_from(tmp_path, harness_run):
    spec = SPEC.replace('requirements: ["pytest==8.3.4"]', 'requirements: ["pytest==8.3.4", "pluggy==0.13.1"]')
    run = _run(tmp_path, harness_run, spec, "conflict")
    report = run.report("example__tinyparse-1")
    assert (report["status"], report["error_reason"]) == ("INVALID", "environment_build_failed")
    detail = report["error_detail"]
    assert "pluggy: 'pluggy==0.13.1' from spec requirements" in detail and "example__tinyparse.yaml" in detail
    assert "pytest==8.3.4" in detail and "Resolver" in detail
    log = (run.root / "example__tinyparse-1" / "build.log").read_text()
    assert "pluggy" in log and "No solution found" in log


def test_a_failed_install_names_the_package_and_the_command_and_keeps_the_log(tmp_path, harness_run):
    spec = SPEC.replace('install: "python -m pip install --no-build-isolation --no-deps -e ."',
                        'install: "python -c \'import tinyparse_helpers\'"')
    run = _run(tmp_path, harness_run, spec, "install-fails")
    report = run.report("example__tinyparse-1")
    assert (report["status"], report["error_reason"]) == ("INVALID", "environment_build_failed")
    assert "at package tinyparse_helpers" in report["error_detail"]
    assert "command: python -c 'import tinyparse_helpers'" in report["error_detail"]
    assert "ModuleNotFoundError" in (run.root / "example__tinyparse-1" / "build.log").read_text()
    # a later sitting that gets further leaves nothing of this one beside its report
    (run.root / "example__tinyparse-1" / "test_output.txt").write_text("stale output of an earlier attempt\n")
    run = _run(tmp_path, harness_run, SPEC, "install-fails", sitting=2)
    report = run.report("example__tinyparse-1")
    assert report["status"] == "FULL"
    assert not (run.root / "example__tinyparse-1" / "build.log").exists()
    assert "stale output" not in (run.root / "example__tinyparse-1" / "test_output.txt").read_text()
