"""Grade vendors' resolved patches on the instances whose base commits are here, and compare.

    .venv/bin/python scripts/reproduce_vendors.py --set verified --control runs/<validation>/gold-1 \
        [--repos-dir ../shared/swebench/repos] [--max-workers 2] [--run-prefix vendor-]

For every ``vendor-<set>-<submission>.resolved-preds.jsonl`` in ``--data`` (default
``../shared/swebench``) with its ``.resolved-claims.json``:

1. **Selection**: the predictions and claimed ids whose instance is in the set's records,
   whose base commit ``--repos-dir`` holds (as ``validate_whole_set.py`` selects) and which
   the control graded (a vendor's patch is judged only where the reference was), written
   beside the run as ``predictions.jsonl`` and ``claims.json``; the others are counted by
   reason, never silently dropped.
2. **Grading**: one ``harness run`` of those predictions, with ``--control`` (a reference run
   of the same instances: its canaries are planted, the ones it disproved dropped).
3. **Comparison**: ``harness compare`` of the run with the filtered claims (Markdown and
   JSON beside the run): every claimed-resolved instance reproduced, or listed.

Exit status 0 when every claimed-resolved instance is resolved here, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "swebench"
SETS = {"lite": "lite-test.jsonl", "verified": "verified-test.jsonl"}


def held_records(data: Path, set_name: str, repos_dir: Path) -> tuple[dict[str, dict], dict[str, str]]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from validate_whole_set import select
    records = [json.loads(line) for line in (data / SETS[set_name]).read_text().splitlines() if line.strip()]
    chosen, left = select(records, repos_dir)
    return {r["instance_id"]: r for r in chosen}, left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repos-dir", type=Path, default=None, help="default: DATA/repos")
    parser.add_argument("--control", type=Path, required=True, help="a reference run of the instances")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--output-dir", type=Path, default=ROOT / "runs")
    parser.add_argument("--run-prefix", default="vendor-")
    args = parser.parse_args(argv)
    repos_dir = args.repos_dir or args.data / "repos"
    held, _ = held_records(args.data, args.set, repos_dir)
    all_reproduced = True
    for preds_file in sorted(args.data.glob(f"vendor-{args.set}-*.resolved-preds.jsonl")):
        submission = preds_file.name[len(f"vendor-{args.set}-"):-len(".resolved-preds.jsonl")]
        claims_file = preds_file.with_name(preds_file.name.replace(".resolved-preds.jsonl", ".resolved-claims.json"))
        predictions = [json.loads(line) for line in preds_file.read_text().splitlines() if line.strip()]
        claims = json.loads(claims_file.read_text())
        no_control = [p["instance_id"] for p in predictions if p["instance_id"] in held
                      and not (args.control / p["instance_id"] / "report.json").exists()]
        kept = [p for p in predictions if p["instance_id"] in held and p["instance_id"] not in no_control]
        kept_ids = {p["instance_id"] for p in kept}
        run_id = f"{args.run_prefix}{submission}"
        work = args.output_dir.resolve() / f"{run_id}-inputs"
        work.mkdir(parents=True, exist_ok=True)
        (work / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in kept))
        filtered = dict(claims, resolved=sorted(set(claims["resolved"]) & kept_ids),
                        note=f"{claims.get('note', '')}; only the {len(kept_ids)} instances whose base commit is in "
                             f"{repos_dir} and graded by the control {args.control} ({len(predictions) - len(kept)} others not graded here)")
        (work / "claims.json").write_text(json.dumps(filtered, indent=1))
        instances = work / "instances.jsonl"
        instances.write_text("".join(json.dumps(held[i]) + "\n" for i in sorted(kept_ids)))
        print(f"{submission}: {len(kept)} of {len(predictions)} resolved patches gradable here "
              f"({len(predictions) - len(kept) - len(no_control)} without their repository or base commit here, "
              f"{len(no_control)} not graded by the control)", flush=True)
        subprocess.call([sys.executable, "-m", "harness", "run", "--instances", str(instances), "--predictions",
                         str(work / "predictions.jsonl"), "--repos-dir", str(repos_dir), "--no-clone",
                         "--control", str(args.control.resolve()), "--max-workers", str(args.max_workers),
                         "--output-dir", str(args.output_dir.resolve()), "--run-id", run_id, "--quiet"], cwd=ROOT)
        compared = subprocess.run([sys.executable, "-m", "harness", "compare",
                                   str(args.output_dir.resolve() / run_id), "--claimed", str(work / "claims.json")],
                                  cwd=ROOT, capture_output=True, text=True)
        (work / "compare.md").write_text(compared.stdout)
        print(compared.stdout)
        summary = json.loads((args.output_dir.resolve() / run_id / "summary.json").read_text())
        resolved_here = set(summary.get("resolved_ids", []))
        missing = sorted(set(filtered["resolved"]) - resolved_here)
        if missing:
            all_reproduced = False
            print(f"{submission}: claimed resolved, not resolved here: {', '.join(missing)}", file=sys.stderr)
    return 0 if all_reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
