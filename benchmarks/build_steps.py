"""Single build steps of real instances, side by side: each checkout prepares the same
instances from an empty cache of its own (the engine's images are shared: found by content),
in a child process that imports that checkout's ``harness``, and the steps it took are timed
from its build records (``Prepared.builds``: kind, own seconds, ahead or not). Sides alternate
by round with a rotating order; each round starts from empty caches.

The instance layers a checkout builds are removed before each side (their tags are content
keys: a side would otherwise find the image the other side, or its own earlier round, made),
and so are the environments when ``--rebuild-environments`` is given. An image made before
the script started cannot be known before a side has prepared it: the first round is a
warm-up that finds out the tags and is not counted (``--warm-up 0`` skips it).

::

    git worktree add --detach /work/wt-before ad637f0
    .venv/bin/python benchmarks/build_steps.py --instances /work/shared/swebench/verified-test.jsonl \\
        --repos-dir /work/shared/swebench/repos --checkout /work/wt-before --checkout . --rounds 2 \\
        --instance-ids sphinx-doc__sphinx-8593 sphinx-doc__sphinx-8595 sympy__sympy-13031 sympy__sympy-13091 \\
        --out benchmarks/results/build_steps.json

Wall time of steps on a 2-core machine moves with everything else: read the medians of
several rounds, and the kinds together (a change that moves work from one kind to another
shows there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import json, sys, time
from pathlib import Path
import harness
from harness.engine.client import connect
from harness.inputs.instances import load_instances
from harness.inputs.repos import RepoResolver
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.preparation.preparer import Preparer
cache, instances, repos_dir, ids = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
engine = connect()
preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR), RepoResolver(cache, repos_dir, allow_clone=False), cache)
records = {i.instance_id: i for i in load_instances(instances).instances}
out = {"harness": harness.__file__, "instances": []}
for iid in ids:
    started = time.monotonic()
    prepared = preparer.prepare(records[iid])
    out["instances"].append({"id": iid, "seconds": time.monotonic() - started, "image": prepared.image.tag,
                             "env": prepared.env_image.tag,
                             "builds": [dict(b) if isinstance(b, dict) else b.__dict__ for b in (prepared.builds or [])]})
print("BUILD-STEPS " + json.dumps(out, default=str))
'''


def run_side(checkout: Path, instances: Path, repos_dir: Path, ids: list[str], python: str) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="build-steps-"))
    try:
        env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
        started = time.monotonic()
        proc = subprocess.run([python, "-c", CHILD, str(cache), str(instances), str(repos_dir), *ids],
                              cwd=checkout, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        line = [x for x in proc.stdout.splitlines() if x.startswith("BUILD-STEPS ")]
        if proc.returncode != 0 or not line:
            raise SystemExit(f"{checkout}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        data = json.loads(line[-1].split(" ", 1)[1])
        data["wall"] = wall
        return data
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def remove_images(tags: set[str]) -> None:
    for tag in sorted(tags):
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def kinds(side: dict) -> dict[str, float]:
    total: dict[str, float] = {}
    for instance in side["instances"]:
        for build in instance["builds"]:
            kind = build.get("kind", "?")
            total[kind] = total.get(kind, 0.0) + float(build.get("own_seconds", build.get("seconds", 0.0)))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=Path, required=True)
    parser.add_argument("--repos-dir", type=Path, required=True)
    parser.add_argument("--instance-ids", nargs="+", required=True)
    parser.add_argument("--checkout", type=Path, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rebuild-environments", action="store_true")
    parser.add_argument("--warm-up", type=int, default=1, help="uncounted rounds first (default 1)")
    parser.add_argument("--python", default=str(Path(sys.executable)))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rounds: list[dict] = []
    made: set[str] = set()
    for index in range(args.warm_up + args.rounds):
        order = args.checkout[index % len(args.checkout):] + args.checkout[:index % len(args.checkout)]
        sides = {}
        for checkout in order:
            remove_images(made)
            side = run_side(checkout, args.instances, args.repos_dir, args.instance_ids, args.python)
            made |= {i["image"] for i in side["instances"]}
            if args.rebuild_environments:
                made |= {i["env"] for i in side["instances"]}
            sides[str(checkout)] = side
            print(f"{'warm-up' if index < args.warm_up else 'round'} {index + 1} {checkout}: {side['wall']:.1f} s; "
                  + ", ".join(f"{k} {v:.1f}" for k, v in sorted(kinds(side).items())), flush=True)
        if index >= args.warm_up:
            rounds.append(sides)
    remove_images(made)
    print("\nmedians over rounds (s of the builds' own time, by kind; the wall time of the whole preparation)")
    for checkout in args.checkout:
        per_kind: dict[str, list[float]] = {}
        for sides in rounds:
            for kind, seconds in kinds(sides[str(checkout)]).items():
                per_kind.setdefault(kind, []).append(seconds)
        walls = [sides[str(checkout)]["wall"] for sides in rounds]
        print(f"{checkout}: wall {statistics.median(walls):.1f}; "
              + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in sorted(per_kind.items())))
    if args.out:
        args.out.write_text(json.dumps({"argv": sys.argv, "instances": args.instance_ids, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
