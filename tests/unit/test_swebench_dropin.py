"""The drop-in for SWE-bench users, pure parts: swebench's flag names, the dataset forms
(parquet, shards, saved datasets; written here from /work/shared/swebench records when the
tests have them, else from the demo set), SWE-bench's layout and counting rules (checked
against swebench 5.0.2's own ``make_run_report``), and its image names."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.engine.prebuilt import PrebuiltSource
from harness.errors import InputError
from harness.inputs.dataset_sources import materialise, read_dataset
from harness.inputs.instances import load_instances
from harness.swebench import flags, layout
from tests.conftest import PROJECT_ROOT

DEMO = PROJECT_ROOT / "instances" / "demo" / "instances.jsonl"
SHARED = [Path(os.environ["HARNESS_SWEBENCH_DATA"])] if os.environ.get("HARNESS_SWEBENCH_DATA") else []
SHARED += [PROJECT_ROOT.parent / "shared" / "swebench", Path("/work/shared/swebench")]
LITE = next((d / "lite-test.jsonl" for d in SHARED if (d / "lite-test.jsonl").exists()), DEMO)


def _records(count: int = 6) -> list[dict]:
    return [json.loads(line) for line in LITE.read_text().splitlines()[:count]]


def _as_hub_publishes(records: list[dict]) -> list[dict]:
    """The test lists as JSON-encoded strings and a timestamp column, as on the Hub."""
    out = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ("dataset", "split")}
        row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = json.dumps(r["FAIL_TO_PASS"]), json.dumps(r["PASS_TO_PASS"])
        row["created_at"] = dt.datetime(2023, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
        out.append(row)
    return out


# ---------------------------------------------------------------------------- flags

def test_swebench_names_become_ours():
    argv = ["run", "--dataset_name", "lite", "--split", "test", "--predictions_path", "p.jsonl", "--max_workers", "8",
            "--run_id=r1", "--instance_ids", "a", "b", "--timeout", "900", "--cache_level", "env",
            "--report_dir", "out"]
    assert flags.translate(argv) == ["run", "--dataset", "lite", "--split", "test", "--predictions", "p.jsonl",
                                     "--max-workers", "8", "--run-id=r1", "--instance-ids", "a", "b", "--timeout",
                                     "900", "--cache-level", "env", "--report-dir", "out"]
    assert flags.translate(["run", "-d", "x", "-p", "gold", "-id", "r", "-i", "a", "-t", "5", "-s", "dev"]) == [
        "run", "--dataset", "x", "--predictions", "gold", "--run-id", "r", "--instance-ids", "a", "--timeout", "5",
        "--split", "dev"]
    # short names only under run; nothing after "--"
    assert flags.translate(["view", "-p"]) == ["view", "-p"]
    assert flags.translate(["run", "--", "--max_workers"]) == ["run", "--", "--max_workers"]


@pytest.mark.parametrize("argv, word", [(["run", "--force_rebuild", "true"], "content hash"),
                                        (["run", "--clean", "True"], "--cache-level"),
                                        (["run", "--modal=true"], "--executor ray"),
                                        (["run", "--open_file_limit", "4096"], "no file open"),
                                        (["run", "--rewrite_reports", "yes"], "harness report"),
                                        (["run", "--instance_image_tag", "v1"], "digest")])
def test_names_whose_meaning_differs_are_refused_with_the_reason(argv, word):
    with pytest.raises(InputError) as caught:
        flags.translate(argv)
    assert argv[1].split("=")[0] in str(caught.value) and word in str(caught.value)


def test_a_refused_boolean_set_false_asks_for_nothing_and_is_dropped():
    assert flags.translate(["run", "--modal", "false", "--clean=False", "--run_id", "r"]) == ["run", "--run-id", "r"]


def test_the_cli_refuses_a_differing_name_in_one_line(capsys):
    from harness.cli import main
    assert main(["run", "--force_rebuild", "True"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("harness: --force_rebuild (swebench's) is not accepted")


# ---------------------------------------------------------------------------- datasets

def test_a_parquet_file_reads_as_the_jsonl_it_came_from(tmp_path):
    records = _records()
    pq.write_table(pa.Table.from_pylist(_as_hub_publishes(records)), tmp_path / "test.parquet")
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    made = materialise(str(tmp_path / "test.parquet"), "test", tmp_path / "cache")
    assert made.form == "parquet" and made.count == len(records)
    from_parquet = load_instances(made.path, source=made.source)
    from_jsonl = load_instances(jsonl)
    assert not from_parquet.errors and not from_jsonl.errors
    assert [(i.instance_id, i.fail_to_pass, i.pass_to_pass, i.patch, i.test_patch, i.base_commit)
            for i in from_parquet.instances] == [
        (i.instance_id, i.fail_to_pass, i.pass_to_pass, i.patch, i.test_patch, i.base_commit)
        for i in from_jsonl.instances]
    assert from_parquet.instances[0].extra["created_at"] == "2023-01-02T03:04:05+00:00"
    # the same content is the same file
    assert materialise(str(tmp_path / "test.parquet"), "test", tmp_path / "cache").path == made.path


def test_directory_layouts_find_the_split(tmp_path):
    table = pa.Table.from_pylist(_as_hub_publishes(_records(4)))
    hub = tmp_path / "hub"
    (hub / "data").mkdir(parents=True)
    pq.write_table(table.slice(0, 2), hub / "data" / "test-00000-of-00002.parquet")
    pq.write_table(table.slice(2), hub / "data" / "test-00001-of-00002.parquet")
    pq.write_table(table.slice(0, 1), hub / "data" / "dev-00000-of-00001.parquet")
    read = read_dataset(str(hub), "test")
    assert read.form == "parquet shards" and len(read.records) == 4 and len(read.files) == 2
    assert len(read_dataset(str(hub), "dev").records) == 1
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(table, flat / "test.parquet")
    assert len(read_dataset(str(flat), "test").records) == 4
    with pytest.raises(InputError) as caught:
        read_dataset(str(flat), "train")
    assert "no split 'train'" in str(caught.value) and "--split" in str(caught.value)


def test_save_to_disk_directories_are_read_without_the_datasets_library(tmp_path):
    datasets = pytest.importorskip("datasets")  # only to write them: the harness reads them with pyarrow
    rows = _as_hub_publishes(_records(3))
    for row in rows:
        row["created_at"] = row["created_at"].isoformat()
    dataset = datasets.Dataset.from_list(rows)
    datasets.DatasetDict({"test": dataset}).save_to_disk(str(tmp_path / "dict"))
    dataset.save_to_disk(str(tmp_path / "one"))
    for where in ("dict", "one"):
        read = read_dataset(str(tmp_path / where), "test")
        assert read.form == "save_to_disk"
        assert [r["instance_id"] for r in read.records] == [r["instance_id"] for r in rows]
        assert json.loads(read.records[0]["FAIL_TO_PASS"]) == json.loads(rows[0]["FAIL_TO_PASS"])
    with pytest.raises(InputError) as caught:
        read_dataset(str(tmp_path / "dict"), "validation")
    assert "has no split 'validation' (it has: test)" in str(caught.value)


def test_unreadable_input_is_refused_naming_the_file_and_the_field(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError) as caught:
        read_dataset(str(broken))
    assert str(broken) in str(caught.value) and "parquet" in str(caught.value)
    mapped = tmp_path / "mapped.parquet"
    pq.write_table(pa.table({"instance_id": ["a"], "meta": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}),
                   mapped)
    with pytest.raises(InputError) as caught:
        read_dataset(str(mapped))
    assert caught.value.field == "meta" and caught.value.source == str(mapped)
    # a JSON-encoded test list that is not JSON: the record and the field, never evaluated
    row = _as_hub_publishes(_records(1))[0]
    row["FAIL_TO_PASS"] = "__import__('os').system('false')"
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "evil.parquet")
    made = materialise(str(tmp_path / "evil.parquet"), "test", tmp_path / "cache")
    loaded = load_instances(made.path, source=made.source)
    assert not loaded.instances and loaded.errors[0].field == "FAIL_TO_PASS"
    assert loaded.errors[0].record == row["instance_id"] and str(tmp_path / "evil.parquet") in str(loaded.errors[0])


def test_a_hub_name_needs_the_library_or_says_what_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(InputError) as caught:
        read_dataset("SWE-bench/No_Such_Set_Here", "test")
    assert "SWE-bench/No_Such_Set_Here" in str(caught.value) and caught.value.field == "--dataset"
    with pytest.raises(InputError) as caught:
        read_dataset(str(tmp_path / "missing.parquet"))
    assert "no such file" in str(caught.value)


def test_a_hub_dataset_in_the_cache_loads_offline(tmp_path, monkeypatch):
    """The hub path through the datasets library, on a dataset its loader reads from local
    parquet files (the same code path reads the hub's cache)."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pq.write_table(pa.Table.from_pylist(_as_hub_publishes(_records(2))), tmp_path / "test.parquet")
    calls = []
    real = datasets.load_dataset

    def load(name, split):
        calls.append((name, split))
        return real("parquet", data_files={"test": str(tmp_path / "test.parquet")}, split=split)
    monkeypatch.setattr(datasets, "load_dataset", load)
    read = read_dataset("lite", "test")
    assert calls == [("SWE-bench/SWE-bench_Lite", "test")] and read.form == "hub"
    assert [r["instance_id"] for r in read.records] == [r["instance_id"] for r in _records(2)]


# ---------------------------------------------------------------------------- the layout

def _report(instance_id, status, resolved, reason=None, origin=None, applied=True, patch=True):
    return {"instance_id": instance_id, "status": status, "resolved": resolved, "error_reason": reason,
            "error_origin": origin, "patch_is_None": False, "patch_exists": patch,
            "patch_successfully_applied": applied, "test_exit_code": 0 if not reason else None,
            "tests_status": {"FAIL_TO_PASS": {"success": ["t1"] if resolved else [], "failure": [] if resolved
                                              else ["t1"]},
                             "PASS_TO_PASS": {"success": ["t2"], "failure": []}}}


def test_the_layout_counts_as_swebench_make_run_report_does(tmp_path, monkeypatch):
    reporting = pytest.importorskip("swebench.harness.reporting")
    run = tmp_path / "run"
    cases = {"a__a-1": _report("a__a-1", "FULL", True), "a__a-2": _report("a__a-2", "NO", False),
             "a__a-3": _report("a__a-3", "INVALID", False, "patch_apply_failed", "model", applied=False),
             "a__a-4": _report("a__a-4", "INVALID", False, "environment_build_failed", "harness"),
             "a__a-5": _report("a__a-5", "NO", False, patch=False),
             "a__a-7": _report("a__a-7", "INVALID", False, "timeout", "model")}
    for instance_id, report in cases.items():
        (run / instance_id).mkdir(parents=True)
        (run / instance_id / "report.json").write_text(json.dumps(report))
        (run / instance_id / "test_output.txt").write_text("PASSED t1\nPASSED t2\n")
        (run / instance_id / "patch.diff").write_text("diff\n")
    patches = {i: ("" if i == "a__a-5" else "diff\n") for i in cases}
    ids = [*cases, "a__a-6"]  # a-6 has no prediction
    written = layout.write_layout(run, "r1", "org/model", ids, patches, tmp_path / "reports")
    ours = json.loads(written.run_report.read_text())
    assert written.run_report == tmp_path / "reports" / "org__model.r1.json"
    assert ours["resolved_ids"] == ["a__a-1"] and ours["unresolved_ids"] == ["a__a-2", "a__a-3", "a__a-7"]
    assert ours["error_ids"] == ["a__a-4"] and ours["infra_failure_ids"] == ["a__a-4"]
    assert ours["empty_patch_ids"] == ["a__a-5"] and ours["incomplete_ids"] == ["a__a-6"]
    keyed = json.loads((written.logs / "a__a-1" / "report.json").read_text())
    assert list(keyed) == ["a__a-1"] and keyed["a__a-1"]["resolved"] is True
    assert keyed["a__a-1"]["tests_status"]["FAIL_TO_FAIL"] == {"success": [], "failure": []}
    assert keyed["a__a-1"]["tests_status"]["PASS_TO_FAIL"] == {"success": [], "failure": []}
    assert not (written.logs / "a__a-4" / "report.json").exists()
    output = (written.logs / "a__a-7" / "test_output.txt").read_text()
    assert output.startswith(layout.START_TEST_OUTPUT) and layout.TESTS_TIMEOUT in output
    # a re-grade (harness report) that changes a verdict rewrites the layout alike
    (run / "a__a-2" / "report.json").write_text(json.dumps(_report("a__a-2", "FULL", True)))
    assert layout.refresh_layout(run).run_report == written.run_report
    assert json.loads(written.run_report.read_text())["resolved_ids"] == ["a__a-1", "a__a-2"]
    (run / "a__a-2" / "report.json").write_text(json.dumps(cases["a__a-2"]))
    layout.refresh_layout(run)

    monkeypatch.chdir(run)  # SWE-bench reads logs/run_evaluation relative to where it runs
    predictions = {i: {"instance_id": i, "model_name_or_path": "org/model", "model_patch": p}
                   for i, p in patches.items()}
    theirs = json.loads(Path(reporting.make_run_report(predictions, [{"instance_id": i} for i in ids], "r1",
                                                       report_dir=str(tmp_path / "theirs"))).read_text())
    for key in ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "completed_ids",
                "incomplete_ids", "empty_patch_ids", "submitted_ids", "resolved_ids", "unresolved_ids", "error_ids",
                "schema_version"):
        assert theirs[key] == ours[key], key
    from swebench.harness.grading import get_logs_eval
    from swebench.types import TestSpec
    spec = TestSpec("a__a-7", "", [], "a/a", "1", ["t1"], ["t2"], "parse_log_pytest", "pass_and_fail")
    assert get_logs_eval(spec, str(written.logs / "a__a-7" / "test_output.txt")) == ({}, False)


