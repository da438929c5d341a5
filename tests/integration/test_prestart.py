"""Real containers: the next task's sandbox started while the current task runs
(harness/evaluation/prestart.py), with the verdicts of a run without it and nothing left
behind."""

from __future__ import annotations

import json

from harness.inputs.demo import DEMO_DIR
from tests.conftest import leftover_containers

INSTANCE = "harness-demo__calcly-1"


def _predictions(tmp_path, kinds: list[str]):
    record = next(json.loads(line) for line in (DEMO_DIR / "instances.jsonl").read_text().splitlines()
                  if json.loads(line)["instance_id"] == INSTANCE)
    patches = {"gold": record["patch"], "empty": ""}
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps({"instance_id": INSTANCE, "model_name_or_path": "prestart", "attempt": n,
                                        "model_patch": patches[kind]}) + "\n" for n, kind in enumerate(kinds, 1)))
    return path


def test_later_tasks_run_in_sandboxes_started_before_them_with_the_same_verdicts(tmp_path, harness_run, engine):
    kinds = ["gold", "empty", "gold", "empty", "gold"]
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions",
                      str(_predictions(tmp_path, kinds)), "--max-workers", "1", "--instance-ids", INSTANCE,
                      run_id="prestart")
    assert run.exit_code == 0
    reports = [json.loads((run.root / INSTANCE / f"attempt-{n}" / "report.json").read_text())
               for n in range(1, len(kinds) + 1)]
    assert [r["status"] for r in reports] == ["FULL" if k == "gold" else "NO" for k in kinds]
    prestarted = [bool(r["resources"].get("sandbox_prestarted")) for r in reports]
    # the first task finds its version cold and the second is taken while it runs; from the
    # third on, each task's sandbox was started while the one before ran its tests
    assert prestarted == [False, False, True, True, True]
    assert leftover_containers(engine, "prestart") == []
