"""Grade a real SWE-bench Verified instance on a release tree: the proxy for repositories
whose history cannot be fetched here (django, matplotlib, scikit-learn).

A PyPI sdist of the spec's version becomes a one-commit git repository (as
scripts/sdist_build.py makes it); the Verified records of that repository and version are
tried in a fixed order (the number in the instance id, ascending; or only ``--instance-id``)
and the first whose reference patch *and* test patch both apply to that tree with
``git apply`` is graded: the real record, with its ``base_commit`` replaced by the release
tree's commit, its ``instance_id`` suffixed ``-release-tree`` and a ``release_tree`` field
naming the sdist and the dataset's own base commit. ``harness run`` grades it with the
reference patch and then the empty patch on the same images; WORK_DIR/summary.json has the
sdist, every record tried and why each was rejected, both verdicts and the per-test outcome
of the FAIL_TO_PASS/PASS_TO_PASS lists.

    .venv/bin/python scripts/release_tree_proxy.py django/django 2.2 Django==2.2 --work-dir .local/proxy-django-2.2

What it shows and what it cannot: docs/REAL_INSTANCES.md ("Release-tree proxies").
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "scripts"))

from sdist_build import sdist_repository  # noqa: E402  (scripts/ is not a package)

DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "swebench" / "verified-test.jsonl"
#: what the graded record's id ends with: it is not the dataset's instance
SUFFIX = "-release-tree"
_OFFSET = re.compile(r"^Hunk #\d+ succeeded at \d+ \((?:offset -?\d+ lines?|fuzz \d+)[^)]*\)\.$")


@dataclass
class ApplyCheck:
    """``git apply --check`` of one patch on the tree."""

    applies: bool
    #: git's "Hunk #N succeeded at L (offset K lines)." lines: where the patch applied elsewhere
    offsets: list[str] = field(default_factory=list)
    #: git's error lines when it does not apply
    error: str = ""


def check_apply(repo: Path, patch: str) -> ApplyCheck:
    """Whether ``patch`` applies to ``repo``'s work tree as ``git apply`` (the harness's
    first strategy, and its only one for test patches) takes it; the tree is not changed."""
    if not patch.strip():
        return ApplyCheck(False, error="empty patch")
    proc = subprocess.run(["git", "-C", str(repo), "apply", "--check", "--verbose", "--whitespace=nowarn", "-"],
                          input=patch, capture_output=True, text=True)
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()]
    offsets = [line for line in lines if _OFFSET.match(line)]
    if proc.returncode == 0:
        return ApplyCheck(True, offsets)
    errors = [line for line in lines if line.startswith("error:")]
    error = "\n".join(errors or lines[-3:])[:600]
    reverse = subprocess.run(["git", "-C", str(repo), "apply", "--check", "--reverse", "--whitespace=nowarn", "-"],
                             input=patch, capture_output=True, text=True)
    if reverse.returncode == 0:
        error = "already in the tree (applies in reverse)\n" + error
    return ApplyCheck(False, offsets, error)


def instance_number(instance_id: str) -> int:
    """The number an instance id ends with (``django__django-10097`` → 10097)."""
    tail = instance_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def candidates(records: Iterable[dict], repo: str, version: str, instance_id: str | None = None) -> list[dict]:
    """The records of ``repo`` and ``version`` in the order they are tried (the instance id's
    number, then the id), or the one ``instance_id`` (of that repository and version)."""
    chosen = [r for r in records if r.get("repo") == repo and str(r.get("version")) == version]
    if instance_id is not None:
        chosen = [r for r in chosen if r.get("instance_id") == instance_id]
    return sorted(chosen, key=lambda r: (instance_number(r["instance_id"]), r["instance_id"]))


def choose(records: list[dict], check: Callable[[str], ApplyCheck]) -> tuple[dict | None, list[dict]]:
    """The first record whose ``patch`` and ``test_patch`` both apply (``check`` of each), and
    what was found for every record tried up to it: id, which patch did not apply and git's
    words, the offsets of those that did."""
    tried: list[dict] = []
    for record in records:
        results = {name: check(record[name]) for name in ("patch", "test_patch")}
        entry: dict = {"instance_id": record["instance_id"], "created_at": record.get("created_at"),
                       "applies": {name: r.applies for name, r in results.items()}}
        offsets = {name: r.offsets for name, r in results.items() if r.offsets}
        if offsets:
            entry["offsets"] = offsets
        failed = [name for name, r in results.items() if not r.applies]
        if failed:
            entry["rejected"] = " and ".join(failed) + " did not apply"
            entry["errors"] = {name: results[name].error for name in failed}
            tried.append(entry)
            continue
        tried.append(entry)
        return record, tried
    return None, tried


def proxy_record(record: dict, base_commit: str, sdist: str) -> dict:
    """The record graded on the release tree: the real one, with the release tree's commit as
    its base, its id suffixed and the substitution named in a ``release_tree`` field."""
    out = dict(record)
    out["instance_id"] = record["instance_id"] + SUFFIX
    out["base_commit"] = base_commit
    out["release_tree"] = {"sdist": sdist, "dataset_instance_id": record["instance_id"],
                           "dataset_base_commit": record["base_commit"],
                           "note": "a release-tree proxy: the dataset's patches on a PyPI release, "
                                   "not the dataset's base commit"}
    return out


def list_outcome(ids: list[str], success: list[str], missing: list[str], limit: int = 50) -> dict:
    """How the listed tests of one group came out: passed (graded as success), failed (reported,
    not success), missing (never reported); the ids of the last two, up to ``limit`` each."""
    ok, absent = set(success), set(missing)
    failed = [t for t in ids if t not in ok and t not in absent]
    gone = [t for t in ids if t in absent and t not in ok]
    return {"listed": len(ids), "passed": sum(t in ok for t in ids), "failed": len(failed),
            "missing": len(gone), "failed_ids": failed[:limit], "missing_ids": gone[:limit]}


def outcome(report: dict, record: dict) -> dict:
    """One run's verdict and the per-test outcome of the record's lists, from its report.json."""
    status = report.get("tests_status") or {}
    missing = list(report.get("missing") or [])
    image = report.get("image") or {}
    return {
        "status": report.get("status"),
        "error_reason": report.get("error_reason"),
        "error_detail": (report.get("error_detail") or "")[-800:] or None,
        "apply_strategy": report.get("apply_strategy"),
        "FAIL_TO_PASS": list_outcome(list(record["FAIL_TO_PASS"]),
                                     list((status.get("FAIL_TO_PASS") or {}).get("success") or []), missing),
        "PASS_TO_PASS": list_outcome(list(record["PASS_TO_PASS"]),
                                     list((status.get("PASS_TO_PASS") or {}).get("success") or []), missing),
        "interpreter": (image.get("interpreter") or {}).get("version"),
        "prepare_seconds": image.get("prepare_seconds"),
        "tests_seconds": (report.get("timings") or {}).get("tests"),
    }


def summarize(sdist: str, spec: str, base: str, dropped: list[str], chosen: dict | None, tried: list[dict],
              runs: dict, harness_commit: str) -> dict:
    """The summary written to WORK_DIR/summary.json."""
    summary = {"sdist": sdist, "spec": spec, "release_tree_commit": base, "harness_commit": harness_commit,
               "dropped_from_sdist": len(dropped),
               "chosen": chosen and {"instance_id": chosen["instance_id"], "graded_as": chosen["instance_id"] + SUFFIX,
                                     "dataset_base_commit": chosen["base_commit"],
                                     "created_at": chosen.get("created_at"),
                                     "FAIL_TO_PASS": len(chosen["FAIL_TO_PASS"]),
                                     "PASS_TO_PASS": len(chosen["PASS_TO_PASS"])},
               "tried": tried, **runs}
    if chosen is None:
        summary["error"] = (f"no record of {spec} has both patches applying to {sdist}'s tree"
                            if tried else f"no record of {spec} in the data")
    return summary


def compact(summary: dict) -> dict:
    """One summary as a row of the committed results: what was graded, what applied, the
    verdicts and the counts (the failing and missing ids of the reference run kept whole)."""
    chosen = summary.get("chosen") or {}
    applied = next((t for t in summary.get("tried", []) if "rejected" not in t), None)
    row: dict = {"spec": summary["spec"], "sdist": summary["sdist"], "harness_commit": summary["harness_commit"],
                 "instance": chosen.get("instance_id"), "records_tried": len(summary.get("tried", [])),
                 "rejected": {t["instance_id"]: ("already released" if any(
                     e.startswith("already in the tree") for e in (t.get("errors") or {}).values())
                     else t["rejected"]) for t in summary.get("tried", []) if "rejected" in t},
                 "offsets": (applied or {}).get("offsets", {})}
    for kind in ("gold", "empty"):
        run = summary.get(kind)
        if not run:
            continue
        if run.get("skipped"):
            row[kind] = {"skipped": run["skipped"]}
            continue
        row[kind] = {"status": run.get("status"), "error_reason": run.get("error_reason"),
                     "prepare_seconds": run.get("prepare_seconds"), "tests_seconds": run.get("tests_seconds"),
                     "wall_seconds": run.get("wall_seconds"), "interpreter": run.get("interpreter")}
        for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            counts = run.get(group) or {}
            row[kind][group] = {k: counts.get(k) for k in ("listed", "passed", "failed", "missing")}
            if kind == "gold" and (counts.get("failed") or counts.get("missing")):
                row[kind][group].update(failed_ids=counts.get("failed_ids"), missing_ids=counts.get("missing_ids"))
    if summary.get("error"):
        row["error"] = summary["error"]
    return row


def _version_key(spec: str) -> tuple:
    repo, _, version = spec.partition("@")
    return repo, tuple(int(p) if p.isdigit() else p for p in version.split("."))


def table_row(row: dict) -> str:
    """One results row as a line of docs/REAL_INSTANCES.md's table."""
    def counts(run: dict, group: str) -> str:
        c = (run or {}).get(group) or {}
        if not c.get("listed"):
            return "-"
        extra = ", ".join(f"{c[k]} {k}" for k in ("failed", "missing") if c.get(k))
        return f"{c.get('passed')}/{c.get('listed')}" + (f" ({extra})" if extra else "")

    repo, _, number = row["spec"].partition("@")
    version = f"{repo.rpartition('/')[2]} {number}"
    if not row.get("gold"):
        if not row.get("instance"):
            return f"| {version} | {row['sdist']} | none applies | - | - | - | - | - | - | {row['harness_commit']} |"
        return f"| {version} | {row['sdist']} | {row['instance']} | applies; not graded | - | - | - | - | - | " \
               f"{row['harness_commit']} |"
    shifted = [f"{name} {len(lines)} hunk(s) offset" for name, lines in (row.get("offsets") or {}).items()]
    applied = "patch + test patch" + (f" ({'; '.join(shifted)})" if shifted else ", no offsets")
    gold, empty = row.get("gold") or {}, row.get("empty") or {}
    build = sum(v for v in (gold.get("prepare_seconds") or {}).values() if isinstance(v, (int, float)))
    verdict = (lambda run: f"**{run.get('status')}**" + (f" ({run['error_reason']})" if run.get("error_reason") else "")
               if run.get("status") else "not run" + (" (reference INVALID)" if run.get("skipped") else ""))
    return (f"| {version} | {row['sdist']} | {row['instance']} | {applied} | {verdict(gold)} | {verdict(empty)} | "
            f"{counts(gold, 'FAIL_TO_PASS')} / {counts(empty, 'FAIL_TO_PASS')} | "
            f"{counts(gold, 'PASS_TO_PASS')} / {counts(empty, 'PASS_TO_PASS')} | "
            f"{build:.0f} s + tests {gold.get('tests_seconds') or 0:.0f} s | {row['harness_commit']} |")


