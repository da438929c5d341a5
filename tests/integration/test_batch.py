"""Batch behaviour against the real engine: a broken instance does not stop the batch,
kill -9 and resume, re-evaluation when inputs change, retries only for infrastructure
faults, pinned manifests, and re-grading from saved outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from harness.inputs.demo import DEMO_DIR
from tests.conftest import leftover_containers
from tests.patchgen import demo_instance, write_predictions

IDS = ["harness-demo__calcly-1", "harness-demo__calcly-2", "harness-demo__textkit-1", "harness-demo__inventory-1"]


def _records(copies: int) -> list[dict]:
    out = []
    for n in range(copies):
        for iid in IDS:
            record = dict(demo_instance(iid))
            record["instance_id"] = f"{iid}-copy{n}"
            out.append(record)
    return out


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_broken_instance_does_not_stop_the_batch(harness_run, tmp_path, engine):
    records = _records(1)
    records[1]["repo"] = "harness-demo/does-not-exist"
    run = harness_run("--instances", _write(tmp_path / "i.jsonl", records), "--predictions", "gold",
                      "--no-clone", run_id="broken")
    summary = run.summary
    broken = records[1]["instance_id"]
    assert summary["error_ids"] == [broken]
    assert summary["resolved_ids"] == sorted(r["instance_id"] for r in records if r["instance_id"] != broken)
    report = run.report(broken)
    assert report["error_reason"] in ("malformed_instance", "repository_unavailable")
    assert "does-not-exist" in report["error_detail"]
    assert leftover_containers(engine, "broken") == []


def test_kill_dash_nine_then_rerun_gives_the_uninterrupted_results(tmp_path, cache_dir, engine):
    instances = _write(tmp_path / "i.jsonl", _records(3))
    preds = str(DEMO_DIR / "predictions-extra.jsonl")
    # predictions for the copies: map each copy to the same demo prediction
    extra = {json.loads(l)["instance_id"]: json.loads(l)["model_patch"]
             for l in (DEMO_DIR / "predictions-extra.jsonl").read_text().splitlines()}
    preds = write_predictions(tmp_path / "p.jsonl",
                              {r["instance_id"]: extra[r["instance_id"].rsplit("-copy", 1)[0]] for r in _records(3)})
    out = tmp_path / "runs"
    base = [sys.executable, "-m", "harness.cli", "run", "--instances", instances, "--predictions", str(preds),
            "--output-dir", str(out), "--cache-dir", str(cache_dir), "--quiet"]
    uninterrupted = subprocess.run([*base, "--run-id", "whole"], capture_output=True, text=True, timeout=600)
    assert uninterrupted.returncode == 0, uninterrupted.stderr

    proc = subprocess.Popen([*base, "--run-id", "killed"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list((out / "killed").glob("*/report.json"))) < 4:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((out / "killed").glob("*/report.json")))
    assert 4 <= done_before < 12, "the run was not killed in the middle"
    assert not (out / "killed" / "summary.json").exists()
    for report in (out / "killed").glob("*/report.json"):  # no half-written report
        json.loads(report.read_text())

    rerun = subprocess.run([*base, "--run-id", "killed"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr

    def verdicts(run: str) -> dict:
        return {p.parent.name: (d["status"], d["error_reason"], d["tests_status"])
                for p in (out / run).glob("*/report.json") for d in [json.loads(p.read_text())]}

    assert verdicts("killed") == verdicts("whole")
    whole, killed = (json.loads((out / r / "summary.json").read_text()) for r in ("whole", "killed"))
    for key in ("resolved_ids", "unresolved_ids", "error_ids", "invalid_ids"):
        assert whole[key] == killed[key]
    assert leftover_containers(engine, "whole", "killed") == []
    log = [json.loads(l) for l in (out / "killed" / "harness.log").read_text().splitlines()]
    reused = {e["instance_id"] for e in log if e.get("event") == "instance.reused"}
    assert len(reused) >= done_before - 1  # finished ones were not evaluated again


def test_sigterm_stops_the_run_like_ctrl_c_and_a_rerun_finishes_it(tmp_path, cache_dir, engine):
    """SIGTERM mid-run (a scheduler, ``timeout``, ``kill``): the run's containers are removed,
    the command exits 143 without a traceback, the finished reports stay, and the same
    command afterwards finishes the run with the demo's expected verdicts."""
    expected = json.loads((DEMO_DIR / "expected.json").read_text())["predictions-extra.jsonl"]
    extra = {json.loads(l)["instance_id"]: json.loads(l)["model_patch"]
             for l in (DEMO_DIR / "predictions-extra.jsonl").read_text().splitlines()}
    records = _records(2)
    instances = _write(tmp_path / "i.jsonl", records)
    preds = write_predictions(tmp_path / "p.jsonl",
                              {r["instance_id"]: extra[r["instance_id"].rsplit("-copy", 1)[0]] for r in records})
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "harness.cli", "run", "--instances", instances, "--predictions", str(preds),
               "--output-dir", str(out), "--cache-dir", str(cache_dir), "--quiet", "--max-workers", "2",
               "--run-id", "termed"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (len(list((out / "termed").glob("*/report.json"))) >= 2
                                                   and leftover_containers(engine, "termed")):
            time.sleep(0.05)
        assert leftover_containers(engine, "termed"), "no evaluation was running when the signal was to be sent"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr and "interrupted (SIGTERM)" in stderr, stderr[-3000:]
    assert leftover_containers(engine, "termed") == []
    assert not (out / "termed" / "summary.json").exists()
    finished = len(list((out / "termed").glob("*/report.json")))
    assert 2 <= finished < len(records), "the run was not stopped in the middle"

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    verdicts = {p.parent.name: (d["status"], d["error_reason"])
                for p in (out / "termed").glob("*/report.json") for d in [json.loads(p.read_text())]}
    assert verdicts == {r["instance_id"]: (expected[r["instance_id"].rsplit("-copy", 1)[0]]["status"],
                                          expected[r["instance_id"].rsplit("-copy", 1)[0]]["error_reason"])
                        for r in records}
    assert leftover_containers(engine, "termed") == []


