"""Host-side parsing at its worst: what the code under test can make the host spend.

Each case builds the largest artefact the caps allow (or, for the flood, what the attack
of issue 11 printed) and parses it in a fresh subprocess with the same function the
grading uses; the subprocess reports wall and CPU seconds and its peak memory
(``VmHWM``, the process's own high-water mark: ``ru_maxrss`` survives ``exec``). ``--before DIR`` runs the same cases with the parsers of another
checkout (e.g. the code before issue 11), each under ``--limit`` seconds.

    .venv/bin/python benchmarks/parsing.py [--before /path/to/checkout] [--limit 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from harness.grading import parsers
kind, path = sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
graded = ["tests/test_flood.py::test_case_1", "t.py::test_p[a b c]"]
start, cpu = time.monotonic(), time.process_time()
try:
    if kind == "junit":
        result = parsers.parse_junit(data, ["tests/test_a.py"])
    elif kind == "sympy":
        import harness.grading.reporter_parsers  # registers the reporter's parsers
        xml, _, text = data.partition(b"\n--SPLIT--\n")
        result = parsers.get_parser("sympy")(parsers.RunArtefacts(output=text.decode(), junit_xml=xml))
    else:
        result = parsers.parse_pytest_text(data.decode(), graded)
    outcome = f"{len(result.statuses)} ids, {len(result.conflicts)} conflicts, notes {result.notes[:1]}"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:120]}"
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"wall": time.monotonic() - start, "cpu": time.process_time() - cpu,
                  "maxrss_mb": hwm / 1024, "outcome": outcome, "input_mb": len(data) / 2**20}))
'''


def cases(directory: Path) -> dict[str, tuple[str, Path]]:
    """name -> (kind, file)."""
    out = {}
    header = "=" * 20 + " short test summary info " + "=" * 20 + "\n"
    flood = [header] + [f"PASSED tests/test_flood.py::test_case_{i}\nFAILED tests/test_flood.py::test_case_{i} - A\n"
                        for i in range(60_000)]
    out["text: the issue's flood (120k contradictory lines, 4.3 MB)"] = ("text", "".join(flood))
    line = "PASSED " + " ".join(["t.py::test_p[a"] + ["b"] * 150) + "\n"
    out["text: 100k summary lines of 150 spaces each (~31 MiB: the output cap)"] = (
        "text", header + line * 100_000)
    out["junit: 60 MiB of empty elements (the issue's bomb)"] = (
        "junit", "<testsuites>" + "<a/>" * (60 * 2**20 // 4) + "</testsuites>")
    case = '<testcase classname="tests.test_a" name="test_{i}" file="tests/test_a.py"><failure/></testcase>'
    out["junit: 200k test cases (the cap), each failing"] = (
        "junit", "<testsuite>" + "".join(case.format(i=i) for i in range(200_000)) + "</testsuite>")
    big = '<testcase classname="tests.test_a" name="test_{i}_' + "x" * 8000 + '" file="tests/test_a.py"/>'
    out["junit: 8,000 test cases with 8,000-character names (~61 MiB, under the byte cap)"] = (
        "junit", "<testsuite>" + "".join(big.format(i=i) for i in range(7_900)) + "</testsuite>")
    sympy_case = ('<testcase file="s/tests/test_a.py" classname="s.tests.test_a" name="test_{i}">'
                  '<failure/></testcase>')
    out["sympy: reporter XML of 60 MiB of empty elements"] = (
        "sympy", "<testsuites>" + "<a/>" * (60 * 2**20 // 4) + "</testsuites>\n--SPLIT--\n")
    out["sympy: 20k failing tests in the XML, 200k printed lines claiming them and 100k others ok"] = (
        "sympy", "<testsuite>" + "".join(sympy_case.format(i=i) for i in range(20_000)) + "</testsuite>"
        + "\n--SPLIT--\n" + "s/tests/test_a.py[20000] \n"
        + "".join(f"test_{i % 20_000} ok\n" for i in range(200_000))
        + "".join(f"test_other_{i} ok\n" for i in range(100_000)))
    written = {}
    for n, (name, (kind, text)) in enumerate(out.items()):
        path = directory / f"case-{n}"
        path.write_bytes(text.encode())
        written[name] = (kind, path)
    return written


def run(checkout: Path, kind: str, path: Path, limit: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(checkout), kind, str(path)], capture_output=True,
                              text=True, timeout=limit)
        return json.loads(proc.stdout) if proc.returncode == 0 else {"outcome": proc.stderr[-300:]}
    except subprocess.TimeoutExpired:
        return {"outcome": f"not finished after {limit:.0f} s (killed)", "wall": None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, help="a checkout whose parsers to run side by side")
    p.add_argument("--limit", type=float, default=300)
    p.add_argument("--out", type=Path)
    p.add_argument("--only", help="only the cases whose name starts with this (e.g. 'sympy')")
    args = p.parse_args(argv)
    machine = C.machine_info()
    rows, raw = [], {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-parsing-") as tmp:
        for name, (kind, path) in cases(Path(tmp)).items():
            if args.only and not name.startswith(args.only):
                continue
            sides = {"now": run(C.PROJECT_ROOT, kind, path, args.limit)}
            if args.before:
                sides["before"] = run(args.before.resolve(), kind, path, args.limit)
            raw[name] = sides
            for side, r in sides.items():
                rows.append([name, side, f"{os.path.getsize(path) / 2**20:.1f}",
                             C.fmt(r["wall"]) if r.get("wall") is not None else "-",
                             C.fmt(r["cpu"]) if r.get("cpu") is not None else "-",
                             f"{r['maxrss_mb']:.0f}" if r.get("maxrss_mb") else "-", r["outcome"]])
    text = "\n".join([C.header("Host-side parsing at its worst (one subprocess per case)", machine),
                      C.markdown_table(["case", "code", "input (MiB)", "wall (s)", "CPU (s)", "peak RSS (MB)",
                                        "outcome"], rows)])
    print(text)
    out = C.write_results("parsing", {"machine": machine, "command": C.command_line(), "cases": raw,
                                      "markdown": text}, args.out)
    print(f"\nraw results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
