"""Print the per-instance table of docs/REAL_INSTANCES.md from a `harness validate` directory.

    .venv/bin/python scripts/real_instances_table.py runs/validate-lite

Columns: reference-patch statuses per repeat, empty-patch status, image build time (the
first repeat built the instance layer; environment layers are shared), evaluation wall
time and test-command time (median over repeats), and the instance image's size (total
and the bytes no other image shares), read from the engine.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import docker


def main(root: Path) -> None:
    validity = json.loads((root / "validity.json").read_text())
    repeats = sorted(p for p in root.glob("*gold-*") if p.is_dir())
    sizes = {}
    for item in docker.from_env().df().get("Images") or []:
        for tag in item.get("RepoTags") or []:
            sizes[tag] = (int(item.get("Size") or 0), int(item.get("Size") or 0) - int(item.get("SharedSize") or 0))
    print("| instance | reference (per repeat) | empty | instance image build s | eval wall s (median) "
          "| tests s (median) | image MB | unique MB |")
    print("|---|---|---|---|---|---|---|---|")
    for iid, row in validity["instances"].items():
        reports = [json.loads((r / iid / "report.json").read_text()) for r in repeats if (r / iid / "report.json").exists()]
        build = reports[0]["image"].get("build_seconds", 0.0) if reports else 0.0
        wall = statistics.median(r["timings"].get("total", 0.0) for r in reports) if reports else 0.0
        tests = statistics.median(r["timings"].get("tests", 0.0) for r in reports) if reports else 0.0
        tag = reports[0]["image"].get("tag") if reports else None
        size, unique = sizes.get(tag, (0, 0))
        print(f"| {iid} | {' '.join(row['reference_statuses'])} | {row['empty_status']} | {build:.1f} | {wall:.2f} "
              f"| {tests:.2f} | {size / 1e6:.0f} | {unique / 1e6:.1f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