def test_a_changed_patch_under_the_same_run_id_is_re_evaluated(harness_run, tmp_path):
    iid = "harness-demo__calcly-1"
    instances = _write(tmp_path / "i.jsonl", [demo_instance(iid)])
    gold = demo_instance(iid)["patch"]
    first = harness_run("--instances", instances, "--predictions",
                        str(write_predictions(tmp_path / "a.jsonl", {iid: gold})), run_id="same")
    assert first.report(iid)["status"] == "FULL"
    again = harness_run("--instances", instances, "--predictions",
                        str(write_predictions(tmp_path / "a.jsonl", {iid: gold})), run_id="same")
    log = (again.root / "harness.log").read_text()
    assert '"instance.reused"' in log
    changed = harness_run("--instances", instances, "--predictions",
                          str(write_predictions(tmp_path / "b.jsonl", {iid: ""})), run_id="same")
    assert changed.report(iid)["status"] == "NO"
    forced = harness_run("--instances", instances, "--predictions",
                         str(write_predictions(tmp_path / "b.jsonl", {iid: ""})), "--force", run_id="same")
    assert forced.report(iid)["status"] == "NO"
    assert (forced.root / "harness.log").read_text().count('"instance.reused"') == 1  # only the 2nd run reused


def test_infrastructure_faults_are_retried_and_test_failures_are_not(harness_run, tmp_path, monkeypatch):
    """A fault is injected into the engine edge (starting a container fails twice); the
    evaluation is retried and succeeds. Verdicts that are the model's are never retried."""
    from harness.engine import sandbox as sandbox_module
    from harness.errors import InfrastructureError

    real_start = sandbox_module.DockerBackend.start
    calls = {"n": 0}

    def flaky_start(self, image, name_hint="", **kwargs):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise InfrastructureError("injected: engine API error")
        return real_start(self, image, name_hint, **kwargs)

    monkeypatch.setattr(sandbox_module.DockerBackend, "start", flaky_start)
    iid = "harness-demo__calcly-1"
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                      "--instance-ids", iid, run_id="retry")
    report = run.report(iid)
    assert report["status"] == "FULL"
    assert [a["error"] for a in report["attempts"]] == ["InfrastructureError", "InfrastructureError"]
    assert calls["n"] == 3

    calls["n"] = 10  # no more faults
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions",
                      str(DEMO_DIR / "predictions.jsonl"), run_id="noretry")
    for report_path in run.root.glob("*/report.json"):
        report = json.loads(report_path.read_text())
        assert report["attempts"] == [], report["instance_id"]  # NO, PARTIAL, patch_apply_failed: no retry
    assert calls["n"] == 10 + 4