def test_a_model_name_that_cannot_name_a_directory_is_refused():
    assert layout.model_dirname("org/model-1.5") == "org__model-1.5"
    for bad in ("../x", "a b", ""):
        with pytest.raises(InputError):
            layout.model_dirname(bad)


# ---------------------------------------------------------------------------- image names

def test_image_names_are_swebench_s():
    spec = pytest.importorskip("swebench.image_builder.image_spec")
    for instance_id in ("django__django-11099", "sympy__sympy-20590", "harness-demo__calcly-1"):
        for namespace in ("swebench", "127.0.0.1:5000/swebench"):
            theirs = spec.ImageSpec(instance_id=instance_id, dockerfile="FROM x", namespace=namespace).name
            assert PrebuiltSource(namespace).image_name(instance_id) == theirs
        theirs = spec.ImageSpec(instance_id=instance_id, dockerfile="FROM x", namespace=None).name
        assert PrebuiltSource("none").image_name(instance_id) == theirs
    assert PrebuiltSource("swebench").image_name("django__django-11099") == \
        "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    for bad in ("Bad Space", "http://x/y", ""):
        with pytest.raises(InputError):
            PrebuiltSource(bad)
    with pytest.raises(InputError):
        PrebuiltSource("swebench", env_prefix="relative/env")


