"""``python -m harness.inputs.demo``: regenerate or check ``instances.jsonl``, or build the demo repositories."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.inputs.demo.build import build_demo_repos, read_head
from harness.inputs.demo.history import DEMO_DIR, INSTANCES_FILE
from harness.inputs.demo.records import regenerate, render_instances


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.inputs.demo",
                                     description="The embedded demo instance set (``instances/demo``).")
    parser.add_argument("--source", type=Path, default=DEMO_DIR, help="demo set directory (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("regenerate", help="rebuild the repos in a temp dir and rewrite instances.jsonl")
    sub.add_parser("check", help="exit 1 if instances.jsonl is not what 'regenerate' would write")
    p_build = sub.add_parser("build", help="build the demo git repositories into DEST")
    p_build.add_argument("dest", type=Path)
    args = parser.parse_args(argv)

    if args.command == "regenerate":
        changed = regenerate(args.source)
        print(f"{args.source / INSTANCES_FILE}: {'rewritten' if changed else 'already up to date'}")
        return 0
    if args.command == "check":
        target = args.source / INSTANCES_FILE
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != render_instances(args.source):
            print(f"{target} is stale; run: python -m harness.inputs.demo regenerate", file=sys.stderr)
            return 1
        print(f"{target}: up to date")
        return 0
    for name, path in build_demo_repos(args.source, args.dest).items():
        print(f"{name}\t{path}\t{read_head(path)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
