"""A whole public set graded from nothing: time, CPU and disk, cold, warm and after a change.

    .venv/bin/python benchmarks/whole_set.py [--set lite|verified] [--limit N | --per-repo N]
        [--repos OWNER/NAME ...] [--max-workers 2] [--runs cold warm changed] [--compare-with COMMIT]
        [--out FILE] [--markdown] [--keep]
    .venv/bin/python benchmarks/whole_set.py --tables-from benchmarks/results/whole_set.json

**The set**: the records of Lite (``lite-test.jsonl``) or Verified whose base commit is in
``--repos-dir`` (``scripts/validate_whole_set.py``'s selection: 138 Lite, 198 Verified
here). A subset is chosen deterministically: ``--per-repo N`` takes each repository's
first N records (dataset order), ``--limit N`` the first N of a round robin over the
repositories; the chosen records run in dataset order, as the whole set would.

**The engine**: a private ``dockerd`` started here (``tests/fixtures/services.py``'s
PrivateEngine), its data root on a loop-mounted file system of its own
(``benchmarks/_measure.py``: its disk is read exactly, its size caps it so that the
host keeps ``--min-free``, and it is mounted with ``discard``, so what the engine frees
leaves the host's disk too; each sample also has the file's own size on the host,
``engine_file``), its daemons and its containers (build steps included) in
cpuacct cgroups of their own. The harness gets ``DOCKER_HOST``, a fresh cache directory,
a fresh state directory, fresh ``uv`` and ``pip`` caches, and no pip configuration (this
machine's pip reads local package indexes; ``--host-pip-config`` keeps them): the cold
run's inputs are what a new user has (the repositories, the host's interpreters and
network), nothing built or downloaded before. Everything is removed at the end unless
``--keep``.

**The runs** (``harness run --predictions gold``, ``--max-workers``), one after the other
on the same engine and cache:

* ``cold`` — nothing present: every base, interpreter, wheelhouse, environment and
  instance layer is made;
* ``warm`` — a new run directory, every image present;
* ``changed`` — the warm run's directory again, with a grading configuration that changes
  the grading key and no image input (``--timeout`` one second above the largest spec
  timeout of the set, so no verdict can change): nothing may be reused and nothing built;
* ``resume`` (optional) — the same again, nothing changed: every result reused.

For each: wall time; the phases from ``report.json`` (``image.prepare_seconds``: what a
task spent in each phase, waiting included; ``image.builds``: what it built itself, with
the seconds), summed and as critical path (the wall time during which some task was in
the phase, or some build of it ran); CPU (user+system) of the harness process tree, the
engine's daemons and its containers; disk of the engine, the harness cache (by
directory), the run directory and the host caches, sampled every ``--sample-every`` s
(peak) and at the end; load average before and during. The cold run also gives the growth
with the set (cumulative figures as instances finish) and the cost per repository and
version. With ``--compare-with COMMIT`` the cold run is measured for that commit's harness
(exported with ``git archive``) and then for this checkout, each on a fresh engine and cache.

Run it in the background: a whole set cold takes hours on 2 cores. **Stopping it** (SIGTERM,
SIGHUP, Ctrl-C) ends the harness's process group, stops the private engine, unmounts its file
system and removes its cgroups and directories (unless ``--keep``); the raw JSON is rewritten
atomically each time an instance finishes and at every run's end, so a run cut short (by a
signal or by ``--min-free``) leaves its figures so far: its ``stopped`` says why, a run still
going when the file was written has ``"final": false``, and ``stopped_by`` names the signal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Callable

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]
import _acct as A  # noqa: E402
import _common as C  # noqa: E402
import _measure as M  # noqa: E402
import _wholeset_report as R  # noqa: E402

ROOT = C.PROJECT_ROOT
#: ../shared/swebench beside the checkout (or beside the directory of worktrees)
DATA = next((d for d in (ROOT.parent / "shared" / "swebench", ROOT.parent.parent / "shared" / "swebench")
             if d.is_dir()), ROOT.parent / "shared" / "swebench")
SETS = {"lite": "lite-test.jsonl", "verified": "verified-test.jsonl"}
GB = 1024 ** 3
#: pip settings that point pip at other package sources than the index
HOST_PIP_SETTINGS = ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT", "PIP_NO_INDEX",
                     "PIP_REQUIREMENT", "PIP_NO_CACHE_DIR", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS",
                     "UV_INDEX", "UV_DEFAULT_INDEX", "UV_CONFIG_FILE")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=sorted(SETS), default="lite")
    p.add_argument("--data", type=Path, default=DATA, help="directory of the set's JSONL (default %(default)s)")
    p.add_argument("--repos-dir", type=Path, default=None, help="default: DATA/repos")
    sub = p.add_mutually_exclusive_group()
    sub.add_argument("--limit", type=int, help="the first N of a round robin over the repositories")
    sub.add_argument("--per-repo", type=int, help="each repository's first N records")
    p.add_argument("--repos", nargs="+", metavar="OWNER/NAME", help="only these repositories")
    p.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these instances (of the selection)")
    p.add_argument("--max-workers", type=int, default=2)
    p.add_argument("--runs", nargs="+", choices=("cold", "warm", "changed", "resume"),
                   default=["cold", "warm", "changed"])
    p.add_argument("--compare-with", metavar="COMMIT",
                   help="measure the cold run of COMMIT's harness first, then this checkout's (cold only)")
    p.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()),
                   help="where the engine's file system, cache and runs go (default %(default)s)")
    p.add_argument("--min-free", type=float, default=15.0,
                   help="GB the host keeps free: refused below it at the start, stopped when it falls below")
    p.add_argument("--engine-disk", type=float, default=None,
                   help="GB the engine may write (default: the host's free space less --min-free less 5 GB)")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between disk/CPU/load samples")
    p.add_argument("--du-every", type=float, default=60.0, help="seconds between sizings of cache and runs")
    p.add_argument("--task-timeout", type=float, default=None, help="passed to harness run")
    p.add_argument("--host-pip-config", action="store_true",
                   help="let pip and uv read this machine's configuration (local indexes, find-links); default: "
                        "none, as a new user's")
    p.add_argument("--keep", action="store_true", help="keep the engine's data, the cache and the runs")
    p.add_argument("--acct", action="store_true",
                   help="CPU time by program during each run, from the kernel's process accounting (accton, "
                        "Debian's acct package; benchmarks/_acct.py)")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/whole_set.json)")
    p.add_argument("--markdown", action="store_true", help="print the tables for docs/BENCHMARKS.md")
    p.add_argument("--tables-from", type=Path, metavar="JSON", help="only print the tables of an earlier run")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- the set

def select_records(args) -> tuple[list[dict], dict]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from validate_whole_set import select
    records = [json.loads(line) for line in (args.data / SETS[args.set]).read_text().splitlines() if line.strip()]
    repos_dir = args.repos_dir or args.data / "repos"
    chosen, left = select(records, repos_dir)
    held = len(chosen)
    if args.repos:
        chosen = [r for r in chosen if r["repo"] in set(args.repos)]
    if args.instance_ids:
        unknown = sorted(set(args.instance_ids) - {r["instance_id"] for r in chosen})
        if unknown:
            raise SystemExit(f"--instance-ids not in the selection: {unknown[:10]}")
        chosen = [r for r in chosen if r["instance_id"] in set(args.instance_ids)]
    chosen = subset(chosen, per_repo=args.per_repo, limit=args.limit)
    how = ("all" if not (args.per_repo or args.limit or args.repos or args.instance_ids) else
           ", ".join(x for x in (f"--per-repo {args.per_repo}" if args.per_repo else "",
                                 f"--limit {args.limit}" if args.limit else "",
                                 f"--repos {' '.join(args.repos)}" if args.repos else "",
                                 f"{len(args.instance_ids)} --instance-ids" if args.instance_ids else "") if x))
    return chosen, {"set": args.set, "held_here": held, "not_held": len(left), "chosen": len(chosen),
                    "how": how, "repos_dir": str(repos_dir)}


def subset(records: list[dict], *, per_repo: int | None = None, limit: int | None = None) -> list[dict]:
    """A deterministic subset, in the records' own order: each repository's first
    ``per_repo``, or the first ``limit`` of a round robin over the repositories."""
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_repo[record["repo"]].append(record)
    if per_repo:
        keep = {r["instance_id"] for rows in by_repo.values() for r in rows[:per_repo]}
    elif limit:
        keep, depth = set(), 0
        while len(keep) < min(limit, len(records)):
            for repo in sorted(by_repo):
                if depth < len(by_repo[repo]) and len(keep) < limit:
                    keep.add(by_repo[repo][depth]["instance_id"])
            depth += 1
    else:
        return list(records)
    return [r for r in records if r["instance_id"] in keep]


def changed_timeout(records: list[dict]) -> int:
    """One second above the largest test timeout any chosen instance's spec gives."""
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    return 1 + max(registry.get(r["repo"], r["version"]).timeout for r in records)


