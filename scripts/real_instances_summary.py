"""Per-repository and per-instance tables of docs/REAL_INSTANCES.md from `harness validate`
directories (one per repository or one for all).

    .venv/bin/python scripts/real_instances_summary.py runs/validate-sphinx runs/validate-astropy ... \
        [--cold-from runs]

Per repository: instances, reference FULL in every repeat, empty patch resolved, instances
with a flaky graded test, instances with a finding (dataset defects are explained by hand
in the doc), cold preparation (the first repeat, which built the images: median and max
of ``timings.prepare_images``) and warm evaluation (median of ``timings.total`` over the
later repeats); an instance named by several directories is reported from the last one. Images are shared between runs, so a validation's first repeat is cold only
for what no earlier run built: ``--cold-from DIR`` scans every report.json under DIR for the
preparations that built an environment ("cold: new version") and those that built only an
instance layer ("cold: further instance"), per repository. Per instance: statuses per repeat, empty status, cold preparation, warm
evaluation and test-command time, interpreter.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def _reports(root: Path, run: str, iid: str) -> dict | None:
    path = root / run / iid / "report.json"
    return json.loads(path.read_text()) if path.exists() else None


def cold_figures(root: Path) -> dict[str, dict[str, list[float]]]:
    """Per repository: seconds of preparations that built an environment, and of those that
    built only the instance layer (from report.json ``image.prepare_seconds``)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"version": [], "instance": []})
    for path in root.rglob("report.json"):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        image = report.get("image") or {}
        seconds = image.get("prepare_seconds")
        if not isinstance(seconds, dict) or not image.get("built"):
            continue
        repo = (report.get("repo") or "").split("/")[-1]
        total = sum(seconds.values())
        out[repo]["version" if seconds.get("environment", 0) > 5 else "instance"].append(total)
    return out


def main(roots: list[Path], cold_root: Path | None = None) -> None:
    """An instance validated in several directories (a later re-validation of some of a
    repository's instances) is reported from the last directory naming it."""
    rows_by_id: dict[str, tuple[str, dict]] = {}
    for root in roots:
        validity = json.loads((root / "validity.json").read_text())
        repeats = sorted(p.name for p in root.glob("*gold-*") if p.is_dir())
        for iid, row in validity["instances"].items():
            gold = [r for r in (_reports(root, run, iid) for run in repeats) if r]
            first = gold[0] if gold else {}
            later = gold[1:] or gold
            repo = (first.get("repo") or iid.split("__")[0]).split("/")[-1]
            rows_by_id[iid] = (repo, {
                "id": iid, "row": row, "source": str(root),
                "cold": (first.get("timings") or {}).get("prepare_images"),
                "warm": statistics.median(r["timings"].get("total", 0.0) for r in later) if later else None,
                "tests": statistics.median(r["timings"].get("tests", 0.0) for r in later) if later else None,
                "python": ((first.get("image") or {}).get("interpreter") or {}).get("version", "?"),
            })
    per_repo: dict[str, list[dict]] = defaultdict(list)
    for repo, data in rows_by_id.values():
        per_repo[repo].append(data)
    print("| repository | instances | reference FULL 3/3 | empty resolved | flaky | with findings "
          "| cold prepare s (median / max) | warm evaluation s (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0, 0]
    for repo, rows in sorted(per_repo.items()):
        full = sum(r["row"]["reference_full"] for r in rows)
        empty = sum(bool(r["row"].get("empty_resolved")) for r in rows)
        flaky = sum(bool(r["row"].get("flaky_tests")) for r in rows)
        findings = sum(bool(r["row"].get("reasons")) for r in rows)
        colds = [r["cold"] for r in rows if r["cold"] is not None]
        warms = [r["warm"] for r in rows if r["warm"] is not None]
        for i, v in enumerate((len(rows), full, empty, flaky, findings)):
            totals[i] += v
        print(f"| {repo} | {len(rows)} | {full} | {empty} | {flaky} | {findings} | "
              f"{statistics.median(colds):.0f} / {max(colds):.0f} | {statistics.median(warms):.1f} |"
              if colds and warms else f"| {repo} | {len(rows)} | {full} | {empty} | {flaky} | {findings} | – | – |")
    print(f"| **all** | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | {totals[4]} | | |")
    if cold_root is not None:
        print()
        print("| repository | cold: new version, s (median / max, n) | cold: further instance, s (median / max, n) |")
        print("|---|---:|---:|")
        for repo, figures in sorted(cold_figures(cold_root).items()):
            cells = []
            for kind in ("version", "instance"):
                values = figures[kind]
                cells.append(f"{statistics.median(values):.0f} / {max(values):.0f} ({len(values)})" if values else "–")
            print(f"| {repo} | {cells[0]} | {cells[1]} |")
    print()
    print("| instance | Python | reference (per repeat) | empty | cold prepare s | warm eval s | tests s |")
    print("|---|---|---|---|---:|---:|---:|")
    for _repo, rows in sorted(per_repo.items()):
        for r in rows:
            print(f"| {r['id']} | {r['python']} | {' '.join(r['row']['reference_statuses'])} | "
                  f"{r['row']['empty_status']} | {r['cold'] or 0:.1f} | {r['warm'] or 0:.1f} | {r['tests'] or 0:.1f} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    cold = None
    if "--cold-from" in args:
        index = args.index("--cold-from")
        cold = Path(args[index + 1])
        del args[index:index + 2]
    main([Path(p) for p in args], cold)
