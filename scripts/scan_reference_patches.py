"""The model-file checks over SWE-bench's reference patches, on the host (no container):
how many honest patches the refusals (compiled code, files too large to inspect) and the
scans would stop or flag.

    .venv/bin/python scripts/scan_reference_patches.py --repos-dir ../shared/swebench/repos \
        ../shared/swebench/lite-test.jsonl ../shared/swebench/verified-test.jsonl \
        [--predictions PREDS.jsonl ...] [--baseline REV] [--json OUT]

For every record (deduplicated by instance id) whose repository is in ``--repos-dir``: the
reference patch is applied on the host over the pristine files it touches (as the test
patch is, :mod:`harness.integrity.testpatch`), the tree changes are built from the result,
the plan decides which files stay (``make_plan``: test material and infrastructure are
restored, as in a run) and then :func:`harness.integrity.artefacts.refusal` and
:func:`harness.integrity.scan.scan_changes` run exactly as the evaluation runs them.
``--baseline REV`` also runs the scan of another revision (``git show REV:...``) over the
same files, so that the findings this revision adds are told from the old ones.

``--predictions`` checks model patches instead (SWE-bench predictions files: the records'
``model_patch`` replaces the reference patch; a patch that does not apply alone is
skipped). Prints the figures and the records that would be refused, made ``tampered``
or given a new flag; ``--json`` writes them all.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.inputs.repos import GitDir  # noqa: E402
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry  # noqa: E402
from harness.integrity import artefacts  # noqa: E402
from harness.integrity.plan import make_plan  # noqa: E402
from harness.integrity.scan import scan_changes  # noqa: E402
from harness.integrity.testpatch import apply_test_patch  # noqa: E402
from harness.integrity.tree import TreeChange, TreeTruth  # noqa: E402
from harness.patches import patch_files  # noqa: E402
from harness.runners import get_runner  # noqa: E402


def baseline_scan(rev: str):
    """The scan module of another revision, loaded from git (it needs only the standard library)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:harness/integrity/scan.py"], check=True,
                            capture_output=True).stdout
    path = Path(f"/tmp/scan-baseline-{hashlib.sha256(source).hexdigest()[:12]}.py")
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("scan_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def records(paths: list[Path]) -> dict[str, dict]:
    out = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                out.setdefault(record["instance_id"], record)
    return out


def changes_of(record: dict, repo: GitDir, commit: str) -> tuple[list[TreeChange], callable]:
    """The tree changes the reference patch makes, and the pristine reader."""
    def pristine(path: str):
        data = repo.read_blob(commit, path)
        if data is None:
            return None
        entry = repo.entry(commit, path)
        return data, 0o755 if entry and entry.mode == "100755" else 0o644

    touched = patch_files(record["patch"])
    result = apply_test_patch(record["patch"], touched, pristine)
    changes = []
    for path, (data, mode) in result.files.items():
        old = pristine(path)
        if old is None:
            changes.append(TreeChange(path, "created", "file", new_mode=mode, content=data, size=len(data)))
        elif old[0] != data:
            changes.append(TreeChange(path, "modified", "file", "file", old[1], mode, content=data, size=len(data)))
        elif old[1] != mode:
            changes.append(TreeChange(path, "mode", "file", "file", old[1], mode))
    changes += [TreeChange(p, "deleted", "file") for p in result.deleted]
    return changes, pristine


def spec_for(specs: SpecRegistry, record: dict):
    """The record's spec; for a version the specs do not hold, the repository's first one
    (only the runner matters here, and a repository has one)."""
    from harness.errors import UnknownNameError
    try:
        return specs.get(record["repo"], str(record.get("version") or ""))
    except UnknownNameError:
        data, _ = specs._raw[record["repo"]]
        return specs.get(record["repo"], str(sorted(map(str, data.get("versions") or {"*": 0}))[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instances", nargs="+", type=Path)
    parser.add_argument("--repos-dir", type=Path, required=True)
    parser.add_argument("--baseline", metavar="REV", help="also scan with this revision's scan.py")
    parser.add_argument("--predictions", nargs="+", type=Path, default=[],
                        help="check these predictions' model patches instead of the reference patches")
    parser.add_argument("--json", type=Path, help="write every record's figures here")
    args = parser.parse_args(argv)
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    old_scan = baseline_scan(args.baseline) if args.baseline else None
    rows, skipped, repos, scan_seconds = [], Counter(), {}, Counter()
    started = time.monotonic()
    subjects = sorted(records(args.instances).items())
    if args.predictions:
        by_id = dict(subjects)
        subjects = []
        for path in args.predictions:
            for n, line in enumerate(path.read_text().splitlines(), 1):
                pred = json.loads(line) if line.strip() else {}
                if pred.get("instance_id") in by_id and (pred.get("model_patch") or "").strip():
                    subjects.append((f"{pred['instance_id']}@{path.name}:{n}",
                                     dict(by_id[pred["instance_id"]], patch=pred["model_patch"])))
    for iid, record in subjects:
        location = args.repos_dir / f"{record['repo'].replace('/', '__')}.git"
        if not location.exists():
            skipped["no repository here"] += 1
            continue
        repo = repos.setdefault(record["repo"], GitDir(location))
        try:
            commit = repo.resolve_commit(record["base_commit"], record["instance_id"])
            changes, pristine = changes_of(record, repo, commit)
        except Exception as exc:  # a base commit the mirror lacks, a patch that does not apply alone
            skipped[type(exc).__name__] += 1
            continue
        spec = spec_for(specs, record)
        runner = get_runner(spec.runner)
        test_patch = patch_files(record["test_patch"])
        tree = TreeTruth(changes=changes, applied="host", history_commits=1, git_changed=[],
                         too_many_changes=False, commands=[])
        plan = make_plan(tree, test_patch.all, runner.test_files(test_patch),
                         frozenset(e.path for e in repo.ls_tree(commit)), frozenset(sys.stdlib_module_names),
                         True, runner.infra_patterns)
        clock = time.monotonic()
        refused = artefacts.refusal(changes)
        found = scan_changes([c for c in changes if c.change != "deleted"], set(plan.model_files), pristine,
                             runner.internals)
        scan_seconds["this revision"] += time.monotonic() - clock
        hits = {(h.path, h.category, h.what) for h in found.hits}
        tampering = {(h.path, h.category, h.what) for h in found.hits if h.tampers}
        old_hits = set()
        if old_scan is not None:
            clock = time.monotonic()
            old = old_scan.scan_changes([c for c in changes if c.change != "deleted"], set(plan.model_files),
                                        pristine, runner.internals)
            scan_seconds[args.baseline] += time.monotonic() - clock
            old_hits = {(h.path, h.category, h.what) for h in old.hits}
        new = hits - old_hits
        rows.append({"instance_id": iid, "repo": record["repo"], "refused": refused.message() if refused else None,
                     "files": len(artefacts.added_files(changes)), "bytes": refused.total,
                     "largest": max((c.size or 0 for c in artefacts.added_files(changes)), default=0),
                     "kept": len(plan.model_files), "non_python_kept": sum(
                         1 for p in plan.model_files if not p.endswith((".py", ".pyw", ".pyi"))),
                     "findings": sorted(map(list, hits)), "new_findings": sorted(map(list, new)),
                     "new_tampered": sorted({c for p, c, w in new if (p, c, w) in tampering
                                             and not spec.runner_internals_allowed}),
                     "new_flags": sorted({c for _, c, _ in new}), "tokenized": found.tokenized})
    seconds = time.monotonic() - started
    refused = [r for r in rows if r["refused"]]
    tampered = [r for r in rows if r["new_tampered"]]
    flagged = [r for r in rows if r["new_flags"]]
    print(f"{len(rows)} patches checked ({dict(skipped) or 'none skipped'}), {seconds:.1f} s; host time of the "
          f"refusals and scans: " + ", ".join(f"{k} {v:.2f} s" for k, v in scan_seconds.items()))
    print(f"largest file {max(r['largest'] for r in rows):,} bytes; largest patch total "
          f"{max(r['bytes'] for r in rows):,} bytes; {sum(r['non_python_kept'] for r in rows)} non-Python files kept "
          f"in {sum(1 for r in rows if r['non_python_kept'])} patches")
    print(f"refused: {len(refused)}; new tampered: {len(tampered)}; new findings of any kind: {len(flagged)}")
    for r in refused:
        print(f"  REFUSED {r['instance_id']}: {r['refused']}")
    for r in flagged:
        print(f"  {'TAMPERED' if r['new_tampered'] else 'flagged'} {r['instance_id']}: {r['new_findings'][:4]}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "skipped": dict(skipped), "seconds": round(seconds, 1),
                                         "scan_seconds": dict(scan_seconds)}, indent=1))
    return 1 if refused or tampered else 0


if __name__ == "__main__":
    sys.exit(main())
