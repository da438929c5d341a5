"""A whole run through the Python API (harness.evaluate), no command line: the progress
events, the returned result and the files on disk agree, on the embedded demo set."""

from __future__ import annotations

import json

import harness
from harness.inputs.demo import DEMO_DIR

EXPECTED = json.loads((DEMO_DIR / "expected.json").read_text())
INSTANCES = DEMO_DIR / "instances.jsonl"


def _on_disk(run_dir) -> dict[str, tuple[str, str | None]]:
    out = {}
    for path in sorted(run_dir.glob("*/report.json")):
        data = json.loads(path.read_text())
        out[data["instance_id"]] = (data["status"], data["error_reason"])
    return out


def test_evaluate_grades_the_demo_set_and_reports_each_instance_once(tmp_path, cache_dir, engine):
    events: list[harness.ProgressEvent] = []
    started: list[int] = []
    result = harness.evaluate(INSTANCES, DEMO_DIR / "predictions.jsonl", run_id="api", output_dir=tmp_path,
                              cache_dir=cache_dir, on_start=started.append, on_progress=events.append, quiet=True)

    expected = {iid: (e["status"], e.get("error_reason")) for iid, e in EXPECTED["predictions.jsonl"].items()}
    assert expected == {"harness-demo__calcly-1": ("FULL", None), "harness-demo__calcly-2": ("PARTIAL", None),
                        "harness-demo__inventory-1": ("INVALID", "patch_apply_failed"),
                        "harness-demo__textkit-1": ("NO", None)}
    assert started == [len(expected)]
    assert sorted(e.instance_id for e in events) == sorted(expected)  # each instance once
    assert [e.done for e in events] == list(range(1, len(expected) + 1))
    assert {e.total for e in events} == {len(expected)}
    seen = {e.instance_id: (e.status.value, e.error_reason.value if e.error_reason else None) for e in events}
    returned = {r.instance_id: (r.status.value, r.error_reason.value if r.error_reason else None)
                for r in result.results}
    assert seen == returned == _on_disk(result.run_dir) == expected
    assert {e.instance_id: e.resolved for e in events} == {i: e["resolved"]
                                                           for i, e in EXPECTED["predictions.jsonl"].items()}

    assert result.run_dir == tmp_path / "api" and result.run_id == "api"
    on_disk = json.loads((result.run_dir / "summary.json").read_text())
    assert on_disk == result.summary
    assert result.summary["resolved_ids"] == ["harness-demo__calcly-1"]
    assert result.summary["total_instances"] == len(expected)
    assert (result.run_dir / "manifest.json").is_file()
    assert result.pages.error is None and result.pages.page == result.run_dir / "report.html"
    assert result.pages.page.is_file()


def test_evaluate_takes_records_and_a_mapping_of_patches(tmp_path, cache_dir, engine):
    records = [json.loads(line) for line in INSTANCES.read_text().splitlines() if line.strip()]
    chosen = [r for r in records if r["instance_id"] == "harness-demo__calcly-1"]
    patches = {"harness-demo__calcly-1": chosen[0]["patch"]}
    result = harness.evaluate(chosen, patches, model="api-model", run_id="records", output_dir=tmp_path,
                              cache_dir=cache_dir, quiet=True,
                              limits=harness.RunLimits(timeout=300))
    assert _on_disk(result.run_dir) == {"harness-demo__calcly-1": ("FULL", None)}
    assert result.summary["model_name_or_path"] == "api-model"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    # the records and the patches are pinned by content, as a file's would be
    for key in ("instances_file", "predictions"):
        assert manifest["inputs"][key] == result.summary[key]
        assert manifest["inputs"][key].startswith(str(cache_dir / "session-inputs")), key
