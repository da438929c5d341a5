"""The executors side by side: dispatch rate and driver memory at scale, per-evaluation
overhead of Ray against local threads, and what a registry saves a second node.

    .venv/bin/python benchmarks/cluster.py dispatch [--n 1000 5000 20000] [--executors local ray]
    .venv/bin/python benchmarks/cluster.py overhead [--copies 3] [--repeats 2]
    .venv/bin/python benchmarks/cluster.py pull
    .venv/bin/python benchmarks/cluster.py all

* **dispatch**: ``BatchRunner`` (the real driver: requests, outcome spool, atomic writes
  of every report, streamed manifest and summary) over ``n`` generated tasks whose work
  function uses no container (a node-side evaluator that returns a FULL result at once),
  with the local executor and with Ray (a one-node cluster started for the run). Each
  (executor, n) runs in a fresh process sampled every 0.2 s: tasks/second through the
  executor, RSS at 10 %, 50 % and 100 % of the tasks, peak RSS.
* **overhead**: the demo set's instances (``--copies`` × 4) evaluated for real with
  ``--executor local`` and ``--executor ray`` (a one-node Ray cluster on this machine, same
  engine, same ``--max-workers``), alternating, ``--repeats`` times each: per-evaluation wall
  time (report.json) and the whole command, as ratios Ray / local.
* **pull**: two private engines and a registry; engine A builds the demo environment image
  and pushes it, engine B pulls it: seconds to build vs seconds to pull.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

from harness.run.executors.base import NodeSetup  # noqa: E402


# ---------------------------------------------------------------------------- a no-container node

def proc_status(pid: int) -> dict:
    found = C._proc_status(pid)
    return {"VmRSS": found[0], "VmHWM": found[1]} if found else {}


class _InstantBackend:
    stopped = False

    def cleanup_run(self) -> int:
        return 0

    def kill_task(self, token: str) -> int:
        return 0


class InstantEvaluator:
    """A node-side evaluator that grades nothing: a FULL result per task, at once."""

    def __init__(self, config) -> None:
        self.config = config
        self.node = "bench-node"
        self.backend = _InstantBackend()

    def evaluate(self, request):
        from harness.evaluation.setup import RunOutputs
        from harness.grading.status import InstanceStatus
        from harness.results.report import InstanceResult
        from harness.evaluation.tasks import TaskOutcome
        task = request.task
        result = InstanceResult(task.instance.instance_id, task.instance.repo, task.prediction.model_name_or_path,
                                InstanceStatus.FULL, resolved=True, attempt=task.prediction.attempt,
                                patch_exists=True, patch_successfully_applied=True,
                                f2p_success=list(task.instance.fail_to_pass),
                                p2p_success=list(task.instance.pass_to_pass), f2p_rate=1.0, p2p_rate=1.0,
                                checksums={"instance": "x", "patch": "y"}, node=self.node)
        return TaskOutcome(task.key, result, RunOutputs(test_output="PASSED test\n" * 20),
                           pins={"image_id": "sha256:bench"}, node=self.node)

    def kill_task(self, token: str) -> int:
        return 0

    def stop(self) -> None:
        pass


class InstantSetup(NodeSetup):
    def evaluator(self):
        from harness.run.executors import base
        if self.run_key not in base._OPENED:
            base._OPENED.clear()
            base._OPENED[self.run_key] = InstantEvaluator(self.config)
        return base._OPENED[self.run_key]


def synthetic_tasks(n: int):
    """``n`` small tasks, generated lazily (the input is not what is measured)."""
    from harness.inputs.instances import Instance
    from harness.inputs.predictions import Prediction
    from harness.evaluation.tasks import Task
    for i in range(n):
        iid = f"bench__scale-{i:06d}"
        instance = Instance(iid, "bench/scale", "0" * 40, "diff --git a/x b/x\n", "diff --git a/t b/t\n",
                            ("tests/test_x.py::test_a", "tests/test_x.py::test_b"), ("tests/test_x.py::test_c",))
        yield Task(instance, Prediction(iid, "bench-model", "diff --git a/x b/x\n"))


def dispatch_child(executor_name: str, n: int, out_dir: Path, workers: int) -> dict:
    """One measured run (in its own process): the driver over ``n`` instant tasks."""
    from harness.atomic import write_json_atomic
    from harness.run.batch import BatchRunner
    from harness.results.report import summarise_run_directory
    from harness.evaluation.tasks import RunConfig
    config = RunConfig(run_id=f"dispatch-{executor_name}-{n}", output_dir=out_dir, cache_dir=out_dir / "cache",
                       max_workers=workers)
    if executor_name == "ray":
        from harness.run.executors.ray import RayExecutor
        executor = RayExecutor(workers)
        started = time.monotonic()
        executor.connect()
        startup = time.monotonic() - started
    else:
        from harness.run.executors import LocalExecutor
        executor, startup = LocalExecutor(workers), 0.0
    runner = BatchRunner(config, None, None, executor=executor)
    runner.setup = InstantSetup(config, runner.scope)
    marks = {}
    progress_at = {max(1, n // 10): "rss_10", max(1, n // 2): "rss_50"}

    def progress(result) -> None:
        key = progress_at.get(runner.tally.done)
        if key:
            marks[key] = proc_status(os.getpid()).get("VmRSS", 0)

    runner.progress = progress
    started = time.monotonic()
    results = runner.run(synthetic_tasks(n))
    dispatch = time.monotonic() - started
    t = time.monotonic()
    from harness.results.manifest import write_manifest
    write_manifest(runner.paths.manifest, config.run_id, {}, "bench", runner.pins(), {})
    summary = summarise_run_directory(config.run_id, "bench-model", runner.paths.root,
                                      (f"bench__scale-{i:06d}" for i in range(n)), results.keys(), {})
    write_json_atomic(runner.paths.summary, summary)
    finish = time.monotonic() - t
    status = proc_status(os.getpid())
    assert summary["resolved_instances"] == n, summary["resolved_instances"]
    return {"executor": executor_name, "n": n, "workers": workers, "startup_seconds": startup,
            "dispatch_seconds": dispatch, "tasks_per_second": n / dispatch, "manifest_and_summary_seconds": finish,
            "rss_kb_10": marks.get("rss_10"), "rss_kb_50": marks.get("rss_50"), "rss_kb_100": status.get("VmRSS"),
            "hwm_kb": status.get("VmHWM")}


def bench_dispatch(sizes: list[int], executors: list[str], workers: int) -> tuple[str, list[dict]]:
    rows, data = [], []
    for n in sizes:
        for name in executors:
            with tempfile.TemporaryDirectory(prefix="harness-bench-dispatch-") as tmp:
                proc = subprocess.run([sys.executable, __file__, "_dispatch_child", name, str(n), tmp, str(workers)],
                                      capture_output=True, text=True, timeout=7200)
                if proc.returncode != 0:
                    raise SystemExit(f"dispatch child failed:\n{proc.stderr[-3000:]}")
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            data.append(row)
            print(f"dispatch {name} n={n}: {row['tasks_per_second']:.0f} tasks/s, RSS {row['rss_kb_100'] / 1024:.0f} MB",
                  file=sys.stderr, flush=True)
            rows.append([name, n, f"{row['tasks_per_second']:.0f}", C.fmt(row["dispatch_seconds"], 1),
                         C.fmt(row["startup_seconds"], 1), C.fmt(row["manifest_and_summary_seconds"], 2),
                         f"{(row['rss_kb_10'] or 0) / 1024:.0f}", f"{(row['rss_kb_50'] or 0) / 1024:.0f}",
                         f"{row['rss_kb_100'] / 1024:.0f}", f"{row['hwm_kb'] / 1024:.0f}"])
    text = C.markdown_table(["executor", "tasks", "tasks / s", "through the executor (s)", "cluster start (s)",
                             "manifest + summary (s)", "RSS at 10 % (MB)", "RSS at 50 % (MB)", "RSS at 100 % (MB)",
                             "peak RSS (MB)"], rows)
    return text, data


# ---------------------------------------------------------------------------- real overhead

def bench_overhead(copies: int, repeats: int, workers: int, cache_dir: Path) -> tuple[str, list[dict]]:
    data = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-ray-") as tmp:
        tmp = Path(tmp)
        instances = C.write_jsonl(tmp / "instances.jsonl", C.copies(4 * copies, "bench-ray"))
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        for rep in range(repeats):
            for name in (("local", "ray") if rep % 2 == 0 else ("ray", "local")):
                run_id = f"{name}-{rep}"
                started = time.monotonic()
                proc = subprocess.run([sys.executable, "-m", "harness", "run", "--instances", str(instances),
                                       "--predictions", "gold", "--run-id", run_id, "--output-dir", str(tmp / "runs"),
                                       "--cache-dir", str(cache_dir), "--max-workers", str(workers), "--force",
                                       "--executor", name, "--quiet"], capture_output=True, text=True, env=env,
                                      timeout=3600)
                elapsed = time.monotonic() - started
                if proc.returncode != 0:
                    raise SystemExit(f"{name} run failed:\n{proc.stderr[-3000:]}")
                reports = C.read_reports(tmp / "runs" / run_id)
                finished = sorted((tmp / "runs" / run_id / iid / "report.json").stat().st_mtime for iid in reports)
                data.append({"executor": name, "repeat": rep, "elapsed": elapsed, "n": len(reports),
                             "statuses": sorted({r["status"] for r in reports.values()}),
                             "median_wall": C.median(r["timings"].get("wall") for r in reports.values()),
                             "median_total": C.median(r["timings"].get("total") for r in reports.values()),
                             "first_to_last_report": finished[-1] - finished[0]})
                print(f"overhead {name} repeat {rep}: {elapsed:.1f} s", file=sys.stderr, flush=True)
        C.remove_images("bench-ray")
    by = {name: [d for d in data if d["executor"] == name] for name in ("local", "ray")}

    def med(name: str, key: str) -> float:
        return C.median(d[key] for d in by[name])

    rows = [[name, len(by[name]), C.fmt(med(name, "elapsed"), 1), C.fmt(med(name, "first_to_last_report"), 1),
             C.fmt(med(name, "median_wall"), 3), C.fmt(med(name, "median_total"), 3),
             ", ".join(sorted({s for d in by[name] for s in d["statuses"]}))] for name in ("local", "ray")]
    rows.append(["ray / local", "", C.fmt(med("ray", "elapsed") / med("local", "elapsed"), 2),
                 C.fmt(med("ray", "first_to_last_report") / max(1e-9, med("local", "first_to_last_report")), 2),
                 C.fmt(med("ray", "median_wall") / med("local", "median_wall"), 2),
                 C.fmt(med("ray", "median_total") / med("local", "median_total"), 2), ""])
    text = C.markdown_table(["executor", "runs", "whole command, median (s)", "first to last report, median (s)",
                             "per-evaluation wall, median (s)", "per-evaluation grading sequence, median (s)",
                             "statuses"], rows)
    return text, data


# ---------------------------------------------------------------------------- pull vs build

def bench_pull(cache_dir: Path) -> tuple[str, dict]:
    from harness.inputs import demo
    from harness.engine.client import connect
    from harness.engine.registry import Registry
    from harness.inputs.repos import RepoResolver
    from harness.preparation.preparer import Preparer
    from tests.scripts import script_module
    selfimage = script_module("selfimage")
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    from tests.fixtures.services import PrivateEngine, start_registry
    shared = connect()
    done, _ = selfimage.prepare_offline(shared, cache_dir, demo.DEMO_DIR / "instances.jsonl")
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    spec = specs.get("harness-demo/calcly", "1.0")
    engines = [PrivateEngine("bench-a"), PrivateEngine("bench-b")]
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="harness-bench-pull-") as tmp, \
            start_registry(Path(tmp) / "seed") as seed, start_registry(Path(tmp) / "fresh") as fresh:
        try:
            base = Preparer(shared, specs, RepoResolver(cache_dir), cache_dir).images.base(spec.python, spec.apt_packages)
            Registry(shared, seed).publish(base.tag)
            for name, engine in zip(("a", "b"), engines):
                engine.start()
                client = engine.client()
                preparer = Preparer(client, specs, RepoResolver(cache_dir, None, demo.build_demo_repos(
                    demo.DEMO_DIR, cache_dir / "demo-repos")), cache_dir)
                preparer.images.use_registry(seed)
                t = time.monotonic()
                preparer.images.base(spec.python, spec.apt_packages)
                result[f"base_pull_{name}"] = time.monotonic() - t
                preparer.images.use_registry(fresh)
                t = time.monotonic()
                ref, _ = preparer.environment(spec)
                result[f"env_{name}"] = time.monotonic() - t
                result[f"env_{name}_how"] = "built+pushed" if ref.built else ("pulled" if ref.pulled else "found")
                result["env_size_mb"] = client.images.get(ref.tag).attrs["Size"] / 1e6
                client.close()
        finally:
            for engine in engines:
                engine.stop()
                engine.remove_data()
    saved = result["env_a"] - result["env_b"]
    text = C.markdown_table(["quantity", "value"], [
        ["environment image (demo calcly, Python 3.11), size (MB)", C.fmt(result["env_size_mb"], 0)],
        ["engine A: build + push (s)", C.fmt(result["env_a"], 1) + f" ({result['env_a_how']})"],
        ["engine B: pull + verify (s)", C.fmt(result["env_b"], 1) + f" ({result['env_b_how']})"],
        ["time the second node saves (s)", C.fmt(saved, 1)],
        ["pull / build", C.fmt(result["env_b"] / result["env_a"], 2)],
        ["base image pulled by each engine first (s, A / B)",
         f"{C.fmt(result['base_pull_a'], 1)} / {C.fmt(result['base_pull_b'], 1)}"]])
    return text, result


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_dispatch_child"]:
        name, n, out, workers = argv[1], int(argv[2]), Path(argv[3]), int(argv[4])
        print(json.dumps(dispatch_child(name, n, out, workers)))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["dispatch", "overhead", "pull", "all"])
    p.add_argument("--n", type=int, nargs="+", default=[1000, 5000, 20000])
    p.add_argument("--executors", nargs="+", default=["local", "ray"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--copies", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/cluster-<what>.json)")
    args = p.parse_args(argv)
    machine = C.machine_info()
    sections, raw = [], {"machine": machine, "command": C.command_line()}
    if args.what in ("dispatch", "all"):
        text, raw["dispatch"] = bench_dispatch(args.n, args.executors, args.workers)
        sections.append(C.header("Dispatch rate and driver memory (no-container work)", machine) + "\n" + text)
    if args.what in ("overhead", "all"):
        text, raw["overhead"] = bench_overhead(args.copies, args.repeats, args.workers, args.cache_dir)
        sections.append(C.header("Per-evaluation overhead: Ray vs local", machine) + "\n" + text)
    if args.what in ("pull", "all"):
        text, raw["pull"] = bench_pull(args.cache_dir)
        sections.append(C.header("A second node pulls instead of building", machine) + "\n" + text)
    markdown = "\n\n".join(sections)
    print(markdown)
    raw["markdown"] = markdown
    out = C.write_results(f"cluster-{args.what}", raw, args.out)
    print(f"\nraw results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
