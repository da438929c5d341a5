"""The fixed cost of an evaluation inside a batch: what a run spends around each test command
when evaluations follow one another (one worker), this checkout against another, side by side.

``overhead.py`` times one instance per ``harness run``, which is what a single evaluation
costs. In a batch the next task's sandbox can be started while the current tests run
(harness/evaluation/prestart.py), which a single run cannot show. Here each side runs the
same instance ``--attempts`` times in one ``harness run --max-workers 1`` (the reference
patch as every attempt), sides alternating, for ``--rounds`` rounds; for every attempt,
*around the tests* = report.json ``timings.wall`` minus the test command's own duration.
Attempts 1 and 2 cannot be readied ahead (the version is cold when the second is taken), so
the medians are given over attempts 3 and later, and over all.

    .venv/bin/python benchmarks/batch_fixed_cost.py --instances X.jsonl --repos-dir DIR \\
        --instance-ids ID ... [--attempts 6] [--rounds 2] [--before CHECKOUT] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=Path, required=True)
    p.add_argument("--instance-ids", nargs="+", required=True)
    p.add_argument("--repos-dir", type=Path)
    p.add_argument("--attempts", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--before", type=Path, help="another checkout, timed in the same rounds")
    p.add_argument("--cache-dir", type=Path, default=Path("~/.cache/harness").expanduser())
    p.add_argument("--runs-dir", type=Path)
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def attempts_of(run_dir: Path, instance_id: str) -> list[dict]:
    """The attempts' reports of one instance, in attempt order."""
    directory = run_dir / instance_id
    reports = [json.loads(p.read_text()) for p in directory.glob("attempt-*/report.json")]
    return sorted(reports, key=lambda r: r.get("attempt") or 0)


def around(report: dict) -> float:
    tests = sum(c["duration"] for c in report["commands"] if c["phase"] == "tests")
    return report["timings"]["wall"] - tests


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="harness-bench-batch-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    records = {json.loads(line)["instance_id"]: json.loads(line)
               for line in args.instances.read_text().splitlines() if line.strip()}
    sides = {"after": None, **({"before": args.before.resolve()} if args.before else {})}
    predictions = {}
    for iid in args.instance_ids:
        predictions[iid] = C.write_jsonl(runs_dir / f"predictions-{iid}.jsonl", [
            {"instance_id": iid, "model_name_or_path": "batch-bench", "attempt": n, "model_patch": records[iid]["patch"]}
            for n in range(1, args.attempts + 1)])

    def run(side: str, iid: str, run_id: str) -> C.CliRun:
        extra = ["--force", "--instance-ids", iid, "--max-workers", "1"]
        res = C.run_cli(C.harness_args(instances=args.instances.resolve(), predictions=str(predictions[iid]),
                                       run_id=run_id, output_dir=runs_dir, cache_dir=args.cache_dir,
                                       repos_dir=args.repos_dir, extra=[*extra, "--no-clone"]),
                        checkout=sides[side])
        if res.returncode != 0:
            raise SystemExit(f"{side} {iid}: harness run failed:\n{res.stderr[-3000:]}")
        return res

    for side in sides:          # warm: every image of both sides built before anything is timed
        for iid in args.instance_ids:
            print(f"warm-up {side} {iid} ...", file=sys.stderr)
            run(side, iid, f"warm-{side}-{iid}")

    samples: dict[str, dict[str, list[dict]]] = {iid: {s: [] for s in sides} for iid in args.instance_ids}
    for rnd in range(args.rounds):
        order = list(sides) if rnd % 2 == 0 else list(reversed(list(sides)))
        for iid in args.instance_ids:
            for side in order:
                run_id = f"r{rnd}-{side}-{iid}"
                cli = run(side, iid, run_id)
                for report in attempts_of(runs_dir / run_id, iid):
                    samples[iid][side].append({
                        "round": rnd, "attempt": report.get("attempt"), "status": report["status"],
                        "around": round(around(report), 4), "wall": report["timings"]["wall"],
                        "prestarted": bool((report.get("resources") or {}).get("sandbox_prestarted")),
                        "timings": report["timings"], "step_seconds": (report.get("resources") or {}).get(
                            "step_seconds")})
                samples[iid][side][-1]["cli_seconds"] = round(cli.elapsed, 3)

    rows, summary = [], {}
    for iid in args.instance_ids:
        for side in sides:
            got = samples[iid][side]
            later = [s["around"] for s in got if (s["attempt"] or 0) >= 3]
            summary[f"{iid}/{side}"] = {
                "median_around_attempt_3_on": C.median(later), "median_around_all": C.median(s["around"] for s in got),
                "prestarted": sum(s["prestarted"] for s in got), "attempts": len(got),
                "statuses": sorted({s["status"] for s in got})}
            row = summary[f"{iid}/{side}"]
            rows.append([iid, side, C.fmt(row["median_around_attempt_3_on"]), C.fmt(row["median_around_all"]),
                         f"{row['prestarted']} of {row['attempts']}", ", ".join(row["statuses"])])
    table = C.markdown_table(["instance", "side", "around the tests, attempts ≥ 3 (s)", "around the tests, all (s)",
                              "sandbox started ahead", "statuses"], rows)
    print(C.header("Fixed cost inside a batch (one worker)", machine))
    print(table)
    path = C.write_results("batch_fixed_cost", {"machine": machine, "command": C.command_line(),
                                                "sides": {k: str(v) if v else "this checkout" for k, v in sides.items()},
                                                "summary": summary, "samples": samples}, args.out)
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
