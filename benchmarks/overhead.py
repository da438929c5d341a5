"""Overhead against the limit: the harness's wall time per instance vs the bare test command.

For each instance (warm images), interleaved and repeated:

* **harness**: ``harness run --instance-ids ID --force`` in a subprocess; the per-instance
  wall time is report.json ``timings.wall`` (image lookup + evaluation, excluding process
  start-up), the process wall time is reported beside it;
* **bare**: the test command the runner would run without the harness around it
  (``build_test_command`` without the outcome plugin, ``env -i`` with the spec's environment
  and no bootstrap, so no audit hook; same user and workdir; rebuilt here from the inputs of
  the harness's own test step, :func:`_recording_evaluators`),
  executed with the Docker SDK (``exec_run``) in an already-started container of the same
  instance image with the harness's limits. The container is brought to the test-ready state
  by the harness itself: ``BatchRunner.evaluate`` runs once in-process with a backend that
  keeps the sandbox open (given to its constructor; tree copied, model patch, restores, test files,
  canaries, seal, services); only the ``docker exec`` of the bare command is timed. The
  harness's own cost therefore includes the tree diff, the seal, the monitor and the canaries.

Order alternates every round (harness first, then bare first), and instances are visited
forwards then backwards, so drift in machine load hits both sides alike.

    .venv/bin/python benchmarks/overhead.py [--rounds 5] [--slow-seconds 5.5] [--out FILE]
    .venv/bin/python benchmarks/overhead.py --instances X.jsonl --predictions gold \
        --repos-dir DIR [--specs DIR] [--instance-ids ID ...]      # e.g. real SWE-bench instances
    ... --before CHECKOUT [--middle CHECKOUT]   # other checkouts' harness, timed in the same rounds
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

#: report.json timings keys that are aggregates, not phases ("prepare_images" is the runner's
#: image preparation, outside the evaluation).
AGGREGATES = ("total", "wall", "prepare_images")
SHOWN = ["start", "canaries", "setup", "plan", "tests", "copy_out", "grade", "cleanup"]
#: the commands that are docker exec round trips (the others run inside one of them)
EXEC_PHASES = ("prepare", "launch")


def phase_sum(timings: dict) -> float:
    return sum(v for k, v in timings.items() if k not in AGGREGATES)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=Path, help="instance set (default: the demo set + a synthetic slow instance)")
    p.add_argument("--predictions", default="gold", help="'gold', 'empty' or a predictions file (default gold)")
    p.add_argument("--instance-ids", nargs="+")
    p.add_argument("--repos-dir", type=Path)
    p.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=PATH")
    p.add_argument("--specs", action="append", default=[], type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--slow-seconds", type=float, default=5.5,
                   help="add a demo instance whose tests sleep this long (0: none; demo set only)")
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--runs-dir", type=Path, help="where run directories go (default: a temp dir, removed)")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/overhead.json)")
    p.add_argument("--before", type=Path, metavar="CHECKOUT",
                   help="also time another checkout's harness (e.g. main before a change), interleaved")
    p.add_argument("--middle", type=Path, metavar="CHECKOUT",
                   help="and a third checkout, timed like --before (e.g. an intermediate state of the change)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- the bare side

class _KeepOpen:
    """A Sandbox proxy that does not remove the container at the end, so the container stays
    in exactly the state the harness ran the tests in (tree, patches, sealed test files,
    canaries, services, output dir)."""

    def __init__(self, sandbox) -> None:
        self._sandbox = sandbox

    def __getattr__(self, name):
        return getattr(self._sandbox, name)

    def close(self) -> None:  # the benchmark removes it
        pass

    def release(self) -> None:
        pass


def env_argv(env: dict[str, str], argv: list[str]) -> list[str]:
    """Run argv with exactly ``env`` (``env -i``: nothing inherited from the image)."""
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]


def _recording_evaluators(runner_module):
    """Make harness.evaluation.node create Evaluators that remember the calls this benchmark times,
    rebuilt from what the harness's own test step is given: ``bare_call``, the test command
    as the runner would run it without the harness around it (no bootstrap, no plugin), and
    ``monitored_call``, the launcher's test step alone, with the bootstrap, the monitor and
    the plugin, as the launcher runs it."""
    from harness import incontainer
    from harness.engine.sandbox import ROOT
    from harness.evaluation.setup import build_test_command
    from harness.integrity import steps
    made = []
    base = runner_module.Evaluator

    class Recording(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.bare_call: dict | None = None
            self.monitored_call: dict | None = None
            made.append(self)

        def _test_step(self, sandbox, session, layout, plan, test_patch, test_result, staged):
            results_path = f"{layout.run_dir}/{steps.RESULTS_NAME}"
            self.bare_call = {"argv": env_argv(self.env, ["/bin/bash", "-c", build_test_command(
                self.spec, test_patch, results_path)]), "user": "1000:1000", "workdir": steps.TESTBED}
            return super()._test_step(sandbox, session, layout, plan, test_patch, test_result, staged)

        def _launch_plan(self, *args, **kwargs):
            launch = super()._launch_plan(*args, **kwargs)
            self.monitored_call = {"argv": steps.tests_only_argv(
                {"tests": launch["tests"], "testbed": steps.TESTBED, "out_dir": "/tmp/.bench-out",
                 "user": launch["user"], "bytecode": incontainer.BYTECODE_DIR}), "user": ROOT,
                "workdir": steps.TESTBED}
            return launch
    runner_module.Evaluator = Recording
    return made, lambda: setattr(runner_module, "Evaluator", base)


class _KeepingBackend:
    """Wraps the runner's DockerBackend: every sandbox it starts is kept open."""

    def __init__(self, real) -> None:
        self.real = real
        self.kept: list[_KeepOpen] = []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def start(self, *args, **kwargs):
        sandbox = _KeepOpen(self.real.start(*args, **kwargs))
        self.kept.append(sandbox)
        return sandbox


