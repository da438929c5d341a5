"""Issue 36, class 4: the restore plan never reverts a file of a reference patch. Over
every Lite and Verified record (django, matplotlib and scikit-learn included: planning
needs no container), :mod:`harness.integrity.reference_plan` plans the record's reference
patch as a run would and lists the files it would restore or delete.

    .venv/bin/python scripts/check_reference_plans.py ../shared/swebench/lite-test.jsonl \
        ../shared/swebench/verified-test.jsonl [--repos-dir ../shared/swebench/repos] [--json OUT]

With ``--repos-dir`` the pristine layout is the repository's tree at the base commit where
the repository is there (the nine whose histories could be fetched); elsewhere the layout
the patches imply. Protected module names: the standard library's and the runner's (the
environment's wheels are not known without an image). Exit 1 when any file is reverted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.integrity.reference_plan import plan_reference  # noqa: E402
from harness.inputs.repos import GitDir  # noqa: E402
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry  # noqa: E402
from harness.runners import get_runner  # noqa: E402

PROTECTED = frozenset({*sys.stdlib_module_names, "pytest", "_pytest", "py", "pluggy"})


def records(paths: list[Path]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                out.setdefault(record["instance_id"], record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    found, layouts = [], Counter()
    all_records = records(args.records)
    for instance_id, record in sorted(all_records.items()):
        spec = specs.get(record["repo"], str(record.get("version", "")))
        runner = get_runner(spec.runner)
        layout, read = None, None
        git_dir = args.repos_dir / (record["repo"].replace("/", "__") + ".git") if args.repos_dir else None
        if git_dir is not None and git_dir.exists():
            repo, commit = GitDir(git_dir), record["base_commit"]
            try:
                layout = [e.path for e in repo.ls_tree(commit)]
                read = lambda path, repo=repo, commit=commit: repo.read_blob(commit, path)  # noqa: E731
            except Exception:   # a base commit the mirror lacks (5 astropy records): the implied layout
                layout = None
        layouts["tree" if layout is not None else "implied"] += 1
        planned = plan_reference(record, runner.test_files, layout, PROTECTED, runner.infra_patterns, read)
        if planned.reverted:
            found.append({"instance_id": instance_id, "reverted": list(planned.reverted),
                          "restore": planned.plan.restore, "delete": planned.plan.delete})
    print(f"{len(all_records)} records ({layouts['tree']} with the base commit's tree, {layouts['implied']} with "
          f"the layout their patches imply): {len(found)} reference patches with a reverted file")
    for entry in found:
        print(f"  {entry['instance_id']}: {', '.join(entry['reverted'])}")
    if args.json:
        args.json.write_text(json.dumps({"records": len(all_records), "layouts": dict(layouts), "reverted": found},
                                        indent=2))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
