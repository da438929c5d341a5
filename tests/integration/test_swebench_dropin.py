"""A SWE-bench user's command line, end to end on the real engine: instances from a parquet
file, swebench's flag names, SWE-bench's output layout — read back and re-graded by
swebench 5.0.2's own code (``make_run_report``, ``get_logs_eval``,
``get_eval_tests_report``, ``get_resolution_status``), which must agree with every
resolved verdict here. The demo set always; a real SWE-bench Lite instance when the tests
have /work/shared/swebench (records and repositories)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.cli import main
from harness.inputs import demo
from tests.conftest import PROJECT_ROOT

swebench_grading = pytest.importorskip("swebench.harness.grading")
from swebench.harness.reporting import make_run_report  # noqa: E402
from swebench.types import TestSpec as SwebenchTestSpec  # noqa: E402

pytestmark = pytest.mark.engine

SHARED = [Path(os.environ["HARNESS_SWEBENCH_DATA"])] if os.environ.get("HARNESS_SWEBENCH_DATA") else []
SHARED = next((d for d in [*SHARED, PROJECT_ROOT.parent / "shared" / "swebench", Path("/work/shared/swebench")]
               if (d / "lite-test.jsonl").exists() and (d / "repos").is_dir()), None)
#: a Lite instance whose repository shared/swebench/repos holds; pytest's runner and SWE-bench's pytest parser
REAL = "pytest-dev__pytest-7373"
#: SWE-bench's log parser per repository (its records name none; Verified's `log_parser` field would)
PARSERS = {"harness-demo": "parse_log_pytest", "pytest-dev": "parse_log_pytest"}


def _parquet(records: list[dict], path: Path) -> Path:
    """``records`` as the Hub publishes them: the test lists JSON-encoded strings."""
    rows = [{**{k: v for k, v in r.items() if k not in ("dataset", "split")},
             "FAIL_TO_PASS": json.dumps(r["FAIL_TO_PASS"]), "PASS_TO_PASS": json.dumps(r["PASS_TO_PASS"])}
            for r in records]
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "test.parquet")
    return path


def _swebench_run(tmp_path, cache_dir, run_id: str, dataset: Path, *extra: str) -> Path:
    code = main(["run", "--dataset_name", str(dataset), "--split", "test", "--predictions_path", "gold",
                 "--max_workers", "2", "--run_id", run_id, "--report_dir", str(tmp_path / "reports"),
                 "--output-dir", str(tmp_path / "runs"), "--cache-dir", str(cache_dir), "--quiet", *extra])
    assert code == 0
    return tmp_path / "runs" / run_id


def _jsonl_verdicts(tmp_path, cache_dir, records: list[dict], run_id: str, *extra: str) -> dict:
    jsonl = tmp_path / f"{run_id}.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    code = main(["run", "--instances", str(jsonl), "--predictions", "gold", "--run-id", run_id, "--max-workers", "2",
                 "--output-dir", str(tmp_path / "runs"), "--cache-dir", str(cache_dir), "--quiet", *extra])
    assert code == 0
    return {r["instance_id"]: json.loads((tmp_path / "runs" / run_id / r["instance_id"] / "report.json").read_text())
            ["status"] for r in records}


def _check_with_swebench(tmp_path, run_dir: Path, run_id: str, records: list[dict], monkeypatch) -> dict:
    """SWE-bench's code over our layout: its run report equals ours, its grading of each
    test_output.txt equals our verdict. Returns our verdicts by id."""
    ours = json.loads((tmp_path / "reports" / f"gold.{run_id}.json").read_text())
    predictions = {r["instance_id"]: {"instance_id": r["instance_id"], "model_name_or_path": "gold",
                                      "model_patch": r["patch"]} for r in records}
    monkeypatch.chdir(run_dir)  # SWE-bench reads logs/run_evaluation relative to where it runs
    theirs = json.loads(Path(make_run_report(predictions, records, run_id, report_dir=str(tmp_path / "theirs")))
                        .read_text())
    for key in ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "resolved_ids",
                "unresolved_ids", "error_ids", "completed_ids", "empty_patch_ids", "incomplete_ids", "schema_version"):
        assert theirs[key] == ours[key], key
    verdicts = {}
    for r in records:
        ours_report = json.loads((run_dir / r["instance_id"] / "report.json").read_text())
        logs = run_dir / "logs" / "run_evaluation" / run_id / "gold" / r["instance_id"]
        keyed = json.loads((logs / "report.json").read_text())[r["instance_id"]]
        assert keyed["resolved"] == ours_report["resolved"]
        assert set(keyed["tests_status"]) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}
        assert (logs / "patch.diff").read_text() == r["patch"]
        spec = SwebenchTestSpec(r["instance_id"], "", [], r["repo"], r["version"], r["FAIL_TO_PASS"], r["PASS_TO_PASS"],
                        PARSERS[r["repo"].split("/")[0]], "pass_and_fail")
        status_map, found = swebench_grading.get_logs_eval(spec, str(logs / "test_output.txt"))
        tests = swebench_grading.get_eval_tests_report(status_map, {"FAIL_TO_PASS": r["FAIL_TO_PASS"],
                                                                    "PASS_TO_PASS": r["PASS_TO_PASS"]})
        resolved_there = found and swebench_grading.get_resolution_status(tests) == "RESOLVED_FULL"
        assert resolved_there == ours_report["resolved"], r["instance_id"]
        # SWE-bench's own grading, applied to its own reading of our report, says the same
        assert (swebench_grading.get_resolution_status(keyed["tests_status"]) == "RESOLVED_FULL") == keyed["resolved"]
        verdicts[r["instance_id"]] = ours_report["status"]
    return verdicts


def test_the_demo_set_from_parquet_with_swebench_flags_is_read_back_by_swebench(tmp_path, cache_dir, engine,
                                                                                  monkeypatch):
    records = [json.loads(line) for line in (demo.DEMO_DIR / "instances.jsonl").read_text().splitlines()]
    run_dir = _swebench_run(tmp_path, cache_dir, "sb-demo", _parquet(records, tmp_path / "set"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["dataset"]["form"] == "parquet" and summary["dataset"]["records"] == len(records)
    verdicts = _check_with_swebench(tmp_path, run_dir, "sb-demo", records, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert verdicts == _jsonl_verdicts(tmp_path, cache_dir, records, "jsonl-demo")
    assert set(verdicts.values()) == {"FULL"}


@pytest.mark.real_instances
@pytest.mark.skipif(SHARED is None, reason="/work/shared/swebench (records and repos/) is not beside the checkout")
def test_a_real_lite_instance_from_parquet_agrees_with_jsonl_and_with_swebench(tmp_path, cache_dir, engine,
                                                                             monkeypatch):
    records = [r for r in map(json.loads, (SHARED / "lite-test.jsonl").read_text().splitlines())
               if r["instance_id"] == REAL]
    repos = ("--repos-dir", str(SHARED / "repos"), "--no-clone")
    run_dir = _swebench_run(tmp_path, cache_dir, "sb-real", _parquet(records, tmp_path / "real"), *repos)
    verdicts = _check_with_swebench(tmp_path, run_dir, "sb-real", records, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert verdicts == _jsonl_verdicts(tmp_path, cache_dir, records, "jsonl-real", *repos) == {REAL: "FULL"}