def test_infrastructure_faults_that_persist_become_a_harness_error(harness_run, monkeypatch):
    from harness.engine import sandbox as sandbox_module
    from harness.errors import InfrastructureError

    def always_fail(self, image, name_hint="", **kwargs):
        raise InfrastructureError("injected: engine unavailable")

    monkeypatch.setattr(sandbox_module.DockerBackend, "start", always_fail)
    iid = "harness-demo__textkit-1"
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                      "--instance-ids", iid, run_id="retry-exhausted")
    report = run.report(iid)
    assert report["status"] == "INVALID" and report["error_origin"] == "harness"
    assert len(report["attempts"]) == 3
    assert run.summary["error_ids"] == [iid]


def test_a_pinned_manifest_refuses_changed_inputs(harness_run, tmp_path, capsys):
    iid = "harness-demo__calcly-1"
    first = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                        "--instance-ids", iid, run_id="pinned")
    manifest = first.root / "manifest.json"
    pins = json.loads(manifest.read_text())["tasks"][iid]
    assert pins["image_id"].startswith("sha256:") and pins["base_packages_sha256"]
    same = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                       "--instance-ids", iid, "--manifest", str(manifest), run_id="pinned-again")
    assert same.exit_code == 0 and same.report(iid)["status"] == "FULL"
    capsys.readouterr()
    changed = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "empty",
                          "--instance-ids", iid, "--timeout", "33", "--manifest", str(manifest),
                          run_id="pinned-changed")
    err = capsys.readouterr().err
    assert changed.exit_code == 2
    assert f"{iid}: patch is" in err and "grading configuration differs" in err
    assert not (changed.root / iid / "report.json").exists()


def test_report_regrades_from_saved_outputs(harness_run):
    iid = "harness-demo__calcly-1"
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                      "--instance-ids", iid, run_id="regrade")
    assert run.report(iid)["status"] == "FULL"
    # Tamper with the saved evidence: one F2P test now fails in the JUnit report.
    xml_path = run.root / iid / "results.xml"
    xml = xml_path.read_text()
    target = 'name="test_even_length"'
    assert target in xml
    xml = xml.replace(target + ' time=', target + ' time=', 1)
    head, tail = xml.split(target, 1)
    close = tail.index("/>")
    xml = head + target + tail[:close] + '><failure message="x">x</failure></testcase>' + tail[close + 2:]
    xml_path.write_text(xml)
    from harness.cli import main
    assert main(["report", str(run.root)]) == 0
    # The text summary still says PASSED: the two sources disagree, so the evidence is void.
    report = run.report(iid)
    assert (report["status"], report["error_reason"]) == ("INVALID", "ambiguous_results")
    output_path = run.root / iid / "test_output.txt"
    line = "PASSED tests/test_stats.py::TestMedian::test_even_length\n"
    assert line in output_path.read_text()
    output_path.write_text(output_path.read_text().replace(line, "FAILED tests/test_stats.py::TestMedian::test_even_length\n"))
    assert main(["report", str(run.root)]) == 0
    # ...and the runner's own reports (events.jsonl) still say it passed: still void.
    assert run.report(iid)["error_reason"] == "ambiguous_results"
    events = run.root / iid / "events.jsonl"
    passed = '"id":"tests/test_stats.py::TestMedian::test_even_length","when":"call","outcome":"passed"'
    assert passed in events.read_text()
    events.write_text(events.read_text().replace(passed, passed.replace(':"passed"', ':"failed"')))
    assert main(["report", str(run.root)]) == 0
    report = run.report(iid)
    assert report["status"] == "PARTIAL"
    assert "tests/test_stats.py::TestMedian::test_even_length" in report["tests_status"]["FAIL_TO_PASS"]["failure"]
    assert run.summary["regraded_changed_ids"] == [iid]


def test_images_list_shows_the_layers(engine, harness_run):
    harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                "--instance-ids", "harness-demo__calcly-1", run_id="images")
    from harness.imagecache.inventory import read_engine
    kinds = {image.kind for image in read_engine(engine).images if image.tags}
    assert {"base", "env", "inst"} <= kinds
