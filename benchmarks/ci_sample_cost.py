"""What CI's real-instance sample costs: its test file run cold, then warm, on a private engine.

    .venv/bin/python benchmarks/ci_sample_cost.py [--tests tests/integration/test_real_instances.py]
        [--runs cold warm] [--engine-disk GB] [--min-free GB] [--out FILE] [--markdown] [--keep]
    .venv/bin/python benchmarks/ci_sample_cost.py --tables-from benchmarks/results/ci_sample_cost.json

**Cold** is what CI's fresh machine has: an engine with no image (a private ``dockerd`` on a
loop-mounted file system of its own, ``benchmarks/whole_set.py``'s ``Bench``), and empty
caches: the tests' shared cache (``HARNESS_TEST_CACHE``, else ``~/.cache/harness-tests``),
the harness's cache and state (``HARNESS_CACHE_DIR``, ``HARNESS_STATE_DIR``), ``uv``'s and
pip's caches, pytest's base temporary directory; no pip configuration (this machine's pip
reads local package indexes). The real data is ``HARNESS_SWEBENCH_DATA`` (default
``../shared/swebench``), as CI has it. **Warm** runs the same test file again with the same
engine and caches (a new ``--basetemp``): what a second CI job on a machine that keeps its
images pays.

Each run is ``python -m pytest -p no:cacheprovider FILE --durations=0 --durations-min=0
--junitxml=...`` in a subprocess (``DOCKER_HOST`` = the private engine): wall time; CPU of
the pytest process tree, the engine's daemons and its containers (cpuacct cgroups); disk of
the engine (peak and final), the caches by directory; load average before and during;
pytest's exit code, its outcome per test and the per-phase durations it prints. A failure
is recorded with pytest's own report of it, never hidden. Everything is removed at the end
unless ``--keep``; SIGTERM, SIGHUP and Ctrl-C stop the tests and clean up the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]
import _common as C  # noqa: E402
import _measure as M  # noqa: E402
import whole_set as W  # noqa: E402

ROOT = C.PROJECT_ROOT
GB = W.GB
DEFAULT_TESTS = "tests/integration/test_real_instances.py"
#: "12.34s call     tests/x.py::test_y" as ``--durations`` prints it
DURATION = re.compile(r"^\s*(?P<s>\d+(?:\.\d+)?)s\s+(?P<phase>setup|call|teardown)\s+(?P<test>\S.*?)\s*$")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", nargs="+", default=[DEFAULT_TESTS], help="pytest arguments: files, node ids")
    p.add_argument("--runs", nargs="+", choices=("cold", "warm"), default=["cold", "warm"])
    p.add_argument("--data", type=Path, default=W.DATA, help="HARNESS_SWEBENCH_DATA (default %(default)s)")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp"))
    p.add_argument("--min-free", type=float, default=3.0, help="GB the host keeps free (the run stops below it)")
    p.add_argument("--engine-disk", type=float, default=None, help="GB the engine may write (default: free − "
                   "--min-free − 5 GB)")
    p.add_argument("--sample-every", type=float, default=5.0)
    p.add_argument("--du-every", type=float, default=60.0)
    p.add_argument("--host-pip-config", action="store_true", help="let pip and uv read this machine's configuration")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/ci_sample_cost.json)")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--tables-from", type=Path, metavar="JSON")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- pytest's output

def durations(stdout: str) -> list[dict]:
    """The ``--durations`` table: one row per test and phase, as pytest printed it."""
    rows, inside = [], False
    for line in stdout.splitlines():
        if "slowest" in line and "durations" in line:
            inside = True
            continue
        if inside:
            match = DURATION.match(line)
            if match:
                rows.append({"test": match["test"], "phase": match["phase"], "seconds": float(match["s"])})
            elif line.startswith("=") or (line.strip() and rows and not line.startswith(" ")):
                inside = False
    return rows


def junit_outcomes(path: Path) -> list[dict]:
    """Each test case of pytest's JUnit XML: its outcome, time and, if it did not pass, pytest's message."""
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError):
        return []
    out = []
    for case in tree.iter("testcase"):
        outcome, detail = "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                detail = (child.get("message") or "") + "\n" + (child.text or "")
                break
        out.append({"test": f"{case.get('classname', '')}::{case.get('name', '')}", "outcome": outcome,
                    "seconds": float(case.get("time") or 0.0), "detail": detail[-4000:]})
    return out


# ----------------------------------------------------------------------------- one run

def run_tests(bench: "W.Bench", name: str, args, publish) -> dict:
    base_temp = bench.root / f"pytest-{name}"
    junit = bench.root / f"junit-{name}.xml"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args.tests, "--durations=0",
            "--durations-min=0", "-rA", f"--basetemp={base_temp}", f"--junitxml={junit}"]
    env = dict(bench.environment(), HARNESS_TEST_CACHE=str(bench.cache), HARNESS_CACHE_DIR=str(bench.cache),
               HARNESS_SWEBENCH_DATA=str(args.data))
    env.pop("HARNESS_REAL_REPOS", None)
    logs = bench.root / "logs"
    logs.mkdir(exist_ok=True)
    cpu0, load0 = bench.cpu_now(), os.getloadavg()
    run = M.GroupRun(argv, out=logs / f"{name}.out", err=logs / f"{name}.err", every=args.sample_every, cwd=ROOT,
                     env=env, preexec_fn=bench.cpu["harness"].join_self)
    last_sizes: dict = {"t": -1e9, "sizes": {}}

    def probe() -> dict:
        t = run.elapsed()
        sample = {"t": round(t, 1), "engine": bench.disk.used(), "engine_file": bench.disk.host_bytes(),
                  "host_free": M.free_bytes(args.work_dir), "load1": os.getloadavg()[0],
                  "cpu": {k: round(u + s, 2) for k, (u, s) in bench.cpu_now().items()}}
        if sample["host_free"] < args.min_free * GB and not run.stopped:
            run.stop(f"the host's free space fell to {sample['host_free'] / GB:.1f} GB: the tests were stopped")
        if t - last_sizes["t"] >= args.du_every:
            last_sizes.update(t=t, sizes=bench.sizes(None))
            sample["sizes"] = last_sizes["sizes"]
            publish(result(None, None, [*run.samples, sample], final=False))
        return sample

    def result(status, usage, samples: list[dict], final: bool = True) -> dict:
        """The run's figures; ``final`` once pytest has exited (a snapshot otherwise)."""
        cpu1 = bench.cpu_now()
        stdout = (logs / f"{name}.out").read_text(errors="replace")
        samples = [s for s in samples if "error" not in s]
        return {"name": name, "argv": argv, "final": final,
                "exit_code": os.waitstatus_to_exitcode(status) if status is not None else None,
                "stopped": run.stopped, "wall": run.elapsed(), "started_at": run.started_at,
                "rusage_cpu": usage.ru_utime + usage.ru_stime if usage is not None else None,
                "cpu": {k: {"user": cpu1[k][0] - cpu0[k][0], "system": cpu1[k][1] - cpu0[k][1]} for k in cpu1},
                "load_before": load0, "load_during": [s["load1"] for s in samples],
                "engine_peak": max([s["engine"] for s in samples] + [bench.disk.used()]),
                "engine_final": bench.disk.used(),
                "sizes_final": bench.sizes(None) if final else dict(last_sizes["sizes"]), "samples": samples,
                "durations": durations(stdout), "tests": junit_outcomes(junit),
                "summary_line": next((line for line in reversed(stdout.splitlines()) if line.startswith("=")), ""),
                "stdout_tail": stdout[-6000:],
                "stderr_tail": (logs / f"{name}.err").read_text(errors="replace")[-3000:]}

    status, usage = run.wait(probe, on_interrupt=lambda status, usage: publish(result(status, usage, run.samples)))
    final = result(status, usage, run.samples)
    publish(final)
    print(f"{name}: {final['wall']:.0f} s, pytest exit {final['exit_code']}: {final['summary_line']}; engine "
          f"{final['engine_final'] / GB:.2f} GB", file=sys.stderr, flush=True)
    return final