class BareContainer:
    """An already-started container of the instance image, brought to the state in which the
    harness runs the tests *by the harness itself* (``BatchRunner.evaluate`` in-process, with
    a :class:`_KeepingBackend` so the container is kept; so it follows whatever the harness does:
    patch strategies, restores, canaries, services, privilege drop). ``run()`` then times only
    a ``docker exec`` of the recorded test command (same argv, user, workdir) in it."""

    def __init__(self, runner, backend: _KeepingBackend, task) -> None:
        import harness.evaluation.node as runner_module
        before = len(backend.kept)
        made, restore = _recording_evaluators(runner_module)
        try:
            result = runner.evaluate(task)
        finally:
            restore()
        self.status = result.status.value
        kept = backend.kept[before:]
        for extra in kept[:-1]:  # retried attempts
            extra._sandbox.close()
        self.proxy = kept[-1] if kept else None
        call = made[-1].bare_call if made else None
        if self.proxy is None or call is None:
            self.close()
            raise RuntimeError(f"{task.instance.instance_id}: the harness ran no tests ({self.status}, "
                               f"{result.error_reason})")
        # the tests' first run, in the freshly started container (as in every harness run)
        self.first_run = next((c.duration for c in result.commands if c.phase == "tests"), None)
        self.argv, self.user, self.workdir, self.env = call["argv"], call["user"], call["workdir"], None
        monitored = getattr(made[-1], "monitored_call", None)
        self.monitored_argv = monitored["argv"] if monitored else None
        # the launcher's test step alone (root: it activates the bootstrap and collects its evidence)
        self.monitored_user = monitored["user"] if monitored else None
        self.container = self.proxy._sandbox.container

    def run(self, monitored: bool = False) -> tuple[float, int, str]:
        """Time the bare command (or, ``monitored``, the same with the harness's bootstrap,
        audit hook and outcome plugin, as the launcher runs it)."""
        argv = self.monitored_argv if monitored else self.argv
        user = self.monitored_user if monitored else self.user
        started = time.monotonic()
        res = self.container.exec_run(argv, user=user, workdir=self.workdir, environment=self.env)
        elapsed = time.monotonic() - started
        return elapsed, res.exit_code, res.output.decode(errors="replace")

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy._sandbox.close()


