"""Do our verdicts agree with SWE-bench's own grading code, fed our test outputs?

For every instance of one or more run directories (``harness run`` / ``harness validate``
output), this reads the saved ``test_output.txt`` and the graded ``instance.json``, parses
the output with SWE-bench's log parser for the repository and grades it with SWE-bench's
``get_eval_tests_report`` / ``get_resolution_status`` (the ``swebench`` package from PyPI),
and compares the result with our ``report.json``:

* ``agree``     — SWE-bench's FULL/PARTIAL/NO equals ours;
* ``disagree``  — both graded, differently (each differing test is listed);
* ``invalid``   — we refused to grade (INVALID, with our reason); SWE-bench's verdict on the
                  same output is shown but not counted as agreement.

Separately, ``resolved_agree`` counts evaluations (INVALID ones included) where both say the
same about *resolved* (ours: FULL; SWE-bench: FULL), the number a leaderboard uses.

Run it with an interpreter that has ``swebench`` installed, never the project's own
environment (it is not a dependency of the harness)::

    python3 -m venv /work/venvs/swebench && /work/venvs/swebench/bin/pip install swebench==5.0.2
    /work/venvs/swebench/bin/python scripts/swebench_agreement.py RUN_DIR [RUN_DIR ...] [--json OUT] [--markdown]

``--markdown`` also prints the per-instance table (ours / SWE-bench's verdict per run) of
docs/REAL_INSTANCES.md.

Exit status 0 when every graded instance agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def swebench_grade(repo: str, log_parser: str | None, output: str, f2p: list[str], p2p: list[str]) -> tuple[str, dict]:
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY
    parse = PARSER_REGISTRY[log_parser] if log_parser in PARSER_REGISTRY else MAP_REPO_TO_PARSER_PY[repo]
    status_map = parse(output, None)
    report = get_eval_tests_report(status_map, {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p})
    return get_resolution_status(report).removeprefix("RESOLVED_"), report


def compare(run_dirs: list[Path]) -> dict:
    rows = []
    for run_dir in run_dirs:
        for report_path in sorted(run_dir.glob("*/report.json")) + sorted(run_dir.glob("*/attempt-*/report.json")):
            directory = report_path.parent
            ours = json.loads(report_path.read_text())
            record = json.loads((directory / "instance.json").read_text())
            output_path = directory / "test_output.txt"
            if not output_path.exists():
                rows.append({"run": run_dir.name, "instance_id": ours["instance_id"], "ours": ours["status"],
                             "our_reason": ours.get("error_reason"), "swebench": None, "outcome": "invalid",
                             "differences": []})
                continue
            theirs, report = swebench_grade(record["repo"], record.get("log_parser"),
                                            output_path.read_text(errors="replace"),
                                            record["FAIL_TO_PASS"], record["PASS_TO_PASS"])
            differences = []
            ours_ts = ours["tests_status"]
            for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
                our_ok, their_ok = set(ours_ts[group]["success"]), set(report[group]["success"])
                differences += [f"{group} {t}: ours {'pass' if t in our_ok else 'fail'}, "
                                f"SWE-bench {'pass' if t in their_ok else 'fail'}"
                                for t in sorted(our_ok ^ their_ok)]
            if ours["status"] == "INVALID":  # we graded nothing: no per-test differences to show
                outcome, differences = "invalid", []
            else:
                outcome = "agree" if ours["status"] == theirs else "disagree"
            rows.append({"run": run_dir.name, "instance_id": ours["instance_id"], "ours": ours["status"],
                         "our_reason": ours.get("error_reason"), "swebench": theirs, "outcome": outcome,
                         "resolved_agree": (ours["status"] == "FULL") == (theirs == "FULL"),
                         "differences": differences[:20]})
    counts = Counter(r["outcome"] for r in rows)
    return {"evaluations": len(rows), "agree": counts["agree"], "disagree": counts["disagree"],
            "invalid": counts["invalid"], "resolved_agree": sum(bool(r.get("resolved_agree")) for r in rows),
            "rows": rows}


def markdown_table(result: dict) -> str:
    """One row per instance, one column per run: our verdict (with our reason when INVALID)
    and SWE-bench's on the same output."""
    runs = sorted({r["run"] for r in result["rows"]})
    cells: dict[str, dict[str, str]] = {}
    for row in result["rows"]:
        ours = row["ours"] + (f" ({row['our_reason']})" if row["our_reason"] else "")
        cells.setdefault(row["instance_id"], {})[row["run"]] = f"{ours} / {row['swebench'] or '-'}"
    lines = ["| instance | " + " | ".join(f"{run}: ours / SWE-bench" for run in runs) + " |",
             "|---|" + "---|" * len(runs)]
    for iid in sorted(cells, key=lambda i: (i.rsplit("-", 1)[0], int(i.rsplit("-", 1)[1]) if i.rsplit("-", 1)[1].isdigit() else 0)):
        lines.append(f"| {iid} | " + " | ".join(cells[iid].get(run, "") for run in runs) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (a validate directory's gold-N/empty)")
    parser.add_argument("--json", type=Path, help="write the comparison here")
    parser.add_argument("--markdown", action="store_true", help="print the per-instance table")
    args = parser.parse_args(argv)
    run_dirs = []
    for path in args.runs:  # a `harness validate` directory holds one run directory per repeat
        if any(path.glob("*/report.json")):
            run_dirs.append(path)
        else:
            run_dirs += sorted(p for p in path.iterdir() if any(p.glob("*/report.json")))
    result = compare(run_dirs)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    for row in result["rows"]:
        if row["outcome"] != "agree":
            print(f"{row['run']}/{row['instance_id']}: {row['outcome']}: ours {row['ours']}"
                  f"{' (' + row['our_reason'] + ')' if row['our_reason'] else ''}, SWE-bench {row['swebench']}")
            for line in row["differences"][:5]:
                print(f"    {line}")
    if args.markdown:
        print(markdown_table(result))
    print(f"{result['evaluations']} evaluations: {result['agree']} agree, {result['disagree']} disagree, "
          f"{result['invalid']} not graded by us (INVALID); resolved or not: {result['resolved_agree']} agree")
    return 0 if result["disagree"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
