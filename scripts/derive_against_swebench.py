"""Test lists derived here against SWE-bench's own (docs/DERIVED_LISTS.md).

    .venv/bin/python scripts/derive_against_swebench.py run --sample 20 --repeat 2 --max-workers 2 \
        --output-dir /work/tmp-h5/derive-sample         # 20 Lite + 20 Verified records
    .venv/bin/python scripts/derive_against_swebench.py run --sample 0 ...   # every held record (138 + 198)
    .venv/bin/python scripts/derive_against_swebench.py compare DIR          # the comparison again
    .venv/bin/python scripts/derive_against_swebench.py from-runs --validation runs/whole-lite-C \
        runs/whole-verified-C --output-dir runs/derive-from-validation-C  # lists from a validation's runs

1. **Selection**: the records of ``lite-test.jsonl`` and ``verified-test.jsonl`` (``--data``)
   whose base commit is held in ``--repos-dir`` (scripts/validate_whole_set.py ``select``:
   138 Lite, 198 Verified). ``--sample N`` takes N of each set, round robin over the
   repositories in instance-id order, Verified's chosen among those not already taken from
   Lite (0: all of both, each record once).
2. **Derivation**: the chosen records with FAIL_TO_PASS and PASS_TO_PASS removed go through
   ``harness instances derive`` (``DIR/input.jsonl`` → ``DIR/derived.jsonl``, the runs in
   ``DIR/runs/``).
   ``from-runs`` decides the lists instead from the runs of a finished whole-set validation
   (scripts/validate_whole_set.py: ``gold-1`` … ``gold-N`` with the fix, ``empty`` without
   it), with the same reading of each run (harness/evaluation/outcomes.py) and the same
   decision (harness/results/derivation.py ``decide``). Those runs are the one evaluation
   path on the same records; what differs from ``instances derive`` is that the records
   carried their lists while they ran (read only by grading and by where canaries go, both
   left out of the outcomes) and how many runs each side has. An instance of both sets is
   decided from the runs of both validations.
3. **Comparison** (``DIR/comparison.json``, ``DIR/comparison.md``): per record, whether each
   derived list equals SWE-bench's (as sets), and every test in one and not the other with
   what the derivation saw of it (flaky, failing in both, skipped, missing, not run), so that
   each difference can be classified.
"""

from __future__ import annotations

import argparse
import json
import re
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


def decide_from_validations(validations: list[Path], root: Path, xfail: str) -> dict:
    """``root/expected.jsonl``, ``root/derived.jsonl`` and its table, decided from the runs
    of finished whole-set validations (``from-runs``). Returns the meta of the derivation."""
    sys.path.insert(0, str(ROOT))
    from harness.atomic import write_json_atomic, write_text_atomic
    from harness.evaluation.outcomes import run_outcomes
    from harness.results.derivation import decide, render_markdown
    expected: list[dict] = []
    runs: dict[str, dict[str, list[Path]]] = {}
    for validation in validations:
        command = json.loads((validation / "whole-set.json").read_text())["command"].split()
        name = command[command.index("--set") + 1]
        with_fix = sorted(validation.glob("gold-*"), key=lambda p: int(p.name.split("-")[1]))
        without = [validation / "empty"]
        for line in (validation / "instances.jsonl").read_text().splitlines():
            if not line.strip():
                continue
            record = {**json.loads(line), "_set": name}
            expected.append(record)
            sides = runs.setdefault(record["instance_id"], {"with": [], "without": [], "record": record})
            sides["with"] += [_instance_dir(d, record["instance_id"]) for d in with_fix]
            sides["without"] += [_instance_dir(d, record["instance_id"]) for d in without]
    write_text_atomic(root / "expected.jsonl", "".join(json.dumps(r) + "\n" for r in expected))
    records, rows = [], []
    for iid, sides in runs.items():
        result = decide(iid, [run_outcomes(d, without_fix=True) for d in sides["without"]],
                        [run_outcomes(d, without_fix=False) for d in sides["with"]], xfail)
        row = result.row()
        row["runs"] = {"with": len(sides["with"]), "without": len(sides["without"])}
        rows.append(row)
        if result.refused is None:
            record = {k: v for k, v in sides["record"].items() if k != "_set"}
            records.append({**record, "FAIL_TO_PASS": result.fail_to_pass, "PASS_TO_PASS": result.pass_to_pass})
    table = {"input": ", ".join(str(v) for v in validations), "output": str(root / "derived.jsonl"),
             "repeat": "the validation's", "xfail": xfail, "runs_dir": ", ".join(str(v) for v in validations),
             "derived": sum(r["status"] == "derived" for r in rows),
             "refused": sum(r["status"] == "refused" for r in rows), "instances": rows}
    write_json_atomic(root / "derived.jsonl.derivation.json", table)
    write_text_atomic(root / "derived.jsonl.derivation.md", render_markdown(table))
    write_text_atomic(root / "derived.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    commits = sorted({json.loads((run / "manifest.json").read_text()).get("harness_commit") or "?"
                      for v in validations for run in [*v.glob("gold-*"), v / "empty"]})
    return {"command": "scripts/derive_against_swebench.py from-runs --validation "
                       + " ".join(str(v) for v in validations), "commit": ", ".join(c[:12] for c in commits),
            "wall_minutes": "the validations'", "records": len(runs), "set_records": len(expected),
            "validations": [str(v) for v in validations]}


