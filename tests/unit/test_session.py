"""harness.run.session's pure parts: how records and mappings become the run's pinned input
files, what it refuses, the progress events' order, and the lazy package exports."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.grading.status import InstanceStatus
from harness.results.report import InstanceResult
from harness.run.session import ProgressEvent, _predictions_arg, _Reporter


def test_a_mapping_of_patches_becomes_a_predictions_file_the_loader_reads(tmp_path):
    from harness.inputs.predictions import load_predictions
    path = _predictions_arg({"a__b-1": "diff --git a/x b/x\n", "a__b-2": None}, "m", tmp_path)
    loaded = load_predictions(Path(path))
    assert loaded.errors == []
    assert {(p.instance_id, p.model_name_or_path, p.model_patch) for p in loaded.predictions} == {
        ("a__b-1", "m", "diff --git a/x b/x\n"), ("a__b-2", "m", None)}
    # the same patches: the same file (a pinned manifest still matches); others: another
    assert _predictions_arg({"a__b-1": "diff --git a/x b/x\n", "a__b-2": None}, "m", tmp_path) == path
    assert _predictions_arg({"a__b-1": "other"}, "m", tmp_path) != path


def test_words_and_paths_pass_through(tmp_path):
    assert _predictions_arg("gold", None, tmp_path) == "gold"
    assert _predictions_arg("empty", None, tmp_path) == "empty"
    assert _predictions_arg(tmp_path / "p.jsonl", None, tmp_path) == str(tmp_path / "p.jsonl")


def test_predictions_of_another_kind_are_refused(tmp_path):
    with pytest.raises(InputError, match="predictions"):
        _predictions_arg(["not", "a", "mapping"], None, tmp_path)


def test_records_that_are_not_json_data_are_refused(tmp_path):
    from harness.run.session import _instances_file
    with pytest.raises(InputError, match="not JSON data"):
        _instances_file([{"instance_id": object()}], tmp_path)
    written = _instances_file([{"instance_id": "a__b-1"}], tmp_path)
    assert [json.loads(line) for line in written.read_text().splitlines()] == [{"instance_id": "a__b-1"}]


def test_progress_events_count_up_one_at_a_time_from_many_threads():
    events: list[ProgressEvent] = []
    pages: list[str] = []
    reporter = _Reporter(40, lambda r: pages.append(r.instance_id), events.append)
    results = [InstanceResult(f"o__r-{n}", "o/r", "m", InstanceStatus.NO) for n in range(40)]
    threads = [threading.Thread(target=reporter, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e.done for e in events] == list(range(1, 41))
    assert {e.total for e in events} == {40}
    assert sorted(e.instance_id for e in events) == sorted(pages) == sorted(r.instance_id for r in results)
    assert all(e.result.instance_id == e.instance_id and e.status is InstanceStatus.NO for e in events)


def test_the_package_exports_the_session_api_without_importing_it_eagerly():
    code = ("import sys, harness; assert 'harness.run.session' not in sys.modules; "
            "f = harness.evaluate; import harness.run.session as s; assert f is s.evaluate; "
            "assert harness.RunResult is s.RunResult and harness.ProgressEvent is s.ProgressEvent")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        import harness
        harness.no_such_name  # noqa: B018


def test_the_cli_shows_where_an_incomplete_run_went_and_exits_3(tmp_path, monkeypatch, capsys):
    """The infrastructure fault is injected (a lost engine needs a dying engine): the
    command still names the run directory and the report, then says one line, exit 3."""
    import harness.run.session as session
    from harness.cli import main
    from harness.errors import RunIncomplete
    from harness.paths import RunPaths
    paths = RunPaths.create(tmp_path / "runs", "lost")
    written = session.RunResult("lost", {"run_id": "lost"}, [], paths,
                                session.PagesWritten(paths.root / "report.html"))
    seen = {}

    def lose_the_engine(instances, predictions, **options):
        seen.update(options, instances=instances, predictions=predictions)
        raise RunIncomplete("the Docker engine stopped answering: 2 evaluation(s) recorded as engine_lost",
                            result=written)
    monkeypatch.setattr(session, "evaluate", lose_the_engine)
    instances = tmp_path / "instances.jsonl"
    instances.write_text("")
    code = main(["run", "--instances", str(instances), "--predictions", "gold", "--run-id", "lost", "--quiet",
                 "--output-dir", str(tmp_path / "runs"), "--timeout", "30", "--no-clone"])
    out, err = capsys.readouterr()
    assert code == 3
    assert f"run directory: {paths.root}" in out and f"report: {paths.root / 'report.html'}" in out
    assert err.strip().splitlines() == ["harness: the Docker engine stopped answering: 2 evaluation(s) "
                                        "recorded as engine_lost"]
    # the flags arrive as the session's typed options
    assert seen["predictions"] == "gold" and seen["run_id"] == "lost"
    assert seen["limits"] == session.RunLimits(timeout=30, task_timeout=7200.0, cpus=None)
    assert seen["repositories"] == session.Repositories(None, {}, clone=False)