def collect(out: Path, summaries: list[Path]) -> list[dict]:
    """Compact every summary into ``out``, sorted by repository and version: the graded ones as
    ``rows``, the ``--check-only`` ones (the releases tried for a version) as ``choices``.
    Returns the rows of the docs' table: every graded row, and the choices of a version that
    has none."""
    loaded = [json.loads(p.read_text()) for p in summaries]
    rows = sorted((compact(s) for s in loaded if "gold" in s), key=lambda r: (_version_key(r["spec"]), r["sdist"]))
    choices = sorted(({"spec": s["spec"], "sdist": s["sdist"], "chosen": (s.get("chosen") or {}).get("instance_id"),
                       "records_tried": len(s.get("tried", [])),
                       "already_released": sum(any(e.startswith("already in the tree") for e in
                                                   (t.get("errors") or {}).values()) for t in s.get("tried", []))}
                      for s in loaded if "gold" not in s), key=lambda r: (_version_key(r["spec"]), r["sdist"]))
    out.write_text(json.dumps({"what": "release-tree proxies (scripts/release_tree_proxy.py): per Verified version, "
                                       "the release tree, the record graded there and both verdicts (rows), and "
                                       "the releases tried for each version (choices); docs/REAL_INSTANCES.md "
                                       "explains them", "rows": rows, "choices": choices}, indent=1) + "\n")
    graded = {r["spec"] for r in rows}
    ungraded = [compact(s) for s in loaded if "gold" not in s and s["spec"] not in graded]
    return sorted(rows + ungraded, key=lambda r: (_version_key(r["spec"]), r["sdist"]))