# ----------------------------------------------------------------------------- the machine

def machine_facts(work_dir: Path) -> dict:
    facts = C.machine_info()
    facts.pop("docker_version", None)  # the shared engine's: the private engine's is recorded per side
    facts.pop("other_containers_at_start", None)
    facts["harness_commit_full"] = C._run_text(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    facts["cpu_model"] = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                               if line.startswith("model name")), "?")
    facts["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB, 1)
    facts["disk"] = M.filesystem_facts(work_dir)
    facts["interpreters"] = _interpreter_sources()
    return facts


def _interpreter_sources() -> dict:
    """Where each Python comes from here (a new user needs the same host interpreters)."""
    from harness.engine.layers import BaseDefinition
    return {k: v.describe() for k, v in BaseDefinition.load().pythons.items()}


# ----------------------------------------------------------------------------- one side

class Side:
    """One harness to measure: this checkout, or a commit exported beside it."""

    def __init__(self, label: str, checkout: Path | None, commit: str) -> None:
        self.label, self.checkout, self.commit = label, checkout, commit

    def env(self) -> dict:
        if self.checkout is None:
            return {}
        return {"PYTHONPATH": str(self.checkout), "HARNESS_DATA_DIR": str(self.checkout)}


def export_commit(commit: str, into: Path) -> Side:
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", full], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return Side(full[:7], into, full)


class Bench:
    """A private engine, its file system, its cgroups, and the directories of one side."""

    def __init__(self, args, side: Side) -> None:
        from tests.fixtures.services import PrivateEngine
        self.args, self.side = args, side
        self.root = Path(tempfile.mkdtemp(prefix="hxb-wholeset-", dir=args.work_dir))
        self.top = f"hxb-wholeset-{os.getpid()}-{self.root.name[-6:]}"
        self.cache, self.runs = self.root / "cache", self.root / "runs"
        self.host_caches = {"uv": self.root / "host-cache" / "uv", "pip": self.root / "host-cache" / "pip"}
        self.state = self.root / "state"
        self.cpu = {name: M.CpuGroup(f"{self.top}/{name}") for name in ("harness", "daemon", "containers")}
        free = M.free_bytes(args.work_dir)
        size = (args.engine_disk * GB if args.engine_disk else free - args.min_free * GB - 5 * GB)
        if size < 5 * GB:
            raise SystemExit(f"{args.work_dir}: {free / GB:.1f} GB free; with --min-free {args.min_free} that leaves "
                             f"{size / GB:.1f} GB for the engine (at least 5 GB needed)")
        self.disk = M.LoopDisk(self.root / "engine.img", self.root / "engine-data", int(size))
        self.engine = PrivateEngine("wholeset", data_root=self.disk.mount,
                                    daemon_args=(f"--cgroup-parent=/{self.top}/containers",),
                                    preexec_fn=self.cpu["daemon"].join_self)

    def __enter__(self) -> "Bench":
        try:
            for group in self.cpu.values():
                group.create()
            self.disk.create()
            self.engine.start()
            client = self.engine.client()
            try:
                self.engine_version = client.version().get("Version", "?")
                present = client.images.list(all=True)
            finally:
                client.close()
            if present:
                raise SystemExit(f"the private engine is not empty ({len(present)} images)")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        """Engine, then its file system, then the cgroups and directories: each step runs
        whatever the one before it did (a step that fails says so and the next runs)."""
        steps = [("stop the private engine", self.engine.stop),
                 ("unmount the engine's file system", self.disk.unmount if self.args.keep else self.disk.remove),
                 ("remove the cgroups", lambda: M.remove_cgroup_tree(self.top))]
        if not self.args.keep:
            steps += [("remove the work directory", lambda: shutil.rmtree(self.root, ignore_errors=True)),
                      ("remove the engine's directory", self.engine.remove_data)]
        interrupted: BaseException | None = None
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 — every later step must still run
                print(f"clean-up: could not {what}: {exc!r}", file=sys.stderr)
            except BaseException as exc:  # a stop signal during clean-up: finish it, then stop
                interrupted = interrupted or exc
        left = M.mounts_below(self.root) + M.mounts_below(self.engine.root)
        if left:
            print(f"clean-up: still mounted: {left}", file=sys.stderr)
        if self.args.keep:
            print(f"kept: {self.root} (engine file system {self.disk.image}, cache, runs)", file=sys.stderr)
        if interrupted is not None:
            raise interrupted

    def environment(self) -> dict:
        env = dict(os.environ, DOCKER_HOST=self.engine.url, HARNESS_STATE_DIR=str(self.state),
                   UV_CACHE_DIR=str(self.host_caches["uv"]), PIP_CACHE_DIR=str(self.host_caches["pip"]),
                   **self.side.env())
        env.pop("HARNESS_CACHE_DIR", None)
        if not self.args.host_pip_config:
            # a new user's pip: no configuration file, no local indexes or wheel directories
            # this machine adds (they would serve downloads from the local disk)
            env["PIP_CONFIG_FILE"] = os.devnull
            for name in HOST_PIP_SETTINGS:
                env.pop(name, None)
        return env

    def cpu_now(self) -> dict[str, tuple[float, float]]:
        return {name: group.seconds() for name, group in self.cpu.items()}

    def sizes(self, run_dir: Path | None) -> dict[str, int]:
        """The harness cache by directory, the host caches, and the run directory."""
        out = {}
        if self.cache.is_dir():
            for entry in sorted(self.cache.iterdir()):
                out[f"cache/{entry.name}"] = M.du(entry) if entry.is_dir() else entry.stat().st_blocks * 512
        for name, path in self.host_caches.items():
            out[f"host/{name}"] = M.du(path)
        out["runs"] = M.du(self.runs)
        if run_dir is not None:
            out["this run"] = M.du(run_dir)
        return out

    # ------------------------------------------------------------------ one run
    def run(self, name: str, run_id: str, instances: Path, extra: list[str],
            publish: Callable[[dict], None] = lambda result: None) -> dict:
        """One ``harness run``, measured. ``publish`` receives a snapshot of the result each
        time more instances have finished (``"final": False``) and the result at the end,
        also when the run is stopped (a signal, the host's free space): a long run cut
        short still leaves its figures."""
        args = self.args
        argv = [sys.executable, "-m", "harness.cli", "run", "--instances", str(instances), "--predictions", "gold",
                "--repos-dir", str(args.repos_dir or args.data / "repos"), "--no-clone",
                "--max-workers", str(args.max_workers), "--run-id", run_id, "--output-dir", str(self.runs),
                "--cache-dir", str(self.cache), "--quiet", *extra]
        if args.task_timeout:
            argv += ["--task-timeout", str(args.task_timeout)]
        run_dir = self.runs / run_id
        cpu0, load0 = self.cpu_now(), os.getloadavg()
        last_sizes: dict = {"t": -1e9, "sizes": {}}
        published = {"done": 0}
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        accounting = A.Accounting(self.root / f"acct-{name}") if args.acct else None
        run = M.GroupRun(argv, out=logs / f"{name}.out", err=logs / f"{name}.err", every=args.sample_every,
                         cwd=self.side.checkout or ROOT, env=self.environment(),
                         preexec_fn=self.cpu["harness"].join_self)

        def result(samples: list[dict], *, final: bool, status: int | None = None, usage=None) -> dict:
            """What is known of the run now; ``final`` once the harness has exited (or was ended)."""
            good = [s for s in samples if "error" not in s]
            cpu1 = self.cpu_now()
            images = {"engine_bytes": None, "harness_bytes": None, "images": []}
            if final:
                try:
                    client = self.engine.client(timeout=600)
                    try:
                        images = R.engine_images(client)
                    finally:
                        client.close()
                except Exception as exc:  # noqa: BLE001 — a stopped run's engine may not answer
                    images["error"] = repr(exc)
            return {
                "name": name, "run_id": run_id, "argv": argv, "final": final,
                "exit_code": os.waitstatus_to_exitcode(status) if status is not None else None,
                "stopped": run.stopped, "wall": run.elapsed(), "started_at": run.started_at,
                "rusage_cpu": usage.ru_utime + usage.ru_stime if usage is not None else None,
                "cpu": {k: {"user": cpu1[k][0] - cpu0[k][0], "system": cpu1[k][1] - cpu0[k][1]} for k in cpu1},
                "load_before": load0, "load_during": [s["load1"] for s in good],
                "engine_final": self.disk.used(),
                "sizes_final": self.sizes(run_dir) if final else dict(last_sizes["sizes"]),
                "images": images, "samples": good, "sampler_errors": [s["error"] for s in samples if "error" in s],
                "reports": R.read_run(run_dir, run.started_at), "summary": _read_json(run_dir / "summary.json"),
                "wheels": R.wheel_sharing(self.cache / "wheelhouse"),
                "stderr_tail": (logs / f"{name}.err").read_text(errors="replace")[-3000:],
                **({"acct": accounting.summary(frozenset({run.proc.pid} if run.proc else ()))}
                   if final and accounting is not None else {}),
            }

        def probe() -> dict:
            t = run.elapsed()
            sample = {"t": round(t, 1), "done": C.count_reports(run_dir), "engine": self.disk.used(),
                      "engine_file": self.disk.host_bytes(), "host_free": M.free_bytes(args.work_dir),
                      "load1": os.getloadavg()[0], "cpu": {k: round(u + s, 2) for k, (u, s) in self.cpu_now().items()}}
            if t - last_sizes["t"] >= args.du_every:
                last_sizes.update(t=t, sizes=self.sizes(run_dir))
                sample["sizes"] = last_sizes["sizes"]
            if sample["host_free"] < args.min_free * GB and not run.stopped:
                run.stop(f"the host's free space fell to {sample['host_free'] / GB:.1f} GB "
                         f"(--min-free {args.min_free}): the run was stopped")
            if sample["done"] > published["done"]:
                published["done"] = sample["done"]
                publish(result([*run.samples, sample], final=False))
            return sample

        def record_interrupted(status: int | None, usage) -> None:
            if accounting is not None:
                accounting.stop()
            final = result(run.samples, final=True, status=status, usage=usage)
            publish(final)
            print(f"[{self.side.label}] {name}: {run.stopped} after {final['wall']:.0f} s, "
                  f"{len(final['reports'])} reports", file=sys.stderr, flush=True)

        if accounting is not None:
            accounting.start()
        try:
            status, usage = run.wait(probe, on_interrupt=record_interrupted,
                                     interrupted=lambda exc: f"interrupted ({exc!r}): the run was stopped")
        finally:
            if accounting is not None:
                accounting.stop()
        final = result(run.samples, final=True, status=status, usage=usage)
        publish(final)
        print(f"[{self.side.label}] {name}: {final['wall']:.0f} s, exit {final['exit_code']}, "
              f"{len(final['reports'])} reports, engine {final['engine_final'] / GB:.2f} GB"
              + (f"; {run.stopped}" if run.stopped else ""), file=sys.stderr, flush=True)
        return final


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def measure_side(args, side: Side, records: list[dict], runs: list[str], results: "M.Results") -> dict:
    out = {"label": side.label, "commit": side.commit, "runs": {}}
    results.data["sides"].append(out)
    with Bench(args, side) as bench:
        instances = C.write_jsonl(bench.root / "instances.jsonl", records)
        out.update(engine_version=bench.engine_version, engine_disk_cap=bench.disk.size_bytes)
        timeout = changed_timeout(records)
        plan = {"cold": ("cold", []), "warm": ("warm", []), "changed": ("warm", ["--timeout", str(timeout)]),
                "resume": ("warm", ["--timeout", str(timeout)])}
        out["changed_config"] = f"--timeout {timeout} (the largest spec timeout of the set + 1 s)"
        results.save()
        for name in runs:
            run_id, extra = plan[name]

            def publish(result: dict, name: str = name) -> None:
                out["runs"][name] = result
                results.save()
            bench.run(name, run_id, instances, extra, publish)
            if out["runs"][name]["stopped"]:
                break
        return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.tables_from:
        print(R.markdown(json.loads(args.tables_from.read_text())))
        return 0
    if os.geteuid() != 0:
        raise SystemExit("a private engine needs root (dockerd, a loop mount, cgroups)")
    args.work_dir = args.work_dir.resolve()
    free = M.free_bytes(args.work_dir)
    if free < (args.min_free + 5) * GB:
        raise SystemExit(f"{args.work_dir}: {free / GB:.1f} GB free, below --min-free {args.min_free} + 5 GB: "
                         "not started")
    if args.acct and not A.Accounting.available():
        raise SystemExit("--acct needs accton (apt-get install acct)")
    records, selection = select_records(args)
    if not records:
        raise SystemExit("no instance selected")
    machine = machine_facts(args.work_dir)
    sides = [Side("this checkout", None, machine["harness_commit_full"])]
    runs = list(args.runs)
    exported = None
    print(f"{len(records)} instances ({selection['how']}), {len(sides) + bool(args.compare_with)} side(s), "
          f"runs {' '.join(['cold'] if args.compare_with else runs)}; load {os.getloadavg()[0]:.2f}",
          file=sys.stderr, flush=True)
    pip_config = ("this machine's" if args.host_pip_config else
                  f"none (PIP_CONFIG_FILE={os.devnull}, {', '.join(HOST_PIP_SETTINGS)} unset)")
    results = M.Results("whole_set", {
        "command": C.command_line(), "machine": machine, "selection": selection,
        "instances": [r["instance_id"] for r in records],
        "versions": {r["instance_id"]: [r["repo"], r["version"]] for r in records},
        "max_workers": args.max_workers, "sides": [], "complete": False, "pip_config": pip_config}, args.out)
    data = results.data
    code = 0
    with M.StopSignals():
        try:
            if args.compare_with:
                exported = Path(tempfile.mkdtemp(prefix="hxb-before-", dir=args.work_dir))
                shutil.rmtree(exported)
                sides.insert(0, export_commit(args.compare_with, exported))
                runs = ["cold"]
            for side in sides:
                measure_side(args, side, records, runs, results)
            data["complete"] = True
        except (M.Stopped, KeyboardInterrupt) as exc:
            data["stopped_by"] = f"{type(exc).__name__}: {exc}"
            print(f"stopped ({data['stopped_by']}): what was measured is kept", file=sys.stderr)
            code = 128 + (exc.signum if isinstance(exc, M.Stopped) else signal.SIGINT)
        finally:
            if exported is not None:
                shutil.rmtree(exported, ignore_errors=True)
            data["machine"]["loadavg_at_end"] = os.getloadavg()
            print(f"raw results: {results.save()}", file=sys.stderr)
    if args.markdown:
        print(R.markdown(data))
    return code


if __name__ == "__main__":
    sys.exit(main())