# ----------------------------------------------------------------------------- tables

def _s(v, digits=0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def markdown(data: dict) -> str:
    m = data["machine"]
    out = [f"command: `{data['command']}`  ",
           f"harness commit {m['harness_commit']}; {m['nproc']} cores, {m['memory_gib']} GiB; date {m['date_utc']}; "
           f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}, at the end "
           f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_at_end', []))}; private engine "
           f"{data.get('engine_version', '?')}", ""]
    runs = data["runs"]
    rows = []
    for name, r in runs.items():
        loads = r["load_during"] or [float("nan")]
        outcomes: dict[str, int] = {}
        for t in r["tests"]:
            outcomes[t["outcome"]] = outcomes.get(t["outcome"], 0) + 1
        cpu = {k: v["user"] + v["system"] for k, v in r["cpu"].items()}
        rows.append([name, _s(r["wall"]), f"{r['exit_code']}: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
                     _s(cpu["harness"]), _s(cpu["daemon"]), _s(cpu["containers"]),
                     f"{r['engine_peak'] / GB:.2f} / {r['engine_final'] / GB:.2f}",
                     f"{sum(v for k, v in r['sizes_final'].items() if k.startswith(('cache/', 'host/'))) / GB:.2f}",
                     f"{r['load_before'][0]:.1f} / {sorted(loads)[len(loads) // 2]:.1f} / {max(loads):.1f}"])
    out += [C.markdown_table(["run", "wall (s)", "pytest exit: tests", "pytest tree CPU (s)", "engine daemons CPU (s)",
                              "containers CPU (s)", "engine disk peak / final (GB)", "caches (GB)",
                              "load 1-min before / median / max"], rows), ""]
    names = list(runs)
    by_test: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        for d in runs[name]["durations"]:
            by_test.setdefault(d["test"], {}).setdefault(name, {})[d["phase"]] = d["seconds"]
    header = ["test"] + [f"{n}: {p} (s)" for n in names for p in ("setup", "call")]
    drows = [[test.split("::", 1)[-1]] + [_s(phases.get(n, {}).get(p), 2) for n in names for p in ("setup", "call")]
             for test, phases in sorted(by_test.items(), key=lambda kv: -sum(sum(v.values()) for v in kv[1].values()))]
    out += [C.markdown_table(header, drows), ""]
    for name, r in runs.items():
        bad = [t for t in r["tests"] if t["outcome"] in ("failed", "error")]
        if r["stopped"]:
            out += [f"**{name} stopped**: {r['stopped']}", ""]
        elif not r.get("final", True):
            out += [f"**{name} still running** when these figures were written (after {_s(r['wall'])} s): "
                    "a snapshot.", ""]
        for t in bad:
            out += [f"**{name}: {t['test']} {t['outcome']}**:", "", "```", t["detail"].strip()[-1500:], "```", ""]
    if data.get("stopped_by"):
        out += [f"**The benchmark was stopped** ({data['stopped_by']}).", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    if args.tables_from:
        print(markdown(json.loads(args.tables_from.read_text())))
        return 0
    if os.geteuid() != 0:
        raise SystemExit("a private engine needs root (dockerd, a loop mount, cgroups)")
    if not (args.data / "lite-test.jsonl").exists():
        raise SystemExit(f"{args.data}: no lite-test.jsonl (the real data the sample grades)")
    args.work_dir = args.work_dir.resolve()
    args.host_pip_config = bool(args.host_pip_config)
    machine = W.machine_facts(args.work_dir)
    data = {"command": C.command_line(), "machine": machine, "tests": args.tests, "runs": {}, "complete": False,
            "pip_config": "this machine's" if args.host_pip_config else f"none (PIP_CONFIG_FILE={os.devnull})"}
    results = M.Results("ci_sample_cost", data, args.out)
    code = 0
    with M.StopSignals():
        try:
            side = W.Side("this checkout", None, machine["harness_commit_full"])
            with W.Bench(args, side) as bench:
                data.update(engine_version=bench.engine_version, engine_disk_cap=bench.disk.size_bytes)
                results.save()
                for name in args.runs:
                    def publish(result: dict, name: str = name) -> None:
                        data["runs"][name] = result
                        results.save()
                    result = run_tests(bench, name, args, publish)
                    if result["stopped"]:
                        break
            data["complete"] = True
        except (M.Stopped, KeyboardInterrupt) as exc:
            data["stopped_by"] = f"{type(exc).__name__}: {exc}"
            code = 128 + (exc.signum if isinstance(exc, M.Stopped) else signal.SIGINT)
        finally:
            data["machine"]["loadavg_at_end"] = os.getloadavg()
            print(f"raw results: {results.save()}", file=sys.stderr)
    if args.markdown:
        print(markdown(data))
    failed = [n for n, r in data["runs"].items() if r["exit_code"] != 0]
    return code or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
