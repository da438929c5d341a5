"""Test lists derived here against SWE-bench's own (docs/DERIVED_LISTS.md).

    .venv/bin/python scripts/derive_against_swebench.py run --sample 20 --repeat 2 --max-workers 2 \
        --output-dir /work/tmp-h5/derive-sample         # 20 Lite + 20 Verified records
    .venv/bin/python scripts/derive_against_swebench.py run --sample 0 ...   # every held record (138 + 198)
    .venv/bin/python scripts/derive_against_swebench.py compare DIR          # the comparison again

1. **Selection**: the records of ``lite-test.jsonl`` and ``verified-test.jsonl`` (``--data``)
   whose base commit is held in ``--repos-dir`` (scripts/validate_whole_set.py ``select``:
   138 Lite, 198 Verified). ``--sample N`` takes N of each set, round robin over the
   repositories in instance-id order, Verified's chosen among those not already taken from
   Lite (0: all of both, each record once).
2. **Derivation**: the chosen records with FAIL_TO_PASS and PASS_TO_PASS removed go through
   ``harness instances derive`` (``DIR/input.jsonl`` → ``DIR/derived.jsonl``, the runs in
   ``DIR/runs/``).
3. **Comparison** (``DIR/comparison.json``, ``DIR/comparison.md``): per record, whether each
   derived list equals SWE-bench's (as sets), and every test in one and not the other with
   what the derivation saw of it (flaky, failing in both, skipped, missing, not run), so that
   each difference can be classified.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "swebench"
SETS = {"lite": "lite-test.jsonl", "verified": "verified-test.jsonl"}


def _records(data: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (data / SETS[name]).read_text().splitlines() if line.strip()]


def _lists(record: dict) -> tuple[list[str], list[str]]:
    def one(value) -> list[str]:
        return json.loads(value) if isinstance(value, str) else list(value or [])
    return one(record.get("FAIL_TO_PASS")), one(record.get("PASS_TO_PASS"))


def round_robin(records: list[dict], count: int, taken: set[str]) -> list[dict]:
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(records, key=lambda r: r["instance_id"]):
        if record["instance_id"] not in taken:
            by_repo[record["repo"]].append(record)
    chosen: list[dict] = []
    while len(chosen) < count and any(by_repo.values()):
        for repo in sorted(by_repo):
            if by_repo[repo] and len(chosen) < count:
                chosen.append(by_repo[repo].pop(0))
    return chosen


def choose(data: Path, repos_dir: Path, sample: int) -> list[dict]:
    """The records compared, each marked with its set (``_set``); with ``sample`` 0 an
    instance in both sets is compared with each set's record (their lists may differ)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from validate_whole_set import select
    chosen: list[dict] = []
    taken: set[str] = set()
    for name in ("lite", "verified"):
        held, _ = select(_records(data, name), repos_dir)
        part = round_robin(held, sample, taken) if sample else held
        for record in part:
            record["_set"] = name
        taken.update(r["instance_id"] for r in part)
        chosen += part
    return chosen


def compare(root: Path) -> dict:
    """The comparison of ``root/derived.jsonl`` (and its table) with ``root/expected.jsonl``."""
    expected = {f"{r['_set']}:{r['instance_id']}": r for r in
                (json.loads(line) for line in (root / "expected.jsonl").read_text().splitlines() if line.strip())}
    derived_path = root / "derived.jsonl"
    derived = {json.loads(line)["instance_id"]: json.loads(line)
               for line in derived_path.read_text().splitlines() if line.strip()} if derived_path.exists() else {}
    table = json.loads((root / "derived.jsonl.derivation.json").read_text())
    rows = {r["instance_id"]: r for r in table["instances"]}
    out: dict = {"instances": {}, "sets": {}}
    for key, record in expected.items():
        iid = record["instance_id"]
        want_f2p, want_p2p = _lists(record)
        row = rows.get(iid, {})
        entry: dict = {"set": record.get("_set"), "repo": record["repo"], "status": row.get("status"),
                       "reason": row.get("reason")}
        if iid in derived:
            got_f2p, got_p2p = _lists(derived[iid])
            seen = {t: k for k, v in (row.get("left_out") or {}).items() for t in v}
            seen.update({t: "flaky" for t in row.get("flaky") or []})
            seen.update({t: "FAIL_TO_PASS" for t in got_f2p})
            seen.update({t: "PASS_TO_PASS" for t in got_p2p})
            entry.update(
                f2p_equal=set(got_f2p) == set(want_f2p), p2p_equal=set(got_p2p) == set(want_p2p),
                f2p_only_swebench={t: seen.get(t, "not run") for t in want_f2p if t not in set(got_f2p)},
                f2p_only_here=[t for t in got_f2p if t not in set(want_f2p)],
                p2p_only_swebench={t: seen.get(t, "not run") for t in want_p2p if t not in set(got_p2p)},
                p2p_only_here=[t for t in got_p2p if t not in set(want_p2p)])
        else:
            entry.update(f2p_equal=False, p2p_equal=False)
        out["instances"][key] = entry
    for name in sorted({e["set"] for e in out["instances"].values()}) + ["all"]:
        part = [e for e in out["instances"].values() if name == "all" or e["set"] == name]
        out["sets"][name] = {"records": len(part), "f2p_equal": sum(e["f2p_equal"] for e in part),
                             "p2p_equal": sum(e["p2p_equal"] for e in part),
                             "refused": sum(e["status"] == "refused" for e in part)}
    return out