def summary_line(output: str) -> str:
    """pytest's last line without the duration, to check both sides ran the same tests."""
    lines = [l for l in output.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else ""
    return re.sub(r"\s+in [0-9.]+\s*(s|sec|seconds)\b.*$", "", last).strip("= ")


# ----------------------------------------------------------------------------- decomposition

def is_session(cmds: list[dict]) -> bool:
    """Whether the ``prepare`` and ``launch`` records came from one exec (the session of
    issue 38: its bootstrap is in argv, ``python3 -I -S -c SOURCE``) rather than from two
    (``python3 -I -S /harness/trusted/launcher.py``)."""
    launch = next((c for c in cmds if c["phase"] == "launch"), None)
    argv = launch.get("argv") if launch else None
    return isinstance(argv, list) and "-c" in argv[:4]



def decompose(report: dict) -> dict[str, float]:
    """Split one report's wall time into where it went (seconds). Works on reports of the
    harness before issue 11 (every command a docker exec), after it (two execs:
    ``prepare`` and ``launch``; the other commands ran inside them) and after issue 38 (one
    exec, whose set-up and test steps are still the two records)."""
    t = report["timings"]
    cmds = report["commands"]
    tests_cmd = sum(c["duration"] for c in cmds if c["phase"] == "tests")
    if any(c["phase"] == "launch" for c in cmds):  # the old harness had a "prepare" command (its mkdir) too
        execs = [c for c in cmds if c["phase"] in EXEC_PHASES]
        exec_time = sum(c["duration"] for c in execs)
        if is_session(cmds):
            execs = execs[-1:]   # one exec carried both records (issue 38): count it once
    else:
        execs = cmds
        exec_time = sum(c["duration"] for c in cmds)
    total, wall = t.get("total", 0.0), t.get("wall", 0.0)
    recorded = phase_sum(t)
    return {
        "wall": wall,
        "tests_cmd": tests_cmd,                                  # the test command's own duration
        "container_lifecycle": t.get("start", 0.0) + t.get("cleanup", 0.0),
        "setup_execs": exec_time - tests_cmd,                     # every exec round trip, the tests' own time out
        "archive_and_host": total - exec_time - t.get("start", 0.0) - t.get("cleanup", 0.0),
        "image_lookup": wall - total,                            # runner: spec, repo, export, image lookup
        "unrecorded_in_timings": total - recorded,               # evaluator phases missing from timings
        "other_phases": sum(v for k, v in t.items() if k not in AGGREGATES and k not in SHOWN),
        "execs": len(execs),
    }


def _around_tests(sample: dict) -> float:
    """What one harness run spent around its test command (``timings.wall`` minus the test
    exec's own duration): the fixed cost without the suite's run-to-run noise."""
    return sample["timings"]["wall"] - sample["decomposition"]["tests_cmd"]


def _side_summary(side: str, runs: list[dict], bares: list[float]) -> dict:
    """Medians of another checkout's runs (paired with the bare runs of the same rounds)."""
    if not runs:
        return {}
    return {f"{side}_median_wall": C.median(s["timings"]["wall"] for s in runs),
            f"{side}_median_paired_overhead": C.median(s["timings"]["wall"] - b for s, b in zip(runs, bares)),
            f"{side}_median_cli_cpu_seconds": C.median(s["cli_cpu_seconds"] for s in runs),
            f"{side}_execs": C.median(s["decomposition"]["execs"] for s in runs),
            f"{side}_statuses": sorted({s["status"] for s in runs})}


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="harness-bench-overhead-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    common = dict(cache_dir=args.cache_dir, repos_dir=args.repos_dir, repos=args.repo, specs=args.specs)

    if args.instances is None:
        records = C.demo_records()
        if args.slow_seconds > 0:
            records.append(C.slow_instance(args.slow_seconds))
        instances_path = C.write_jsonl(runs_dir / "instances.jsonl", records)
    else:
        instances_path = args.instances.resolve()

    from harness.inputs.instances import load_instances
    from harness.inputs.predictions import resolve_predictions
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    loaded = load_instances(instances_path, args.instance_ids)
    instances = {i.instance_id: i for i in loaded.instances}
    preds = {p.instance_id: p for p in resolve_predictions(args.predictions, loaded.instances).predictions}
    ids = [i for i in instances if i in preds]
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR, *args.specs)

    # Warm-up: builds whatever is missing, so that every measured run finds warm images.
    print(f"warm-up run of {len(ids)} instances ...", file=sys.stderr)
    warm = C.run_cli(C.harness_args(instances=instances_path, predictions=args.predictions, run_id="warmup",
                                    output_dir=runs_dir, extra=["--force", "--instance-ids", *ids], **common))
    if warm.returncode != 0:
        print(warm.stderr, file=sys.stderr)
        return 1
    warm_statuses = {iid: rp["status"] for iid, rp in C.read_reports(runs_dir / "warmup").items()}
    # The other checkouts' images too: their environment and instance images carry their own
    # content hashes, and a first round that builds them would be timed as overhead.
    for side, checkout in (("before", args.before), ("middle", args.middle)):
        if checkout is None:
            continue
        print(f"warm-up run of {len(ids)} instances with {checkout} ...", file=sys.stderr)
        other = C.run_cli(C.harness_args(instances=instances_path, predictions=args.predictions,
                                         run_id=f"warmup-{side}", output_dir=runs_dir,
                                         extra=["--force", "--instance-ids", *ids], **common),
                          checkout=checkout.resolve())
        if other.returncode != 0:
            print(other.stderr, file=sys.stderr)
            return 1

    import docker
    from harness.inputs.repos import RepoResolver
    from harness.run.batch import BatchRunner, run_scope
    from harness.paths import RunPaths
    from harness.preparation.preparer import Preparer
    from harness.evaluation.node import docker_backend
    from harness.evaluation.tasks import RunConfig, Task
    client = docker.from_env(timeout=600)
    overrides = {name: Path(path).expanduser().resolve() for name, path in (r.split("=", 1) for r in args.repo)}
    resolver = RepoResolver(args.cache_dir, args.repos_dir, overrides, allow_clone=False)
    from harness import logs
    logs.configure(runs_dir / "bare-setup.log", quiet=True)
    config = RunConfig(run_id="bench-overhead-bare", output_dir=runs_dir, cache_dir=args.cache_dir, force=True)
    keeping = _KeepingBackend(docker_backend(config, client, run_scope(RunPaths.create(runs_dir, config.run_id).root)))
    runner = BatchRunner(config, client, Preparer(client, specs, resolver, args.cache_dir), backend=keeping)
    bare: dict[str, BareContainer] = {}
    try:
        for iid in ids:
            try:
                bare[iid] = BareContainer(runner, keeping, Task(instances[iid], preds[iid]))
            except RuntimeError as exc:
                print(f"skipping {exc}", file=sys.stderr)
        ids = [i for i in ids if i in bare]

        samples: dict[str, dict[str, list]] = {i: {"harness": [], "bare": [], "monitored": [], "before": [],
                                                   "middle": []}
                                               for i in ids}
        for rnd in range(args.rounds):
            order = ids if rnd % 2 == 0 else list(reversed(ids))
            for iid in order:
                sides = ["harness", "before", "middle", "bare", "monitored"]
                sides = sides if rnd % 2 == 0 else list(reversed(sides))
                for side in sides:
                    if side in ("before", "middle"):
                        checkout = args.before if side == "before" else args.middle
                        if checkout is None:
                            continue
                        run = C.run_cli(C.harness_args(instances=instances_path, predictions=args.predictions,
                                                       run_id=f"{side}-{rnd}", output_dir=runs_dir,
                                                       extra=["--force", "--instance-ids", iid], **common),
                                        checkout=checkout.resolve())
                        rep = C.read_reports(runs_dir / f"{side}-{rnd}")[iid]
                        samples[iid][side].append({"cli_seconds": run.elapsed, "status": rep["status"],
                                                       "cli_cpu_seconds": run.cpu_seconds,
                                                       "timings": rep["timings"], "decomposition": decompose(rep)})
                        continue
                    if side in ("bare", "monitored"):
                        if side == "monitored" and bare[iid].monitored_argv is None:
                            continue
                        seconds, code, output = bare[iid].run(monitored=side == "monitored")
                        samples[iid][side].append({"seconds": seconds, "exit_code": code,
                                                   "loadavg_1m": C.os.getloadavg()[0],
                                                   "summary": summary_line(output)})
                    else:
                        run = C.run_cli(C.harness_args(instances=instances_path, predictions=args.predictions,
                                                       run_id=f"round-{rnd}", output_dir=runs_dir,
                                                       extra=["--force", "--instance-ids", iid], **common))
                        rep = C.read_reports(runs_dir / f"round-{rnd}")[iid]
                        tests = next((c for c in rep["commands"] if c["phase"] == "tests"), None)
                        samples[iid]["harness"].append({
                            "cli_seconds": run.elapsed, "returncode": run.returncode, "status": rep["status"],
                            "loadavg_1m": C.os.getloadavg()[0], "system_busy": run.system_busy,
                            "cli_cpu_seconds": run.cpu_seconds, "daemon_cpu_seconds": run.daemon_cpu_seconds,
                            "machine_cpu_seconds": run.machine_cpu_seconds,
                            "timings": rep["timings"], "decomposition": decompose(rep),
                            "test_exit_code": rep["test_exit_code"],
                            "summary": summary_line(tests["output_tail"]) if tests else ""})
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for b in bare.values():
            b.close()
        keeping.real.cleanup_run()
        client.close()

    # ------------------------------------------------------------------ aggregate
    rows, phase_rows, decomp_rows, per_instance = [], [], [], {}
    for iid in ids:
        h, b = samples[iid]["harness"], samples[iid]["bare"]
        walls = [s["timings"]["wall"] for s in h]
        bares = [s["seconds"] for s in b]
        paired = [hw - bw for hw, bw in zip(walls, bares)]
        ratios = [hw / bw for hw, bw in zip(walls, bares)]
        same_tests = all(s["summary"] == b[0]["summary"] for s in h) and all(s["summary"] == b[0]["summary"] for s in b)
        med_wall, med_bare = C.median(walls), C.median(bares)
        monitored = [s["seconds"] for s in samples[iid]["monitored"]]
        monitor_cost = C.median(m - b for m, b in zip(monitored, bares)) if monitored else None
        before = samples[iid]["before"]
        before_overhead = C.median(s["timings"]["wall"] - bw for s, bw in zip(before, bares)) if before else None
        agg = {
            "median_harness_wall": med_wall, "median_bare": med_bare, "ratio_of_medians": med_wall / med_bare,
            "median_monitored": C.median(monitored) if monitored else None,
            "before_median_wall": C.median(s["timings"]["wall"] for s in before) if before else None,
            "before_median_paired_overhead": before_overhead,
            "before_decomposition": ({k: C.median(s["decomposition"][k] for s in before)
                                      for k in before[0]["decomposition"]} if before else None),
            "before_statuses": sorted({s["status"] for s in before}),
            "before_median_cli_cpu_seconds": C.median(s["cli_cpu_seconds"] for s in before) if before else None,
            **_side_summary("middle", samples[iid]["middle"], bares),
            "median_around_tests": C.median(_around_tests(s) for s in h),
            "before_median_around_tests": C.median(_around_tests(s) for s in before) if before else None,
            "median_paired_monitor_cost": monitor_cost,
            "median_paired_ratio": C.median(ratios), "median_paired_overhead": C.median(paired),
            "median_cli_seconds": C.median(s["cli_seconds"] for s in h),
            "median_cli_cpu_seconds": C.median(s["cli_cpu_seconds"] for s in h),
            "median_system_busy": C.median(s["system_busy"] for s in h),
            "median_daemon_cpu_seconds": C.median(s["daemon_cpu_seconds"] for s in h),
            "median_machine_cpu_seconds": C.median(s["machine_cpu_seconds"] for s in h),
            "bare_first_run_in_fresh_container": bare[iid].first_run,
            "statuses": sorted({s["status"] for s in h}), "same_tests_ran": same_tests,
            "bare_summary": b[0]["summary"], "harness_summary": h[0]["summary"],
            "phases": {k: C.median(s["timings"].get(k, 0.0) for s in h)
                       for k in sorted({k for s in h for k in s["timings"]})},
            "decomposition": {k: C.median(s["decomposition"][k] for s in h)
                              for k in h[0]["decomposition"]},
        }
        per_instance[iid] = agg
        rows.append([iid, C.fmt(med_bare), C.fmt(med_wall), C.fmt(agg["ratio_of_medians"]),
                     C.fmt(agg["median_paired_overhead"]),
                     "-" if monitor_cost is None else C.fmt(monitor_cost, 3), C.fmt(agg["median_cli_seconds"]),
                     C.fmt(agg["median_cli_cpu_seconds"]), f"{agg['median_system_busy'] * 100:.0f}",
                     "/".join(agg["statuses"]), "yes" if same_tests else "NO"])
        ph = agg["phases"]
        phase_rows.append([iid, *(C.fmt(ph.get(k, 0.0), 3) for k in SHOWN),
                           C.fmt(agg["decomposition"]["other_phases"], 3),
                           C.fmt(agg["decomposition"]["unrecorded_in_timings"], 3),
                           C.fmt(ph["wall"] - ph["total"], 3), C.fmt(ph["wall"], 3)])
        d = agg["decomposition"]
        decomp_rows.append([iid, C.fmt(agg["median_paired_overhead"], 3), C.fmt(d["container_lifecycle"], 3),
                            f"{C.fmt(d['setup_execs'], 3)} ({int(d['execs'])} execs)",
                            C.fmt(d["archive_and_host"], 3), C.fmt(d["image_lookup"], 3),
                            C.fmt(d["tests_cmd"] - agg["median_bare"], 3),
                            C.fmt((bare[iid].first_run or float("nan")) - agg["median_bare"], 3)])

    md = [C.header(f"Overhead against the bare test command ({args.rounds} rounds, interleaved)", machine),
          C.markdown_table(["instance", "bare test cmd (s)", "harness wall (s)", "ratio", "overhead (s)",
                            "of which monitor+plugin (s)", "CLI process, 1 instance (s)", "CLI CPU (s)", "machine busy (%)", "status",
                            "same tests"], rows),
          "\nMedians over rounds. *harness wall* = report.json `timings.wall`; *overhead* = median of the "
          "per-round differences; *monitor+plugin* = median of the per-round differences between the test "
          "command run with the harness's bootstrap (audit hook, outcome plugin, evidence socket) and bare, in the "
          "same kept container; *CLI process* = wall time of the whole `harness run --instance-ids ID` "
          "process (interpreter start-up, imports, summary included); *CLI CPU* = that process's user+system "
          "CPU time (host side); *machine busy* = all CPUs busy during the harness runs, all processes "
          "(other sessions share the machine); *same tests* = pytest's summary line identical on both sides.\n",
          "### Harness phases (median s, report.json `timings`)\n",
          C.markdown_table(["instance", *SHOWN, "other phases³", "not in timings¹", "image lookup²", "wall"],
                           phase_rows),
          "\n*canaries* = planting the canaries in the test files (host, while the engine starts the "
          "container; *start* is what is left of the start after that); "
          "*setup* = inputs in + the set-up exec (reset, history check, apply, tree diff) + reading its "
          "report; *plan* = host "
          "decisions (tree truth, restore/seal plan); *tests* = the plan in + the test exec (delete, "
          "restore, seal, re-install, services, the tests, hashes), the host scanning the model's files "
          "meanwhile. ¹ `timings.total` minus the recorded "
          "evaluator phases. ² `wall − total`: the runner's preparation (spec, repository, export, image "
          "look-ups). ³ every other recorded phase (validate, ...).\n",
          "### Where the overhead goes (median s)\n",
          C.markdown_table(["instance", "overhead", "container create+start+remove", "docker execs (tests excluded)",
                            "archive API + host work", "image lookup", "tests exec − bare",
                            "first run in a fresh container − bare⁴"], decomp_rows),
          "\n⁴ the test command's first run in the bare container (the harness's own run that set it up) "
          "minus the median of the later runs there: what running in a *fresh* container costs by itself.\n"]
    if args.before is not None:
        before_rows = []
        for iid in ids:
            a = per_instance[iid]
            b = a["before_decomposition"] or {}
            d = a["decomposition"]
            before_rows.append([iid, C.fmt(a["median_bare"]),
                                C.fmt(a["before_median_wall"]) if a["before_median_wall"] is not None else "-",
                                C.fmt(a["before_median_paired_overhead"], 3)
                                if a["before_median_paired_overhead"] is not None else "-",
                                str(int(b.get("execs", 0))), C.fmt(a["median_harness_wall"]),
                                C.fmt(a["median_paired_overhead"], 3), str(int(d["execs"])),
                                "-" if a["median_paired_monitor_cost"] is None
                                else C.fmt(a["median_paired_monitor_cost"], 3),
                                "-" if a["before_median_around_tests"] is None
                                else C.fmt(a["before_median_around_tests"], 3), C.fmt(a["median_around_tests"], 3),
                                "-" if a["before_median_cli_cpu_seconds"] is None
                                else C.fmt(a["before_median_cli_cpu_seconds"]), C.fmt(a["median_cli_cpu_seconds"]),
                                "/".join(a["before_statuses"]) + " → " + "/".join(a["statuses"])])
        md += [f"### Before ({args.before}) and after, interleaved in the same rounds\n",
               C.markdown_table(["instance", "bare (s)", "before: wall (s)", "before: overhead (s)",
                                 "before: docker execs", "after: wall (s)", "after: overhead (s)",
                                 "after: docker execs", "after: of which monitor+plugin (s)",
                                 "before: around the tests (s)", "after: around the tests (s)",
                                 "before: CLI CPU (s)", "after: CLI CPU (s)", "status"],
                                before_rows),
               "\n*overhead* = median over rounds of (wall − bare) paired by round; *docker execs* = exec "
               "round trips per instance (after: the set-up step and the test step; the others run inside "
               "them); *around the tests* = median of (report `timings.wall` − the test exec's own duration): "
               "the harness's fixed cost without the suite's run-to-run noise; *CLI CPU* = user+system CPU of the whole `harness run` process (start-up and imports "
               "included), which machine load disturbs far less than wall time.\n"]
    if args.middle is not None:
        md += [f"### A third checkout ({args.middle}), interleaved in the same rounds\n",
               C.markdown_table(["instance", "bare (s)", "wall (s)", "overhead (s)", "docker execs", "CLI CPU (s)",
                                 "status"],
                                [[iid, C.fmt(a["median_bare"]), C.fmt(a["middle_median_wall"]),
                                  C.fmt(a["middle_median_paired_overhead"], 3), str(int(a["middle_execs"])),
                                  C.fmt(a["middle_median_cli_cpu_seconds"]), "/".join(a["middle_statuses"])]
                                 for iid, a in ((i, per_instance[i]) for i in ids) if "middle_median_wall" in a]),
               ""]
    cpu = [per_instance[i] for i in ids]
    md.append("\nCPU of one `harness run --instance-ids ID` invocation (medians over all instances and rounds): "
              f"harness process {C.fmt(C.median(a['median_cli_cpu_seconds'] for a in cpu))} s, dockerd + containerd "
              f"{C.fmt(C.median(a['median_daemon_cpu_seconds'] for a in cpu))} s, whole machine "
              f"{C.fmt(C.median(a['median_machine_cpu_seconds'] for a in cpu))} s (all processes, other sessions "
              "included).\n")
    text = "\n".join(md)
    print(text)
    out = C.write_results("overhead", {"machine": machine, "command": C.command_line(), "rounds": args.rounds,
                                       "instances_file": str(instances_path), "per_instance": per_instance,
                                       "warmup_statuses": warm_statuses,
                                       "samples": samples, "markdown": text}, args.out)
    print(f"\nraw results: {out}", file=sys.stderr)
    if args.runs_dir is None:
        shutil.rmtree(runs_dir, ignore_errors=True)
    if args.instances is None and args.slow_seconds > 0:  # the synthetic instance's image is ours alone
        C.remove_images("harness-demo__calcly-1-slow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
