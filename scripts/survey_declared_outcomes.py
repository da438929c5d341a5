"""What the pristine tests of the published records declare (issue 36, class 1): for every
graded test of every Lite and Verified record whose repository is in ``--repos-dir``, the
outcomes its pristine source declares (harness/integrity/declared.py), counted per
repository, with the time the reading takes.

    .venv/bin/python scripts/survey_declared_outcomes.py ../shared/swebench/lite-test.jsonl \
        ../shared/swebench/verified-test.jsonl --repos-dir ../shared/swebench/repos [--json OUT]

Codes: ``""`` nothing declared, ``s`` a skip, ``x`` an expected failure, ``?`` the test was
not found (it then declares everything).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.inputs.repos import GitDir  # noqa: E402
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry  # noqa: E402
from harness.integrity.declared import Declarations  # noqa: E402
from harness.integrity.testpatch import apply_test_patch  # noqa: E402
from harness.patches import patch_files  # noqa: E402
from harness.runners import get_runner  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--repos-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    records: dict[str, dict] = {}
    for path in args.records:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                records.setdefault(record["instance_id"], record)
    counts: Counter = Counter()
    started = time.monotonic()
    for record in records.values():
        git_dir = args.repos_dir / (record["repo"].replace("/", "__") + ".git")
        if not git_dir.exists():
            continue
        repo, commit = GitDir(git_dir), record["base_commit"]
        try:
            paths = frozenset(e.path for e in repo.ls_tree(commit))
        except Exception:   # a base commit the mirror lacks
            continue
        spec = specs.get(record["repo"], str(record.get("version")))
        test_patch = patch_files(record["test_patch"])

        def read(path: str, repo=repo, commit=commit) -> bytes | None:
            return repo.read_blob(commit, path)
        staged = apply_test_patch(record["test_patch"], test_patch,
                                  lambda p: None if read(p) is None else (read(p), 0o644)).files
        reading = Declarations({p: data for p, (data, _) in staged.items()}, read, spec.runner, paths)
        test_files = get_runner(spec.runner).test_files(test_patch)
        for test in (*record["FAIL_TO_PASS"], *record["PASS_TO_PASS"]):
            if spec.runner == "sympy":   # sympy's ids are function names: the test file that defines it
                found = [reading.of(f"{f}::{test}") for f in test_files]
                declared = next((d for d in found if d.found), found[0] if found else None)
            else:
                declared = reading.of(test)
            counts[(record["repo"], declared.code if declared else "?")] += 1
    seconds = round(time.monotonic() - started, 1)
    total = sum(counts.values())
    print(f"{total} graded tests of {len(records)} records read in {seconds} s")
    for (repo, code), n in sorted(counts.items()):
        print(f"  {repo:28} {code or '-':3} {n}")
    if args.json:
        args.json.write_text(json.dumps({"seconds": seconds, "tests": total,
                                         "counts": [[r, c, n] for (r, c), n in sorted(counts.items())]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
