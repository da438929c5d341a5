"""The bootstrap's CPU cost on a real test suite, on the host: a test command run bare and under
each checkout's bootstrap (its ``harness/incontainer`` modules, as ``tests/bootstrap_host.py``
runs them: the monitor, the runner-identity registry, the outcome plugin, the evidence
channel), rounds interleaved with a rotating order. CPU time (user + system of the whole
process tree, from ``RUSAGE_CHILDREN``), not wall time: on this shared 2-core machine the wall
time of a 3 s suite moves by seconds with other work, its CPU time by a few per cent.

The suite is set up by hand (the environment an instance's spec describes, made on the host):
for pytest-dev__pytest-5103, whose test file starts 9 child Pythons and 43 pytest sessions::

    git --git-dir=BARE archive 10ca84ffc56c2dd2d9dc4bd71b7b898e083500cd | tar -x -C TREE
    ~/.pyenv/versions/3.9.18/bin/python -m venv VENV     # then the spec's 4.5 pins, and
    SETUPTOOLS_SCM_PRETEND_VERSION=4.5.1.dev40 VENV/bin/pip install --no-build-isolation --no-deps -e TREE
    (the instance's test patch and reference patch applied to TREE)

    .venv/bin/python benchmarks/bootstrap_cpu.py --tree TREE --python VENV/bin/python \\
        --rounds 8 --checkout /work/main --checkout /work/wt-branch \\
        -- -m pytest -rA -q -p no:cacheprovider testing/test_assertrewrite.py

Every path of a checkout's modules must be root's and not group- or world-writable (the
bootstrap refuses other modules, and the side then runs bare: its ``event_records`` is 0).
A checkout with ``bytecode_cache.py`` gets root's bytecode of its modules first, made with
``--python`` as the launcher makes it in the sandbox (outside the CPU timed).

The environments' Python 3.9 is Debian's 3.9.2, which raises ``code.__new__`` for every code
object marshal makes (pyenv's 3.9.18 does not; pyenv's 3.8.18 does, and raises no
``marshal.loads`` before them, as 3.9.2): a venv of 3.8.18 with the same pins shows the
sandbox's cost on the host.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _common as C  # noqa: E402
from tests.bootstrap_host import bootstrapped  # noqa: E402

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONHASHSEED": "0"}


def cpu_of(argv: list[str], cwd: Path, env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, required=True, help="the working copy the command runs in")
    parser.add_argument("--python", required=True, help="the environment's interpreter")
    parser.add_argument("--checkout", type=Path, action="append", default=[], help="a checkout whose bootstrap to time")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the interpreter's arguments")
    args = parser.parse_args(argv)
    if not args.tree.is_dir():
        parser.error(f"--tree {args.tree}: not a directory")
    if not Path(args.python).is_file():
        parser.error(f"--python {args.python}: no such interpreter")
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: at least 1")
    missing = [str(c) for c in args.checkout if not (c / "harness" / "incontainer" / "_harness_boot.py").is_file()]
    if missing:
        parser.error(f"--checkout {', '.join(missing)}: no harness/incontainer/_harness_boot.py")
    command = [args.python, *[a for a in args.command if a != "--"]]
    sides: dict[str, Path | None] = {"bare": None}
    for checkout in args.checkout:
        head = C._run_text(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"]) or "?"
        sides[f"{checkout.name}@{head}"] = checkout / "harness" / "incontainer"
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    records: dict[str, list[int]] = {name: [] for name in sides}
    names = list(sides)
    for round_ in range(args.rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            if sides[name] is None:
                cpu[name].append(cpu_of(command, args.tree, ENV))
                continue
            with tempfile.TemporaryDirectory(prefix="bootstrap-cpu-") as scratch:
                # root's bytecode of the modules, as the launcher makes it, where the checkout has it
                bytecode = args.python if (sides[name] / "bytecode_cache.py").is_file() else None
                with bootstrapped(Path(scratch) / "channel", args.tree, source=sides[name],
                                  bytecode=bytecode) as channel:
                    cpu[name].append(cpu_of(command, args.tree, {**ENV, **channel.env}))
                records[name].append(sum('"k":"event"' in line for line in channel.events_path.open()))
    bare = statistics.median(cpu["bare"])
    result = {"command": command, "tree": str(args.tree), "rounds": args.rounds, "sides": {
        name: {"cpu_median_s": round(statistics.median(v), 3), "over_bare_s": round(statistics.median(v) - bare, 3),
               "cpu_s": [round(x, 3) for x in v], "event_records": records[name][:1]} for name, v in cpu.items()}}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
