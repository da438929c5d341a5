"""Validate a whole public set whose base commits are here, and write its tables.

    .venv/bin/python scripts/validate_whole_set.py --set lite [--repeat 3] [--max-workers 2] \
        [--repos-dir ../shared/swebench/repos] [--run-id ID] [--write-docs]
    .venv/bin/python scripts/validate_whole_set.py --set lite --tables-only runs/whole-lite-<commit>
    .venv/bin/python scripts/validate_whole_set.py --set verified --merge runs/A runs/B --run-id whole-verified-<commit>

1. **Selection**: every record of the set (``lite``: ``lite-test.jsonl``, ``verified``:
   ``verified-test.jsonl`` in ``--data``, default ``../shared/swebench``) whose repository
   is in ``--repos-dir`` and holds the record's base commit; the others are listed with
   the reason (no repository here / commit not held), never silently dropped.
2. **Validation**: one ``harness validate`` over the selection (``--repeat`` reference
   runs and one empty-patch run per instance), in ``runs/<run-id>/``.
3. **Tables** (``tables.md`` beside the runs; with ``--write-docs`` also the block between
   ``<!-- whole-set:<set>:begin -->`` and ``<!-- whole-set:<set>:end -->`` of
   docs/REAL_INSTANCES.md): per repository and per instance, the harness commit every
   run was made at (from each run's manifest; runs made at different commits are
   refused, a table holds for one commit), the command, the wall time. Every instance
   that is not reference FULL in every repeat, whose empty patch resolves, or that has
   a ``tampered`` reference run, is an exception; an exception is explained only by an
   entry of ``docs/notes/dataset-defects.yaml`` (instance id -> what is wrong with the
   record and the evidence), otherwise it is printed as UNEXPLAINED and the script
   exits 1.
4. **Merge** (``--merge DIR ...``): validations of disjoint parts of one set, made at one
   commit with the same repeats (e.g. one part started while another was still building),
   become one directory of links (``gold-N/<id>``, ``empty/<id>``) with one validity report,
   and its tables; an instance in two parts, or parts at different commits, are refused.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "swebench"
SETS = {"lite": "lite-test.jsonl", "verified": "verified-test.jsonl"}
DEFECTS = ROOT / "docs" / "notes" / "dataset-defects.yaml"
DOC = ROOT / "docs" / "REAL_INSTANCES.md"


def run_harness(command: list[str]) -> int:
    """``python -m harness COMMAND``, with Ctrl-C, SIGTERM and SIGHUP passed on to it and
    waited for: the harness then removes its sandboxes and keeps the run resumable.
    (subprocess.call kills its child on KeyboardInterrupt, and SIGTERM's default would end
    this script alone; either way the sandboxes of the harness kept running.)"""
    process = subprocess.Popen([sys.executable, "-m", "harness", *command], cwd=ROOT)

    def forward(signum: int, _frame: object) -> None:
        process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                return process.wait()
            except KeyboardInterrupt:
                process.send_signal(signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def select(records: list[dict], repos_dir: Path) -> tuple[list[dict], dict[str, str]]:
    """The records whose base commit is held in ``repos_dir``; the rest with the reason."""
    from harness.inputs.repos import RepoResolver, RepositoryUnavailable
    resolver = RepoResolver(ROOT / ".cache" / "validate-whole-set", repos_dir, allow_clone=False)
    opened: dict[str, object] = {}
    chosen: list[dict] = []
    left: dict[str, str] = {}
    for record in records:
        repo = record["repo"]
        if repo not in opened:
            try:
                opened[repo] = resolver.open(repo)
            except RepositoryUnavailable as exc:
                opened[repo] = exc
        git = opened[repo]
        if isinstance(git, Exception):
            left[record["instance_id"]] = f"no repository: {git}"
            continue
        try:
            git.resolve_commit(record["base_commit"], record["instance_id"])
        except RepositoryUnavailable:
            left[record["instance_id"]] = f"base commit {record['base_commit'][:12]} not held"
            continue
        chosen.append(record)
    return chosen, left


def _reports(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(run_dir.glob("*/report.json")):
        report = json.loads(path.read_text())
        out[report["instance_id"]] = report
    return out


def _commit_of(run_dir: Path) -> str | None:
    manifest = run_dir / "manifest.json"
    return json.loads(manifest.read_text()).get("harness_commit") if manifest.exists() else None


def tables(root: Path, set_name: str, left: dict[str, str]) -> tuple[str, list[str]]:
    """The Markdown block and the unexplained exceptions."""
    validity = json.loads((root / "validity.json").read_text())
    gold_dirs = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith("gold-")),
                       key=lambda p: int(p.name.split("-")[1]))
    runs = {p.name: _reports(p) for p in [*gold_dirs, root / "empty"]}
    commits = {name: _commit_of(root / name) for name in runs}
    distinct = set(commits.values())
    if len(distinct) != 1 or None in distinct:
        raise SystemExit(f"the runs of {root} were made at different or unknown commits: {commits}")
    commit = distinct.pop()
    meta = json.loads((root / "whole-set.json").read_text()) if (root / "whole-set.json").exists() else {}
    defects = yaml.safe_load(DEFECTS.read_text()) if DEFECTS.exists() else {}
    per_repo: dict[str, list[str]] = defaultdict(list)
    for iid in validity["instances"]:
        per_repo[iid.split("__")[0] + "/" + iid.split("__")[1].rsplit("-", 1)[0]].append(iid)

    def tampered(iid: str) -> int:
        return sum(1 for name in runs if name.startswith("gold-")
                   and (runs[name].get(iid) or {}).get("error_reason") == "tampered")

    def canary_dropped(iid: str) -> int:
        # a canary the reference itself did not fail: dropped from judging (never held against a run)
        return sum(1 for name in runs if name.startswith("gold-")
                   for c in (((runs[name].get(iid) or {}).get("integrity") or {}).get("canaries") or [])
                   if c.get("verdict") == "disproved")

    unexplained: list[str] = []
    exceptions: dict[str, str] = {}
    for iid, row in validity["instances"].items():
        if row["reference_full"] and not row["empty_resolved"] and not tampered(iid):
            continue
        entry = (defects or {}).get(iid)
        if entry:
            exceptions[iid] = f"dataset defect: {entry['summary']}"
        else:
            exceptions[iid] = "UNEXPLAINED: " + "; ".join(row["reasons"][:3])
            unexplained.append(iid)

    repeats = validity["repeats"]
    lines = [f"Measured at harness commit `{commit}` on {meta.get('date', '?')} ({meta.get('machine', '?')}), "
             f"{meta.get('wall_minutes', '?')} minutes wall:", "",
             "```bash", meta.get("command", f"scripts/validate_whole_set.py --set {set_name}"), "```", "",
             f"**{validity['reference_full_in_every_repeat']} of {validity['instances_validated']} reference patches "
             f"FULL in {repeats} of {repeats} repeats; empty patch resolved: "
             f"{len(validity['empty_resolved_ids'])}; `tampered` among all reference runs: "
             f"{sum(tampered(i) for i in validity['instances'])}.**", "",
             f"| repository | instances | reference FULL {repeats}/{repeats} | empty resolved | flaky "
             "| canaries dropped by the control | tampered | exceptions |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    totals = Counter()
    for repo, ids in sorted(per_repo.items()):
        rows = [validity["instances"][i] for i in ids]
        counts = {"n": len(rows), "full": sum(r["reference_full"] for r in rows),
                  "empty": sum(bool(r["empty_resolved"]) for r in rows),
                  "flaky": sum(bool(r["flaky_tests"]) for r in rows),
                  "canary": sum(canary_dropped(i) for i in ids), "tampered": sum(tampered(i) for i in ids)}
        totals.update(counts)
        named = ", ".join(i.rsplit("-", 1)[1] for i in ids if i in exceptions) or "–"
        lines.append(f"| {repo} | {counts['n']} | {counts['full']} | {counts['empty']} | {counts['flaky']} | "
                     f"{counts['canary']} | {counts['tampered']} | {named} |")
    lines.append(f"| **all** | **{totals['n']}** | **{totals['full']}** | {totals['empty']} | {totals['flaky']} | "
                 f"{totals['canary']} | {totals['tampered']} | {len(exceptions)} |")
    lines += ["", "| instance | version | reference (per repeat) | empty | warm evaluation s (median) | note |",
              "|---|---|---|---|---:|---|"]
    for _repo, ids in sorted(per_repo.items()):
        for iid in ids:
            row = validity["instances"][iid]
            golds = [runs[n][iid] for n in runs if n.startswith("gold-") and iid in runs[n]]
            totals_s = [g["timings"].get("total", 0.0) for g in golds[1:] or golds]
            version = (golds[0].get("version") if golds else None) or meta.get("versions", {}).get(iid, "?")
            statuses = " ".join(s if s == "FULL" else f"**{s}**" for s in row["reference_statuses"])
            empty = row["empty_status"] if not row["empty_resolved"] else f"**{row['empty_status']}**"
            lines.append(f"| {iid} | {version} | {statuses} | {empty} | "
                         f"{statistics.median(totals_s) if totals_s else 0:.1f} | {exceptions.get(iid, '')} |")
    if exceptions:
        lines += ["", "Exceptions, with the evidence (docs/notes/dataset-defects.yaml):", ""]
        for iid, text in exceptions.items():
            lines.append(f"* **{iid}** — {text}")
            entry = (defects or {}).get(iid)
            if entry and entry.get("evidence"):
                lines.append(f"  Evidence: {entry['evidence'].strip()}")
    if left:
        reasons = Counter(v.split(":")[0] if v.startswith("no repository") else "base commit not held"
                          for v in left.values())
        lines += ["", f"Not validated here ({len(left)} records of the set): "
                  + ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
                  + "; by repository: " + ", ".join(f"{r} {n}" for r, n in sorted(Counter(
                      i.split("__")[0] for i in left).items())) + "."]
    return "\n".join(lines) + "\n", unexplained


def write_docs(block: str, set_name: str, doc: Path = DOC) -> None:
    begin, end = f"<!-- whole-set:{set_name}:begin -->", f"<!-- whole-set:{set_name}:end -->"
    text = doc.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{doc} has no {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{block}{end}{tail}")


def merge(parts: list[Path], root: Path) -> None:
    """One validation directory (links) and validity report from disjoint parts of a set."""
    validities = [json.loads((part / "validity.json").read_text()) for part in parts]
    if len({v["repeats"] for v in validities}) != 1:
        raise SystemExit(f"the parts have different repeats: {[v['repeats'] for v in validities]}")
    commits = {_commit_of(part / name) for part in parts
               for name in [p.name for p in part.iterdir() if p.is_dir() and (p / "manifest.json").exists()]}
    if len(commits) != 1 or None in commits:
        raise SystemExit(f"the parts were made at different or unknown commits: {sorted(map(str, commits))}")
    instances: dict[str, dict] = {}
    for part, validity in zip(parts, validities):
        for iid, row in validity["instances"].items():
            if iid in instances:
                raise SystemExit(f"{iid} is in two parts (the second: {part})")
            instances[iid] = row
    root.mkdir(parents=True, exist_ok=True)
    for part in parts:
        for run in (p for p in part.iterdir() if p.is_dir() and (p / "manifest.json").exists()):
            target = root / run.name
            target.mkdir(exist_ok=True)
            (target / "manifest.json").write_text((run / "manifest.json").read_text())
            for instance_dir in (d for d in run.iterdir() if (d / "report.json").exists()):
                link = target / instance_dir.name
                if not link.exists():
                    link.symlink_to(instance_dir.resolve())
    merged = {"repeats": validities[0]["repeats"], "instances_validated": len(instances),
              "reference_full_in_every_repeat": sum(r["reference_full"] for r in instances.values()),
              "valid_instances": sum(r["valid"] for r in instances.values()),
              "empty_resolved_ids": sorted(i for v in validities for i in v["empty_resolved_ids"]),
              "instances": dict(sorted(instances.items())), "merged_from": [str(p) for p in parts]}
    (root / "validity.json").write_text(json.dumps(merged, indent=1))
    # the records validated, as one validation writes them (read by derive_against_swebench.py from-runs)
    (root / "instances.jsonl").write_text("".join((part / "instances.jsonl").read_text() for part in parts
                                                  if (part / "instances.jsonl").is_file()))
    metas = [json.loads((p / "whole-set.json").read_text()) for p in parts if (p / "whole-set.json").exists()]
    if metas:
        meta = dict(metas[-1])
        meta["wall_minutes"] = [m.get("wall_minutes") for m in metas]
        meta["command"] = " ; ".join(m.get("command", "?") for m in metas)
        meta["versions"] = {k: v for m in metas for k, v in m.get("versions", {}).items()}
        (root / "whole-set.json").write_text(json.dumps(meta, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repos-dir", type=Path, default=None, help="default: DATA/repos")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--output-dir", type=Path, default=ROOT / "runs")
    parser.add_argument("--run-id", default=None, help="default: whole-<set>-<commit>")
    parser.add_argument("--instance-ids", nargs="*", default=None, help="only these (of the selection)")
    parser.add_argument("--tables-only", type=Path, default=None, help="a finished validation directory")
    parser.add_argument("--write-docs", action="store_true", help="replace the set's block of REAL_INSTANCES.md")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="finished validations of disjoint parts of the set, made at one commit")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from harness.results.manifest import harness_commit

    records = [json.loads(line) for line in (args.data / SETS[args.set]).read_text().splitlines() if line.strip()]
    repos_dir = args.repos_dir or args.data / "repos"
    chosen, left = select(records, repos_dir)
    if args.instance_ids:
        unknown = sorted(set(args.instance_ids) - {r["instance_id"] for r in chosen})
        if unknown:
            raise SystemExit(f"--instance-ids not in the selection: {unknown[:10]}")
        chosen = [r for r in chosen if r["instance_id"] in set(args.instance_ids)]
    code = 0  # harness validate's exit code, when this run made the validation
    if args.merge:
        root = args.output_dir.resolve() / (args.run_id or "whole-" + args.set + "-merged")
        merge([p.resolve() for p in args.merge], root)
    elif args.tables_only:
        root = args.tables_only.resolve()
    else:
        commit = harness_commit() or "unknown"
        root = args.output_dir.resolve() / (args.run_id or f"whole-{args.set}-{commit[:12]}")
        root.mkdir(parents=True, exist_ok=True)
        instances = root / "instances.jsonl"
        instances.write_text("".join(json.dumps(r) + "\n" for r in chosen))
        command = ["validate", "--instances", str(instances), "--repeat", str(args.repeat), "--repos-dir",
                   str(repos_dir), "--no-clone", "--max-workers", str(args.max_workers), "--output-dir",
                   str(root.parent), "--run-id", root.name, "--quiet"]
        print(f"validating {len(chosen)} instances ({len(left)} of the set not held here) into {root}", flush=True)
        started = time.monotonic()
        code = run_harness(command)
        meta = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": f"{os.cpu_count()} cores, {platform.platform()}",
                "wall_minutes": round((time.monotonic() - started) / 60, 1),
                "command": "scripts/validate_whole_set.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "versions": {r["instance_id"]: r.get("version") for r in chosen}, "exit_code": code}
        (root / "whole-set.json").write_text(json.dumps(meta, indent=1))
        if code != 0:
            print(f"harness validate exited {code}", file=sys.stderr)
            # 2 with a validity report: an environment did not build (named on stderr); the tables still say
            # what was validated, and the script exits 2 after them
            from harness.paths import RunPaths
            if code != 2 or not RunPaths(root).validity_json.is_file():
                return code
    block, unexplained = tables(root, args.set, left)
    (root / "tables.md").write_text(block)
    print(block)
    if args.write_docs:
        write_docs(block, args.set)
    if unexplained:
        print(f"UNEXPLAINED exceptions: {', '.join(unexplained)}", file=sys.stderr)
        return 1
    return 2 if code == 2 else 0


if __name__ == "__main__":
    sys.exit(main())