def _instance_dir(run: Path, instance_id: str) -> Path:
    """An instance's directory in ``run``: in a merged validation (``validate_whole_set.py
    --merge``) a link into the part's run, read where it points."""
    from harness.paths import RunPaths
    return RunPaths((run / instance_id).resolve().parent).instance_dir(instance_id)


#: bin/test's output: a file's header, and a test's line (the file's last test has the
#: file's ``[OK]``/``[FAIL]`` after its outcome)
_SYMPY_FILE = re.compile(r"^\S+\.py\[\d+\](?:\s|$)")
_SYMPY_TEST = re.compile(r"^(test_\w+) (ok|F|E|f|X)\b")


def _unread_by_swebench(output: str, canaries: set[str]) -> set[str]:
    """The sympy tests SWE-bench's sympy log parser reads no status from. It reads a line
    that ends in `` ok``, `` F`` or `` E``; so not an @XFAIL test that passed (``X``), and not
    the last test of each file, whose line ends in the file's ``[OK]``/``[FAIL]``. The last
    test is the last one that is not a canary: the canaries planted here come after the
    file's own tests, and SWE-bench's run had none."""
    unread: set[str] = set()
    block: list[str] = []
    for line in [*output.splitlines(), "end.py[0]"]:
        if _SYMPY_FILE.match(line):
            own = [name for name in block if name not in canaries]
            unread.update(own[-1:])
            block = []
            continue
        match = _SYMPY_TEST.match(line.rstrip())
        if match:
            block.append(match.group(1))
            if match.group(2) == "X":
                unread.add(match.group(1))
    return unread


def classify_mechanically(result: dict, validations: list[Path]) -> None:
    """Mark each difference a rule can name without judgement (in place): a sympy test on a
    line SWE-bench's log parser reads no status from (``swebench_parser_unread``), and a
    SWE-bench id that is not a test but a fragment of pytest's output (``swebench_log_fragment``).
    A record whose every difference is so marked is counted ``*_as_swebench_reads``: equal
    but for what SWE-bench's log parsers cannot read. The rest are classified by hand
    (docs/DERIVED_LISTS.md)."""
    sys.path.insert(0, str(ROOT))
    from harness.grading.conventions import IdKind, get_convention
    fragment = get_convention("pytest").classify
    from harness.results.report import InstanceResult
    unread_of: dict[tuple[str, str], set[str]] = {}
    for validation in validations:
        command = json.loads((validation / "whole-set.json").read_text())["command"].split()
        name = command[command.index("--set") + 1]
        for directory in (validation / "gold-1").iterdir():
            if directory.name.startswith("sympy__") and (directory / "test_output.txt").is_file():
                report = InstanceResult.from_report(json.loads((directory / "report.json").read_text()))
                canaries = {str(c.get("test_id")).rsplit("::", 1)[-1]
                            for c in report.integrity_details.get("canaries") or [] if isinstance(c, dict)}
                unread_of[(name, directory.name)] = _unread_by_swebench(
                    (directory / "test_output.txt").read_text(errors="replace"), canaries)
    for entry_key, entry in result["instances"].items():
        unread = unread_of.get((entry["set"], entry_key.split(":", 1)[1]), set())
        marks: dict[str, str] = {}
        for key in ("f2p_only_swebench", "f2p_only_here", "p2p_only_swebench", "p2p_only_here"):
            for test in entry.get(key) or []:
                if test in unread:
                    marks[test] = "swebench_parser_unread"
                elif key.endswith("swebench") and fragment(test) is IdKind.LOG_FRAGMENT:
                    marks[test] = "swebench_log_fragment"
        entry["mechanical"] = marks
        for side, keys in (("f2p", ("f2p_only_swebench", "f2p_only_here")),
                           ("p2p", ("p2p_only_swebench", "p2p_only_here"))):
            differing = [t for k in keys for t in (entry.get(k) or [])]
            entry[f"{side}_equal_as_swebench_reads"] = entry.get(f"{side}_equal", False) or (
                entry.get("status") == "derived" and all(t in marks for t in differing))
    for name, totals in result["sets"].items():
        part = [e for e in result["instances"].values() if name == "all" or e["set"] == name]
        for side in ("f2p", "p2p"):
            totals[f"{side}_equal_as_swebench_reads"] = sum(e[f"{side}_equal_as_swebench_reads"] for e in part)


