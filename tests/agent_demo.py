"""An agent's predictions for the demo set, three attempts per instance, and the figures
its graded run must show, computed by hand (tests/integration/test_agent_metrics_demo.py
checks summary.json, tests/browser/test_agent_report.py the pages).

Each attempt's patch is the instance's reference patch (FULL), an empty patch (NO) or the
demo's wrong patch for textkit-1 (NO), so the verdicts are known before grading:

=================  =========  =========  =========  ===
instance           attempt 1  attempt 2  attempt 3  c
=================  =========  =========  =========  ===
calcly-1           gold       gold       gold       3
calcly-2           gold       empty      empty      1
textkit-1          wrong      gold       empty      1
inventory-1        empty      empty      empty      0
=================  =========  =========  =========  ===
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.inputs.demo import DEMO_DIR

INSTANCES = DEMO_DIR / "instances.jsonl"
MODEL = "mini-swe-agent-1.15.0__scripted-model"

#: (patch kind, cost, calls, steps, agent seconds, exit status) per attempt
PLAN = {
    "harness-demo__calcly-1": [("gold", 0.10, 3, 4, 12.5, "Submitted"), ("gold", 0.20, 4, 6, 20.0, "Submitted"),
                               ("gold", 0.30, 5, 8, 31.0, "Submitted")],
    "harness-demo__calcly-2": [("gold", 0.05, 2, 3, 9.0, "Submitted"), ("empty", 0.40, 9, 15, 60.0, "LimitsExceeded"),
                               ("empty", 0.40, 9, 15, 58.5, "LimitsExceeded")],
    "harness-demo__textkit-1": [("wrong", 0.25, 6, 11, 40.0, "Submitted"), ("gold", 0.15, 4, 7, 22.0, "Submitted"),
                                ("empty", 0.35, 12, 20, 90.0, "WallTimeExceeded")],
    "harness-demo__inventory-1": [("empty", 0.50, 14, 25, 100.0, "LimitsExceeded"),
                                  ("empty", 0.50, 14, 25, 101.0, "LimitsExceeded"),
                                  ("empty", 0.50, 16, 30, 120.0, "ScaffoldError")],
}
VERDICTS = {"gold": "FULL", "empty": "NO", "wrong": "NO"}

# By hand, from the table above (c = resolved attempts of n = 3 per instance: 3, 1, 1, 0):
#   pass@1 = mean(c/3) = (1 + 1/3 + 1/3 + 0)/4 = 5/12
#   pass@3 = share of instances with c >= 1 = 3/4
#   pass^3 = share of instances with c = 3 = 1/4
#   resolved, first attempt: calcly-1 and calcly-2 = 2 of 4
#   cost: 0.6 + 0.85 + 0.75 + 1.5 = 3.7 over the 3 instances some attempt resolved = 1.2333...
#   steps sorted: 3 4 6 7 8 11 15 15 20 25 25 30; p95 at position 0.95 * 11 = 10.45:
#   25 + 0.45 * (30 - 25) = 27.25; p50 at position 5.5: 11 + 0.5 * 4 = 13
EXPECTED = {"pass@1": 5 / 12, "pass@3": 3 / 4, "pass^3": 1 / 4, "resolved_first": 2, "cost_total": 3.7,
            "cost_per_resolved": 3.7 / 3, "steps_p95": 27.25, "steps_p50": 13.0, "steps_max": 30}
#: how the run page shows them
SHOWN = {"pass_at_1": "41.7%", "pass_at_3": "75.0%", "pass_hat_3": "25.0%", "cost_per_resolved": "1.233",
         "steps_p95": "27.25", "steps_p50": "13", "resolved_rate": "50.0%"}


def write_predictions(path: Path) -> Path:
    """The predictions file (SWE-bench's format with ``attempt`` and the agent fields)."""
    records = {r["instance_id"]: r for r in map(json.loads, INSTANCES.read_text().splitlines())}
    demo = {r["instance_id"]: r for r in map(json.loads, (DEMO_DIR / "predictions.jsonl").read_text().splitlines())}
    lines = []
    for instance_id, attempts in PLAN.items():
        for number, (kind, cost, calls, steps, seconds, status) in enumerate(attempts, start=1):
            patch = {"gold": records[instance_id]["patch"], "empty": "",
                     "wrong": demo[instance_id]["model_patch"] if kind == "wrong" else None}[kind]
            lines.append(json.dumps({"instance_id": instance_id, "model_name_or_path": MODEL, "model_patch": patch,
                                     "attempt": number, "cost": cost, "calls": calls, "steps": steps,
                                     "agent_seconds": seconds, "exit_status": status}))
    path.write_text("\n".join(lines) + "\n")
    return path


def grade(root: Path, cache: Path, run_id: str = "agent-demo") -> Path:
    """Grade the predictions with the real engine (``harness run``); the run directory."""
    from harness.cli import main
    predictions = write_predictions(root / "agent-predictions.jsonl")
    code = main(["run", "--instances", str(INSTANCES), "--predictions", str(predictions), "--run-id", run_id,
                 "--output-dir", str(root), "--cache-dir", str(cache), "--quiet"])
    assert code == 0
    return root / run_id