def render(result: dict, meta: dict) -> str:
    lines = ["| set | records | FAIL_TO_PASS equal | PASS_TO_PASS equal | refused |", "|---|---|---|---|---|"]
    for name, s in result["sets"].items():
        lines.append(f"| {name} | {s['records']} | {s['f2p_equal']} ({100 * s['f2p_equal'] / max(s['records'], 1):.0f}%)"
                     f" | {s['p2p_equal']} ({100 * s['p2p_equal'] / max(s['records'], 1):.0f}%) | {s['refused']} |")
    lines += ["", f"command: `{meta.get('command', '')}`; harness commit {meta.get('commit', '?')}; "
              f"{meta.get('wall_minutes', '?')} min", "", "| instance | set | F2P | P2P | differences |",
              "|---|---|---|---|---|"]
    for iid, e in sorted(result["instances"].items()):
        if e["f2p_equal"] and e["p2p_equal"]:
            continue
        parts = []
        if e.get("status") == "refused":
            parts.append(f"refused: {e.get('reason')}")
        for key in ("f2p_only_swebench", "f2p_only_here", "p2p_only_swebench", "p2p_only_here"):
            items = e.get(key) or {}
            if items:
                shown = [f"{t} ({items[t]})" if isinstance(items, dict) else t for t in list(items)[:4]]
                parts.append(f"{key} {len(items)}: " + "; ".join(shown) + (" …" if len(items) > 4 else ""))
        text = " / ".join(parts).replace("|", "\\|")
        lines.append(f"| {iid} | {e['set']} | {'=' if e['f2p_equal'] else '≠'} | {'=' if e['p2p_equal'] else '≠'} "
                     f"| {text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--data", type=Path, default=DATA)
    run.add_argument("--repos-dir", type=Path, default=None, help="default: DATA/repos")
    run.add_argument("--sample", type=int, default=20, help="records of each set (0: all)")
    run.add_argument("--repeat", type=int, default=2)
    run.add_argument("--max-workers", type=int, default=2)
    run.add_argument("--output-dir", type=Path, required=True)
    run.add_argument("--timeout", type=int, default=None,
                     help="each test run's seconds (default: the spec's); a suite near it times out without the fix")
    run.add_argument("--xfail", choices=("pass", "leave-out"), default="leave-out",
                     help="harness instances derive --xfail (default leave-out: SWE-bench's lists hold only tests "
                          "that PASSED)")
    again = sub.add_parser("compare")
    again.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.command == "compare":
        root = args.root.resolve()
        meta = json.loads((root / "meta.json").read_text()) if (root / "meta.json").exists() else {}
    else:
        from harness.results.manifest import harness_commit
        root = args.output_dir.resolve()
        root.mkdir(parents=True, exist_ok=True)
        repos_dir = args.repos_dir or args.data / "repos"
        chosen = choose(args.data, repos_dir, args.sample)
        (root / "expected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen))
        unique = {r["instance_id"]: r for r in reversed(chosen)}  # each record derived once
        stripped = [{k: v for k, v in r.items() if k not in ("FAIL_TO_PASS", "PASS_TO_PASS", "_set")}
                    for r in reversed(list(unique.values()))]
        (root / "input.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stripped))
        command = ["instances", "derive", "--instances", str(root / "input.jsonl"), "--out",
                   str(root / "derived.jsonl"), "--repeat", str(args.repeat), "--max-workers", str(args.max_workers),
                   "--repos-dir", str(repos_dir), "--no-clone", "--output-dir", str(root / "runs"), "--xfail",
                   args.xfail, "--quiet", *(["--timeout", str(args.timeout)] if args.timeout else [])]
        print(f"deriving {len(stripped)} records ({len(chosen)} set records) into {root}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", "harness", *command], cwd=ROOT)
        meta = {"command": "harness " + " ".join(command), "commit": (harness_commit() or "unknown")[:12],
                "wall_minutes": round((time.monotonic() - started) / 60, 1), "exit_code": code,
                "records": len(stripped), "set_records": len(chosen)}
        (root / "meta.json").write_text(json.dumps(meta, indent=1))
    result = compare(root)
    (root / "comparison.json").write_text(json.dumps(result, indent=1))
    text = render(result, meta)
    (root / "comparison.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