def render(result: dict, meta: dict) -> str:
    def share(count: int, total: int) -> str:
        return f"{count} ({100 * count / max(total, 1):.0f}%)"
    read = any("f2p_equal_as_swebench_reads" in s for s in result["sets"].values())
    lines = ["| set | records | FAIL_TO_PASS equal | PASS_TO_PASS equal | refused |"
             + (" F2P equal as SWE-bench reads | P2P equal as SWE-bench reads |" if read else ""),
             "|---|---|---|---|---|" + ("---|---|" if read else "")]
    for name, s in result["sets"].items():
        lines.append(f"| {name} | {s['records']} | {share(s['f2p_equal'], s['records'])} | "
                     f"{share(s['p2p_equal'], s['records'])} | {s['refused']} |"
                     + (f" {share(s['f2p_equal_as_swebench_reads'], s['records'])} | "
                        f"{share(s['p2p_equal_as_swebench_reads'], s['records'])} |" if read else ""))
    lines += ["", f"command: `{meta.get('command', '')}`; harness commit {meta.get('commit', '?')}; "
              f"{meta.get('wall_minutes', '?')} min", "", "| instance | set | F2P | P2P | differences |",
              "|---|---|---|---|---|"]
    for iid, e in sorted(result["instances"].items()):
        if e["f2p_equal"] and e["p2p_equal"]:
            continue
        parts = []
        if e.get("status") == "refused":
            parts.append(f"refused: {e.get('reason')}")
        marks = e.get("mechanical") or {}
        for key in ("f2p_only_swebench", "f2p_only_here", "p2p_only_swebench", "p2p_only_here"):
            items = e.get(key) or {}
            if items:
                shown = [f"{t} ({', '.join(x for x in (items[t] if isinstance(items, dict) else '', marks.get(t, '')) if x)})"
                         if isinstance(items, dict) or t in marks else t for t in list(items)[:4]]
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
    from_runs = sub.add_parser("from-runs")
    from_runs.add_argument("--validation", type=Path, nargs="+", required=True,
                           help="finished scripts/validate_whole_set.py directories (gold-N and empty runs)")
    from_runs.add_argument("--output-dir", type=Path, required=True)
    from_runs.add_argument("--xfail", choices=("pass", "leave-out"), default="leave-out")
    again = sub.add_parser("compare")
    again.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.command == "compare":
        root = args.root.resolve()
        meta = json.loads((root / "meta.json").read_text()) if (root / "meta.json").exists() else {}
    elif args.command == "from-runs":
        for validation in args.validation:
            if not (validation / "whole-set.json").is_file():
                parser.error(f"--validation {validation}: not a finished whole-set validation (no whole-set.json)")
        root = args.output_dir.resolve()
        root.mkdir(parents=True, exist_ok=True)
        meta = decide_from_validations([v.resolve() for v in args.validation], root, args.xfail)
        (root / "meta.json").write_text(json.dumps(meta, indent=1))
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
    if meta.get("validations"):
        classify_mechanically(result, [Path(v) for v in meta["validations"]])
    (root / "comparison.json").write_text(json.dumps(result, indent=1))
    text = render(result, meta)
    (root / "comparison.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
