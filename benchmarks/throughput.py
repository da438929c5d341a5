"""Throughput at 1, 2 and 4 workers (``--max-workers``), warm cache.

The instance set is ``--copies`` copies of the 4 demo records (distinct ids), graded with
their gold patches. A warm-up run builds the instance images; then every worker count is
run ``--repeats`` times with ``--force`` (nothing reused), the order of worker counts
reversed on every other repeat. Peak memory of the harness process is ``ru_maxrss`` from
``os.wait4`` (the CLI process; reaped children such as git included), cross-checked with
``VmHWM`` sampled from ``/proc/<pid>/status``.

    .venv/bin/python benchmarks/throughput.py [--copies 10] [--workers 1 2 4] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PREFIX = "bench-tp"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", type=int, default=10, help="copies of the 4 demo instances (default 10: 40)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--keep-images", action="store_true")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/throughput.json)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-tp-"))
    try:
        records = C.copies(4 * args.copies, PREFIX)
        instances = C.write_jsonl(tmp / "instances.jsonl", records)
        n = len(records)

        def run(run_id: str, workers: int) -> C.CliRun:
            return C.run_cli(C.harness_args(instances=instances, predictions="gold", run_id=run_id,
                                            output_dir=tmp / "runs", cache_dir=args.cache_dir,
                                            extra=["--max-workers", str(workers), "--force"]), sample_every=0.2)

        print(f"warm-up ({n} instances) ...", file=sys.stderr)
        warm = run("warmup", max(args.workers))
        if warm.returncode != 0:
            print(warm.stderr, file=sys.stderr)
            return 1
        results: dict[int, list[dict]] = {w: [] for w in args.workers}
        for rep in range(args.repeats):
            order = args.workers if rep % 2 == 0 else list(reversed(args.workers))
            for w in order:
                r = run(f"w{w}-r{rep}", w)
                reports = C.read_reports(tmp / "runs" / f"w{w}-r{rep}")
                statuses = {}
                for rp in reports.values():
                    statuses[rp["status"]] = statuses.get(rp["status"], 0) + 1
                results[w].append({
                    "elapsed": r.elapsed, "returncode": r.returncode, "maxrss_kb": r.maxrss_kb,
                    "peak_hwm_kb": r.peak_hwm_kb, "statuses": statuses, "done": len(reports),
                    "median_instance_wall": C.median(rp["timings"].get("wall") for rp in reports.values()),
                    "median_tests_phase": C.median(rp["timings"].get("tests") for rp in reports.values()),
                    "median_start_phase": C.median(rp["timings"].get("start") for rp in reports.values()),
                    "max_threads": max((s.threads for s in r.samples), default=0),
                    "loadavg_1m_after": C.os.getloadavg()[0], "cpu_seconds": r.cpu_seconds,
                    "system_busy": r.system_busy, "daemon_cpu_seconds": r.daemon_cpu_seconds,
                    "machine_cpu_seconds": r.machine_cpu_seconds})
                print(f"repeat {rep + 1}: {w} workers {r.elapsed:.1f} s", file=sys.stderr)
        base = C.median(x["elapsed"] for x in results[args.workers[0]])
        base_best = min(x["elapsed"] for x in results[args.workers[0]])
        rows = []
        for w in args.workers:
            xs = results[w]
            el = C.median(x["elapsed"] for x in xs)
            best = min(x["elapsed"] for x in xs)
            rows.append([w, f"{C.fmt(el, 1)} / {C.fmt(best, 1)}", f"{n / el * 3600:.0f} / {n / best * 3600:.0f}",
                         f"{C.fmt(base / el)} / {C.fmt(base_best / best)}",
                         " ".join(C.fmt(x["elapsed"], 1) for x in xs), C.fmt(C.median(
                x["median_instance_wall"] for x in xs)), C.fmt(C.median(x["median_tests_phase"] for x in xs), 3),
                C.fmt(C.median(x["median_start_phase"] for x in xs), 3),
                f"{max(x['maxrss_kb'] for x in xs) / 1024:.0f}", f"{max(x['peak_hwm_kb'] for x in xs) / 1024:.0f}",
                C.fmt(C.median(x["cpu_seconds"] for x in xs) / n, 3),
                C.fmt(C.median(x["daemon_cpu_seconds"] for x in xs) / n, 3),
                C.fmt(C.median(x["machine_cpu_seconds"] for x in xs) / n, 3),
                f"{C.median(x['system_busy'] for x in xs) * 100:.0f}",
                ", ".join(f"{k} {v}" for k, v in sorted(xs[0]["statuses"].items()))])
        text = "\n".join([
            C.header(f"Throughput, warm cache ({n} instances, {args.repeats} repeats per worker count)", machine),
            C.markdown_table(["workers", "elapsed, median / best (s)", "instances/hour, median / best",
                              f"speed-up vs {args.workers[0]}, median / best", "each repeat (s, in run order)",
                              "per-instance wall (s)", "tests phase (s)", "start phase (s)",
                              "peak RSS, wait4 (MB)", "peak VmHWM, sampled (MB)",
                              "harness CPU / instance (s)", "dockerd+containerd CPU / instance (s)",
                              "machine CPU / instance (s)", "machine CPU busy (%)", "statuses"], rows),
            "\nElapsed: whole `harness run` process (start-up and summary included); median and best (minimum) "
            "over repeats — noise from other sessions only ever adds time, so *best* is the less disturbed "
            "estimate. "
            "Per-instance columns: median of report.json `timings` within a run, then median over repeats. "
            "Each container is limited to 1 CPU (harness default `Limits.cpus`). *Harness CPU* is the "
            "CLI process's own user+system time (host side: Python, git; container CPU excluded). *Machine CPU "
            "busy* and *machine CPU*: all CPUs, all processes, during the run (/proc/stat) — other sessions "
            "included; the difference between machine CPU and harness + daemons is mostly the containers' own "
            "processes (pytest, git, cp) plus containerd-shim/runc.\n"])
        print(text)
        out = C.write_results("throughput", {"machine": machine, "command": C.command_line(), "instances": n,
                                             "results": results, "markdown": text}, args.out)
        print(f"\nraw results: {out}", file=sys.stderr)
    finally:
        if not args.keep_images:
            C.remove_images(PREFIX)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
