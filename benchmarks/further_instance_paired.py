"""Paired re-preparation of further instances by two harness revisions, alternating.

After ``further_instance.py --sides after --work-dir W`` has run once from a snapshot of each
revision (``git archive REV | tar -x -C SNAP``), each further instance's image is untagged and
prepared again by each side in turn (order flipped every round), so both sides meet the same
load. The image must come out with the same tag (content-keyed), or the run stops.

    .venv/bin/python benchmarks/further_instance_paired.py --side main=SNAP1:W1 --side branch=SNAP2:W2 \\
        [--subject astropy] [--rounds 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import further_instance as F  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", action="append", required=True, help="NAME=SNAPSHOT:WORK_DIR (twice)")
    p.add_argument("--subject", default="astropy", choices=list(F.SUBJECTS))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repos-dir", type=Path, default=Path("/work/repos"))
    p.add_argument("--out", type=Path, default=Path("further_instance_paired.json"))
    args = p.parse_args(argv)
    sides = {}
    for spec in args.side:
        name, rest = spec.split("=", 1)
        snapshot, work = rest.split(":", 1)
        sides[name] = (Path(snapshot), Path(work))
    ids = F.SUBJECTS[args.subject][1][1:]  # the further instances
    rows = []
    for round_ in range(args.rounds):
        for iid in ids:
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                snapshot, work = sides[name]
                root = work / f"{args.subject}-after"
                results = json.loads((work / "result.json").read_text())["subjects"][args.subject]["after"]
                tag = next(r["image"] for r in results if r["instance"] == iid)
                subprocess.run(["docker", "rmi", tag], capture_output=True)
                os.environ["HARNESS_DATA_DIR"] = str(snapshot)
                load = os.getloadavg()[0]
                row = F.run_one(root, snapshot, work / "instances.jsonl", iid, root / "cache", root / "specs",
                                args.repos_dir)
                row.update(side=name, round=round_, load1=round(load, 1))
                if row["image"] != tag:
                    raise SystemExit(f"{name} {iid}: prepared {row['image']}, expected {tag}")
                print(json.dumps({k: row[k] for k in ("side", "round", "instance", "prepare_seconds", "load1")}),
                      flush=True)
                rows.append(row)
    args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