def test_the_instances_are_given_once_and_prebuilt_env_needs_a_namespace(tmp_path, capsys):
    from harness.cli import main
    common = ["--predictions", "gold", "--output-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "c")]
    assert main(["run", "--instances", str(DEMO), "--dataset", str(DEMO), *common]) == 2
    assert "--instances or --dataset" in capsys.readouterr().err
    assert main(["run", "--dataset", str(tmp_path / "absent.parquet"), *common]) == 2
    assert "no such file" in capsys.readouterr().err
    from harness.swebench.options import prebuilt_source
    import argparse
    with pytest.raises(InputError):
        prebuilt_source(argparse.Namespace(namespace=None, prebuilt_env="/opt/env"))
    assert prebuilt_source(argparse.Namespace(namespace="swebench", prebuilt_env=None)).env_prefix == \
        "/opt/miniconda3/envs/testbed"


def test_without_pyarrow_a_parquet_file_says_which_extra_reads_it(tmp_path, monkeypatch):
    pq.write_table(pa.Table.from_pylist(_as_hub_publishes(_records(1))), tmp_path / "test.parquet")
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # as if not installed
    with pytest.raises(InputError) as caught:
        read_dataset(str(tmp_path / "test.parquet"))
    assert "harness[parquet]" in str(caught.value) and str(tmp_path / "test.parquet") in str(caught.value)