def harness_commit() -> str:
    proc = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True)
    return proc.stdout.strip() or "unknown"


def _sdist_requirement(text: str) -> str:
    name, sep, version = text.partition("==")
    if not (sep and name.strip() and version.strip()):
        raise argparse.ArgumentTypeError(f"expected NAME==VERSION, got {text!r}")
    return text


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["collect"]:
        # release_tree_proxy.py collect OUT.json SUMMARY.json...: the committed results, and the docs' rows
        for row in collect(Path(argv[1]), [Path(a) for a in argv[2:]]):
            print(table_row(row))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", help="OWNER/NAME of the spec and the records")
    p.add_argument("version", help="the spec version (the records' `version`)")
    p.add_argument("sdist", type=_sdist_requirement, help="NAME==VERSION on the index: the release tree")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the Verified records (JSONL)")
    p.add_argument("--instance-id", help="only this record (still checked to apply)")
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--output-dir", type=Path)
    p.add_argument("--max-workers", default="1")
    p.add_argument("--check-only", action="store_true", help="choose the record, grade nothing")
    args = p.parse_args(argv)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="release-tree-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    from harness.errors import HarnessError
    try:
        repo, base, dropped = sdist_repository(args.sdist, work)
    except HarnessError as exc:
        print(f"release_tree_proxy: {args.sdist}: {exc}", file=sys.stderr)
        return 2
    records = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    chosen, tried = choose(candidates(records, args.repo, args.version, args.instance_id),
                           lambda patch: check_apply(repo, patch))
    runs: dict = {"tree_seconds": round(time.monotonic() - started, 1)}
    spec = f"{args.repo}@{args.version}"
    commit = harness_commit()
    if chosen is not None and not args.check_only:
        from harness.cli import main as harness
        record = proxy_record(chosen, base, args.sdist)
        instances = work / "instance.json"
        instances.write_text(json.dumps([record]))
        run_id = f"proxy-{args.repo.replace('/', '__')}-{args.version}-{int(time.time())}"
        output = args.output_dir or work / "runs"
        extra = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
        # the reference patch first (it builds every image), then the empty patch on the same images
        for kind in ("gold", "empty"):
            if kind == "empty" and runs["gold"].get("status") in (None, "INVALID"):
                runs[kind] = {"skipped": "the reference run was not graded (INVALID): nothing to compare"}
                break
            t0 = time.monotonic()
            code = harness(["run", "--instances", str(instances), "--predictions", kind, "--repo",
                            f"{args.repo}={repo}", "--no-clone", "--run-id", f"{run_id}-{kind}", "--output-dir",
                            str(output), "--max-workers", args.max_workers, "--quiet", *extra])
            report_path = output / f"{run_id}-{kind}" / record["instance_id"] / "report.json"
            if report_path.exists():
                runs[kind] = {"exit": code, **outcome(json.loads(report_path.read_text()), chosen)}
            else:
                runs[kind] = {"exit": code, "status": None, "error_reason": "no report.json"}
            runs[kind].update(wall_seconds=round(time.monotonic() - t0, 1), run_dir=str(output / f"{run_id}-{kind}"))
            print(json.dumps({kind: {k: runs[kind].get(k) for k in ("status", "error_reason", "wall_seconds")}}),
                  flush=True)
    summary = summarize(args.sdist, spec, base, dropped, chosen, tried, runs, commit)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"{work / 'summary.json'}: {summary['chosen'] and summary['chosen']['instance_id']}, "
          f"reference {runs.get('gold', {}).get('status')}, empty {runs.get('empty', {}).get('status')}")
    if chosen is None:
        print(summary["error"], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
