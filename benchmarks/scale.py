"""Scale: one ``harness run`` over a generated set of many small instances.

``--n`` copies of the 4 demo records (distinct ids, so every copy gets its own instance
image tag: the first run builds them, mostly from the docker build cache), graded with
their gold (or empty) patches at ``--max-workers``. While the run progresses the CLI
process is sampled every second: finished instances (report.json files), ``VmRSS``,
``VmHWM``, threads and open file descriptors. Reported at checkpoints (e.g. 100, 250,
500, 1000 done): elapsed time, memory, and the time per instance over each segment
(constant if time grows linearly).

    .venv/bin/python benchmarks/scale.py [--n 1000] [--max-workers 2] [--out FILE]

It takes ~15–25 minutes at n=1000 on 2 cores; run it in the background.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PREFIX = "bench-scale"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--max-workers", type=int, default=2)
    p.add_argument("--predictions", default="gold", choices=["gold", "empty"])
    p.add_argument("--checkpoints", type=int, nargs="+", default=[100, 250, 500, 1000])
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--keep-images", action="store_true")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/scale.json)")
    return p.parse_args(argv)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares y = a + b x; returns (a, b, r²)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else float("nan")
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else float("nan")
    return a, b, r2


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-scale-"))
    try:
        records = C.copies(args.n, PREFIX)
        instances = C.write_jsonl(tmp / "instances.jsonl", records)
        run_dir = tmp / "runs" / "scale"
        last = {"done": -1}

        def progress(s: C.Sample) -> None:
            if s.done is not None and s.done // 50 != last["done"] // 50:
                last["done"] = s.done
                print(f"{s.t:7.0f} s  {s.done:5d} done  RSS {s.rss_kb / 1024:.0f} MB  fds {s.fds}  "
                      f"threads {s.threads}", file=sys.stderr, flush=True)

        run = C.run_cli(C.harness_args(instances=instances, predictions=args.predictions, run_id="scale",
                                       output_dir=tmp / "runs", cache_dir=args.cache_dir,
                                       extra=["--max-workers", str(args.max_workers), "--force"]),
                        sample_every=1.0, count_dir=run_dir, on_sample=progress)
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
        reports = C.read_reports(run_dir)
        # compact per-instance records, in completion order (report.json mtime)
        per_instance = sorted(({
            "instance_id": iid, "finished": (run_dir / iid / "report.json").stat().st_mtime - run.started_at,
            "wall": rp["timings"].get("wall"), "image_lookup_and_build": (rp["timings"].get("wall") or 0)
            - (rp["timings"].get("total") or 0), "build_seconds": (rp.get("image") or {}).get("build_seconds"),
            "start": rp["timings"].get("start"), "cleanup": rp["timings"].get("cleanup"),
            "tests": rp["timings"].get("tests"), "status": rp["status"]} for iid, rp in reports.items()),
            key=lambda r: r["finished"])
        statuses: dict[str, int] = {}
        for rp in reports.values():
            statuses[rp["status"]] = statuses.get(rp["status"], 0) + 1
        build_seconds = sum(rp["image"].get("build_seconds", 0) for rp in reports.values() if rp.get("image"))
        built = sum(bool(rp["image"].get("built")) for rp in reports.values() if rp.get("image"))

        samples = [s for s in run.samples if s.done is not None]
        if samples and samples[-1].done < len(reports):  # the process exited between two samples
            samples.append(C.Sample(round(run.elapsed, 3), samples[-1].rss_kb, run.maxrss_kb, samples[-1].threads,
                                    samples[-1].fds, len(reports)))
        rows, prev = [], (0, 0.0)
        checkpoints = []
        for c in sorted(set(args.checkpoints)):
            hit = next((s for s in samples if s.done >= c), None)
            if hit is None:
                continue
            seg = (hit.t - prev[1]) / max(1, hit.done - prev[0])
            checkpoints.append({"checkpoint": c, "done": hit.done, "elapsed": hit.t, "rss_kb": hit.rss_kb,
                                "hwm_kb": hit.hwm_kb, "fds": hit.fds, "threads": hit.threads,
                                "segment_seconds_per_instance": seg})
            rows.append([c, hit.done, C.fmt(hit.t, 0), C.fmt(hit.t / hit.done, 3), C.fmt(seg, 3),
                         f"{hit.done / hit.t * 3600:.0f}", f"{hit.rss_kb / 1024:.0f}", f"{hit.hwm_kb / 1024:.0f}",
                         hit.fds, hit.threads])
            prev = (hit.done, hit.t)
        seg_rows, seg_data, lo = [], [], 0
        bounds = sorted({*args.checkpoints, *range(100, len(per_instance) + 1, 100)})
        for hi in [b for b in bounds if b <= len(per_instance)]:
            part = per_instance[lo:hi]
            if not part:
                continue
            t0 = per_instance[lo - 1]["finished"] if lo else 0.0
            sa = [s for s in samples if t0 <= s.t <= part[-1]["finished"]]
            busy = ((sa[-1].busy_jiffies - sa[0].busy_jiffies) / max(1, sa[-1].total_jiffies - sa[0].total_jiffies)
                    if len(sa) > 1 else float("nan"))
            row = {"from": lo + 1, "to": hi, "seconds_per_instance": (part[-1]["finished"] - t0) / len(part),
                   "median_wall": C.median(r["wall"] for r in part),
                   "median_image_lookup_and_build": C.median(r["image_lookup_and_build"] for r in part),
                   "median_start": C.median(r["start"] for r in part),
                   "median_tests": C.median(r["tests"] for r in part), "machine_busy": busy}
            seg_data.append(row)
            seg_rows.append([f"{lo + 1}–{hi}", C.fmt(row["seconds_per_instance"], 3), C.fmt(row["median_wall"], 3),
                             C.fmt(row["median_image_lookup_and_build"], 3), C.fmt(row["median_start"], 3),
                             C.fmt(row["median_tests"], 3), f"{busy * 100:.0f}"])
            lo = hi
        progressing = [s for s in samples if 0 < s.done < len(reports)]
        a, b, r2 = linear_fit([s.done for s in progressing], [s.t for s in progressing]) if len(progressing) > 2 \
            else (float("nan"),) * 3
        first, lastcp = (checkpoints[0], checkpoints[-1]) if checkpoints else ({}, {})
        growth = ((lastcp["rss_kb"] - first["rss_kb"]) / (lastcp["done"] - first["done"])
                  if checkpoints and lastcp["done"] > first["done"] else float("nan"))
        tail = run.elapsed - per_instance[-1]["finished"] if per_instance else float("nan")
        text = "\n".join([
            C.header(f"Scale: {args.n} instances in one run, {args.max_workers} workers", machine),
            C.markdown_table(["checkpoint", "done", "elapsed (s)", "s / instance (cumulative)",
                              "s / instance (this segment)", "instances/hour", "RSS (MB)", "peak RSS (MB)",
                              "open fds", "threads"], rows),
            "\n### Per segment of finished instances (completion order)\n",
            C.markdown_table(["instances", "s / instance (elapsed)", "instance wall, median (s)",
                              "image lookup + build, median (s)", "start phase, median (s)",
                              "tests phase, median (s)", "machine CPU busy (%)"], seg_rows),
            "",
            C.markdown_table(["quantity", "value"], [
                ["instances finished / statuses", f"{len(reports)} / " + ", ".join(
                    f"{k} {v}" for k, v in sorted(statuses.items()))],
                ["exit code", run.returncode],
                ["whole run (s)", C.fmt(run.elapsed, 0)],
                ["after the last report.json until exit (summary, manifest) (s)", C.fmt(tail, 2)],
                ["linear fit elapsed = a + b·done: b (s/instance), a (s), r²",
                 f"{C.fmt(b, 3)}, {C.fmt(a, 1)}, {C.fmt(r2, 4)}"],
                ["RSS growth between first and last checkpoint (KB / instance)", C.fmt(growth, 1)],
                ["peak RSS, wait4 (MB)", f"{run.maxrss_kb / 1024:.0f}"],
                ["harness process CPU per instance (s)", C.fmt(run.cpu_seconds / max(1, len(reports)), 3)],
                ["machine CPU busy during the run (all processes) (%)", f"{run.system_busy * 100:.0f}"],
                ["dockerd + containerd CPU per instance (s)",
                 C.fmt(run.daemon_cpu_seconds / max(1, len(reports)), 3)],
                ["machine CPU per instance, all processes (s)",
                 C.fmt(run.machine_cpu_seconds / max(1, len(reports)), 3)],
                ["instance images built in the run / build seconds summed", f"{built} / {build_seconds:.0f}"],
            ]),
            "\nSampled every second (a checkpoint reached only at exit shows the last sample's RSS and "
            "wait4's peak) from `/proc/<pid>/status` of the `harness run` process; *done* counts "
            "report.json files. Every copy has its own instance image tag, so the run also builds "
            f"{built} instance images (from the docker build cache: identical Dockerfile and context).\n"])
        print(text)
        out = C.write_results("scale", {"machine": machine, "command": C.command_line(), "n": args.n,
                                        "workers": args.max_workers, "elapsed": run.elapsed,
                                        "returncode": run.returncode, "maxrss_kb": run.maxrss_kb,
                                        "statuses": statuses, "checkpoints": checkpoints,
                                        "fit": {"a": a, "b": b, "r2": r2}, "build_seconds": build_seconds,
                                        "built": built, "segments": seg_data, "per_instance": per_instance,
                                        "samples": [s.__dict__ for s in run.samples],
                                        "stderr_tail": run.stderr[-3000:], "markdown": text}, args.out)
        print(f"\nraw results: {out}", file=sys.stderr)
    finally:
        if not args.keep_images:
            removed = C.remove_images(PREFIX)
            print(f"removed {removed} benchmark images", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
