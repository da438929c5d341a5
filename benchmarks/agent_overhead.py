"""The agent stage's cost against mini-swe-agent's own Docker environment (issue 35), side by
side in one run on the same instance image and the same commands.

(a) **Per-step execution latency.** The same command sequence, through the harness's working
sandbox (``harness.agents.workspace``: ``DockerWorkspace.run``, a fresh ``bash -c`` as the
unprivileged user through the SDK, started by a trusted runner) and through mini-swe-agent's
own ``minisweagent.environments.docker.DockerEnvironment`` (``docker exec ... bash -lc``, one
``docker`` CLI process per command), each in a container of the same instance image. The
sequence is trivial commands (``true``, ``ls``, ``cat README.rst``, repeated) and then every
command of a real recorded trajectory in order (default: pytest-dev__pytest-7490 of the shared
mini-swe-agent 1.15.0 run, 94 commands). Each round starts a fresh container on each side;
command by command the two sides alternate which goes first. For trivial commands the plain
SDK exec of grading (``DockerSandbox.exec`` of ``bash -c CMD`` as the same user, in the same
sandbox) is timed too, so the runner's share is seen.

(b) **The whole attempt.** The trajectory replayed through ``harness solve --replay`` (the CLI
process, and the same call as ``harness.solve(replay=...)`` in this process with its phases
timed: sandbox start, populate + fold, per-step, diff, removal, records) against
mini-swe-agent's own loop: its ``DefaultAgent`` with the recorded config, over its
``DockerEnvironment`` with the recorded environment config on the same image, fed the recorded
outputs in order by a recording model (benchmarks/_mini_swe_agent_side.py). Rounds rotate the
order of the three.

mini-swe-agent runs in the scaffold pin's own virtualenv (harness.agents.pins, installed under
``--cache-dir`` as the harness installs it): never in the harness's. Its container gets one
untimed set-up command first: the tree copied from /opt/harness/testbed to /testbed (the
harness's images keep it there; SWE-bench's have it at /testbed) and the environment's venv
put on PATH in root's .bashrc (SWE-bench's images activate their conda environment there). Its
container is started with the recorded ``run_args`` plus ``--cpu-shares`` of the harness's
sandboxes (1024 a core: docker's default is 1024), so that on a shared, loaded machine the
scheduler favours neither side (``--mini-default-cpu-shares`` leaves docker's default).

    .venv/bin/python benchmarks/agent_overhead.py [--instance-id pytest-dev__pytest-7490] \
        [--rounds 3] [--trivial-repeats 5] [--attempt-rounds 3] [--parts steps attempt] \
        [--mini-default-cpu-shares] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SHARED = C.PROJECT_ROOT.parent / "shared"
DEFAULT_INSTANCES = SHARED / "swebench" / "verified-test.jsonl"
DEFAULT_REPOS = SHARED / "swebench" / "repos"
DEFAULT_TRAJECTORIES = SHARED / "trajectories" / "mini-swe-agent-1.15.0__gemini-3-pro-preview" / "trajs"
MINI_SIDE = Path(__file__).resolve().parent / "_mini_swe_agent_side.py"
TRIVIAL = ("true", "ls", "cat README.rst")
RUN_LABEL = "bench-agent-overhead"
#: mini-swe-agent's container, before anything is timed (see the module doc)
MINI_SETUP = ("cp -a /opt/harness/testbed/. /testbed/ && chown -R root:root /testbed && "
              "echo 'export PATH=/opt/harness/venv/bin:$PATH' >> /root/.bashrc")
#: a command that starts the environment's Python (a test run, a script): its time is mostly the interpreter's
RUNS_PYTHON = re.compile(r"(^|[\s;&|(])(pytest|python[0-9.]*)(\s|$)", re.MULTILINE)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n.*?\n\2(?=\n|$)", re.DOTALL)


def runs_python(command: str) -> bool:
    """Whether a command starts Python (a here-document's text, a file being written, is not run)."""
    return bool(RUNS_PYTHON.search(_HEREDOC.sub("", command)))


#: run untimed on both sides first: the same python and pytest, a clean tree (the users differ by design:
#: the harness's commands run as uid 1000, mini-swe-agent's as root)
CHECK = "command -v python pytest; git status --porcelain | wc -l"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=Path, default=DEFAULT_INSTANCES)
    p.add_argument("--instance-id", default="pytest-dev__pytest-7490")
    p.add_argument("--trajectories", type=Path, default=DEFAULT_TRAJECTORIES,
                   help="a directory holding <instance_id>.traj.json[.gz]")
    p.add_argument("--repos-dir", type=Path, default=DEFAULT_REPOS)
    p.add_argument("--rounds", type=int, default=3, help="rounds of the per-step sequence")
    p.add_argument("--trivial-repeats", type=int, default=5, help="each trivial command, per round")
    p.add_argument("--max-commands", type=int, help="only the trajectory's first N commands in (a) (a quick try)")
    p.add_argument("--attempt-rounds", type=int, default=3, help="rounds of the whole attempt")
    p.add_argument("--parts", nargs="+", choices=("steps", "attempt"), default=["steps", "attempt"])
    p.add_argument("--mini-default-cpu-shares", action="store_true",
                   help="start mini-swe-agent's container with docker's default CPU weight (1024) instead of the "
                        "weight the harness gives its sandboxes (1024 a core): on a loaded machine the heavier "
                        "weight wins CPU time, which is the scheduler's doing, not the environment's")
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--work-dir", type=Path, help="run directories (default: a temporary one, removed)")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/agent_overhead.json)")
    p.add_argument("--render", type=Path, metavar="RAW_JSON", help="measure nothing: print the tables of a raw JSON")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- the subject

class Subject:
    """The instance, its recorded trajectory, its prepared image and the scaffold pin's environment."""

    def __init__(self, args) -> None:
        from harness.agents.pins import ensure_environment, parse_pin
        from harness.agents.trajectories import find_trajectories, load_trajectory
        from harness.engine.client import connect
        from harness.inputs.instances import load_instances
        from harness.inputs.repos import RepoResolver
        from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
        from harness.preparation.preparer import Preparer
        from harness.run.solve_plan import given_for, recorded_config
        self.args = args
        loaded = load_instances(args.instances, [args.instance_id])
        if not loaded.instances:
            raise SystemExit(f"{args.instance_id} is not in {args.instances}")
        self.instance = loaded.instances[0]
        path = find_trajectories(args.trajectories).get(args.instance_id)
        if path is None:
            raise SystemExit(f"no trajectory of {args.instance_id} in {args.trajectories}")
        self.trajectory_path = path
        self.recorded = load_trajectory(path)
        self.config = recorded_config(self.recorded.config)
        self.task, _ = given_for(self.instance, False, False)
        self.environment_config = {k: v for k, v in (self.config.get("environment") or {}).items()
                                   if k in ("cwd", "env", "timeout")}
        self.commands = [s.action for s in self.recorded.steps if s.action is not None]
        self.client = connect()
        resolver = RepoResolver(args.cache_dir, args.repos_dir, {}, allow_clone=False)
        self.preparer = Preparer(self.client, SpecRegistry.load(DEFAULT_SPECS_DIR), resolver, args.cache_dir)
        started = time.monotonic()
        self.prepared = self.preparer.prepare(self.instance)
        self.prepare_seconds = time.monotonic() - started
        from harness.engine.cpus import cpu_limit
        from harness.engine.sandbox import DockerBackend, Limits
        #: the CPU weight of the harness's sandboxes (DockerBackend.start: 1024 a core), given to
        #: mini-swe-agent's container too unless --mini-default-cpu-shares
        self.cpu_shares = cpu_limit(Limits().cpus, self.prepared.spec.cpus,
                                    DockerBackend(self.client, RUN_LABEL).engine_cores()).shares
        self.pin = parse_pin(f"mini-swe-agent=={self.recorded.scaffold_version}")
        self.pin_environment = ensure_environment(self.pin, args.cache_dir)

    def mini_environment(self) -> dict:
        """The recorded environment config mini-swe-agent's side starts its container with
        (its ``run_args`` given the harness sandboxes' CPU weight, see --mini-default-cpu-shares)."""
        config = dict(self.config.get("environment") or {})
        if not self.args.mini_default_cpu_shares and self.cpu_shares:
            config["run_args"] = [*(config.get("run_args") or ["--rm"]), "--cpu-shares", str(self.cpu_shares)]
        return config

    def describe(self) -> dict:
        return {"action_steps": [step.index for step in self.recorded.steps if step.action is not None],
                "harness_cpu_shares": self.cpu_shares,
                "mini_run_args": self.mini_environment().get("run_args"),
                "instance_id": self.instance.instance_id, "image": self.prepared.image.tag,
                "image_id": self.prepared.image.image_id, "trajectory": str(self.trajectory_path),
                "recorded_steps": len(self.recorded.steps), "commands": len(self.commands),
                "recorded_exit_status": self.recorded.exit_status, "pin": self.pin.spec,
                "pin_environment": str(self.pin_environment.root),
                "pin_packages": {k: self.pin_environment.packages.get(k) for k in ("mini-swe-agent", "litellm")},
                "environment_config": self.environment_config, "prepare_seconds": round(self.prepare_seconds, 3)}


class MiniSide:
    """mini-swe-agent's side (benchmarks/_mini_swe_agent_side.py) in the pin's interpreter."""

    def __init__(self, subject: Subject, mode: str, request: dict, config_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(MSWEA_SILENT_STARTUP="1", MSWEA_GLOBAL_CONFIG_DIR=str(config_dir), NO_COLOR="1", TERM="dumb")
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([str(subject.pin_environment.python), "-I", str(MINI_SIDE), mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                                     text=True, cwd=config_dir)
        self.head = self.call({"image": subject.prepared.image.tag, "setup": MINI_SETUP, **request})

    def call(self, message: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stderr.seek(0)
            raise RuntimeError("mini-swe-agent's side ended: " + self.stderr.read().decode(errors="replace")[-3000:])
        return json.loads(line)

    def close(self, *, end: bool) -> dict:
        """The removal answer (sent ``end`` first in steps mode)."""
        assert self.proc.stdin is not None
        if end:
            self.proc.stdin.write(json.dumps({"end": True}) + "\n")
            self.proc.stdin.flush()
        removed = self.read()
        self.proc.stdin.close()
        self.proc.wait(timeout=120)
        return removed


# ----------------------------------------------------------------------------- (a) per step

def _ours(workspace, command: str, subject: Subject) -> dict:
    import hashlib
    cfg = subject.environment_config
    started = time.perf_counter()
    result = workspace.run(command, cwd=cfg.get("cwd", "/testbed"), timeout=float(cfg.get("timeout", 60)),
                           env=cfg.get("env") or {})
    seconds = time.perf_counter() - started
    output = result.output.encode("utf-8", "replace")
    return {"seconds": seconds, "inner_seconds": result.seconds, "returncode": result.returncode,
            "timed_out": result.timed_out, "output_bytes": len(output),
            "output_sha256": hashlib.sha256(output).hexdigest(), "output": result.output}


def _plain_exec(workspace, command: str) -> dict:
    """Grading's exec path in the same sandbox, same user and directory: the floor under a step."""
    started = time.perf_counter()
    result = workspace.sandbox.exec(["bash", "-c", command], workdir="/testbed", timeout=60,
                                    user=f"{workspace.uid}:{workspace.gid}")
    return {"seconds": time.perf_counter() - started, "returncode": result.exit_code}


def measure_steps(subject: Subject, backend, rounds: int, trivial_repeats: int, work: Path) -> dict:
    from harness.agents.observations import normalise_observation
    from harness.agents.workspace import open_workspace
    sequence = [(f"trivial:{c}", c) for c in TRIVIAL for _ in range(trivial_repeats)]
    commands = subject.commands[:subject.args.max_commands] if subject.args.max_commands else subject.commands
    sequence += [(f"step:{i}", c) for i, c in enumerate(commands, start=1)]
    samples: list[dict] = []
    setups: list[dict] = []
    bytecode: list[dict] = []
    for r in range(rounds):
        started = time.perf_counter()
        workspace = open_workspace(backend, subject.prepared, name_hint="bench-agent-steps",
                                   scratch_dir=work)
        ours_open = time.perf_counter() - started
        mini = None
        try:
            mini = MiniSide(subject, "steps", {"environment": subject.mini_environment()}, work)
            check = {"ours": workspace.run(CHECK, env=subject.environment_config.get("env") or {}).output,
                     "mini": mini.call({"command": CHECK})}
            check["mini"].pop("output", None)
            setups.append({"round": r, "ours_open_seconds": ours_open, "folded": list(workspace.folded),
                           "mini_start_seconds": mini.head["start_seconds"],
                           "mini_setup_seconds": mini.head["setup_seconds"],
                           "mini_setup_returncode": mini.head["setup_returncode"],
                           "check_ours": check["ours"], "check_mini_sha256": check["mini"]["output_sha256"],
                           "check_same_output": _sha(check["ours"]) == check["mini"]["output_sha256"]})
            for i, (label, command) in enumerate(sequence):
                order = ["ours", "mini"] if (r + i) % 2 == 0 else ["mini", "ours"]
                sample: dict[str, Any] = {"round": r, "index": i, "label": label, "first": order[0]}
                outputs = {}
                for side in order:
                    sample[side] = (_ours(workspace, command, subject) if side == "ours"
                                    else mini.call({"command": command}))
                    outputs[side] = sample[side].pop("output")
                sample["same_normalised_output"] = (normalise_observation(outputs["ours"])
                                                    == normalise_observation(outputs["mini"]))
                if label.startswith("trivial:"):
                    sample["plain_exec"] = _plain_exec(workspace, command)
                samples.append(sample)
            bytecode += _bytecode_check(workspace, mini, subject, r, trivial_repeats)
            print(f"steps round {r + 1}/{rounds}: {len(sequence)} commands", file=sys.stderr)
        finally:
            started = time.perf_counter()
            workspace.close()
            closed = {"ours_close_seconds": time.perf_counter() - started}
            if mini is not None:
                closed["mini_remove_seconds"] = mini.close(end=True)["remove_seconds"]
            if setups and setups[-1]["round"] == r:
                setups[-1].update(closed)
    return {"sequence": [label for label, _ in sequence], "commands": [command for _, command in sequence],
            "samples": samples, "setups": setups, "bytecode": bytecode}


#: a Python start that imports the repository's own package (pytest-7490's pytest is installed from /testbed)
PYTHON_START = "pytest --version"


def _bytecode_check(workspace, mini, subject: Subject, r: int, repeats: int) -> list[dict]:
    """What the grading environment's PYTHONDONTWRITEBYTECODE=1 costs a Python start in the working
    sandbox: PYTHON_START without the repository's bytecode (the harness's case: none is ever
    written), then once with writing allowed, then with the bytecode cached (mini-swe-agent's case
    after its first Python start); mini-swe-agent's side interleaved for reference."""
    env = subject.environment_config.get("env") or {}
    out = []
    for phase in ("no bytecode written", "bytecode cached"):
        if phase == "bytecode cached":
            workspace.run(PYTHON_START, env={**env, "PYTHONDONTWRITEBYTECODE": ""})
        for k in range(repeats):
            order = ["ours", "mini"] if (r + k) % 2 == 0 else ["mini", "ours"]
            for side in order:
                seconds = (_ours(workspace, PYTHON_START, subject)["seconds"] if side == "ours"
                           else mini.call({"command": PYTHON_START})["seconds"])
                out.append({"round": r, "phase": phase, "side": side, "seconds": seconds})
    return out


def _sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def summarise_steps(data: dict) -> dict:
    by_label: dict[str, list[dict]] = {}
    for s in data["samples"]:
        by_label.setdefault(s["label"], []).append(s)
    trivial = {}
    for command in TRIVIAL:
        rows = by_label.get(f"trivial:{command}", [])
        ours = C.median(r["ours"]["seconds"] for r in rows)
        mini = C.median(r["mini"]["seconds"] for r in rows)
        trivial[command] = {"n": len(rows), "ours": ours, "mini": mini, "ratio": ours / mini,
                            "difference": C.median(r["ours"]["seconds"] - r["mini"]["seconds"] for r in rows),
                            "plain_exec": C.median(r["plain_exec"]["seconds"] for r in rows),
                            "ours_inner": C.median(r["ours"]["inner_seconds"] for r in rows)}
    steps = []
    for label in data["sequence"]:
        if not label.startswith("step:") or label in {s["label"] for s in steps}:
            continue
        rows = by_label[label]
        steps.append({"label": label, "ours": C.median(r["ours"]["seconds"] for r in rows),
                      "mini": C.median(r["mini"]["seconds"] for r in rows),
                      "difference": C.median(r["ours"]["seconds"] - r["mini"]["seconds"] for r in rows),
                      "same_returncode": all(r["ours"]["returncode"] == r["mini"]["returncode"] for r in rows),
                      "same_output": all(r["same_normalised_output"] for r in rows)})

    def group(name: str, chosen: list[dict]) -> dict:
        ours, mini = sum(s["ours"] for s in chosen), sum(s["mini"] for s in chosen)
        return {"group": name, "n": len(chosen), "ours_total": ours, "mini_total": mini,
                "ratio_of_totals": ours / mini if mini else float("nan"),
                "median_difference": C.median(s["difference"] for s in chosen),
                "median_ratio": C.median(s["ours"] / s["mini"] for s in chosen if s["mini"]),
                "same_returncode": sum(s["same_returncode"] for s in chosen),
                "same_output": sum(s["same_output"] for s in chosen)}

    commands = dict(zip(data["sequence"], data.get("commands") or []))
    python = [s for s in steps if runs_python(commands.get(s["label"], ""))]
    shell = [s for s in steps if not runs_python(commands.get(s["label"], ""))]
    setups = data["setups"]
    bytecode = {f"{phase}, {side}": C.median(b["seconds"] for b in data.get("bytecode", [])
                                             if b["phase"] == phase and b["side"] == side)
                for phase in ("no bytecode written", "bytecode cached") for side in ("ours", "mini")}
    return {"trivial": trivial, "steps": steps, "bytecode": bytecode if data.get("bytecode") else None,
            "setup": {"ours_open": C.median(x["ours_open_seconds"] for x in setups),
                      "mini_start": C.median(x["mini_start_seconds"] for x in setups),
                      "mini_setup": C.median(x["mini_setup_seconds"] for x in setups),
                      "checks_agree": all(x["check_same_output"] for x in setups),
                      "folded": sorted({f for x in setups for f in x["folded"]})},
            "groups": [group("every command of the trajectory", steps),
                       group("shell tools only (ls, cat, sed, grep, find, git, ...)", shell),
                       group("commands that run Python (pytest, python)", python)]}


# ----------------------------------------------------------------------------- (b) the attempt

class Phases:
    """Wall-clock intervals of the harness's parts during one in-process ``harness.solve``,
    by wrapping them (restored on exit). Every wrapper is transparent: same arguments, same
    result, same exceptions."""

    def __init__(self) -> None:
        self.intervals: list[tuple[str, float, float]] = []
        self.marks: dict[str, float] = {}
        self._restore: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def wrap(self, owner: Any, name: str, label: str | Callable[..., str]) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                ended = time.perf_counter()
                chosen = label(*args, **kwargs) if callable(label) else label
                with self._lock:
                    self.intervals.append((chosen, started, ended))

        setattr(owner, name, timed)
        self._restore.append(lambda: setattr(owner, name, original))

    def mark_first(self, owner: Any, name: str, mark: str, when: Callable[..., bool]) -> None:
        original = getattr(owner, name)

        def marked(*args, **kwargs):
            if when(*args, **kwargs):
                self.marks.setdefault(mark, time.perf_counter())
            return original(*args, **kwargs)

        setattr(owner, name, marked)
        self._restore.append(lambda: setattr(owner, name, original))

    def restore(self) -> None:
        for undo in reversed(self._restore):
            undo()
        self._restore.clear()

    def total(self, label: str) -> float:
        return sum(end - start for name, start, end in self.intervals if name == label)

    def count(self, label: str) -> int:
        return sum(1 for name, _, _ in self.intervals if name == label)

    def first_start(self, label: str) -> float | None:
        return min((start for name, start, _ in self.intervals if name == label), default=None)


def _exec_kind(sandbox, argv, *args, **kwargs) -> str:
    from harness.agents.workspace import FOLD_SCRIPT
    text = " ".join(map(str, argv))
    if FOLD_SCRIPT in text:
        return "fold"
    if "cp -a" in text and "/testbed" in text:
        return "populate"
    return "other exec"


@contextlib.contextmanager
def instrumented():
    """The harness's parts timed while a ``harness.solve`` runs in this process."""
    import harness.agents.pins as pins
    import harness.agents.serving as serving
    import harness.agents.workspace as workspace
    import harness.run.solve_plan as solve_plan
    from harness.agents.protocol import HELLO
    from harness.engine.sandbox import DockerBackend, DockerSandbox
    from harness.preparation.preparer import Preparer
    from harness.run.solve_records import AttemptWriter
    phases = Phases()
    phases.wrap(solve_plan, "plan_replay", "plan (trajectory read)")
    phases.wrap(pins, "ensure_environment", "pin environment")
    phases.wrap(Preparer, "prepare", "instance image look-up")
    phases.wrap(DockerBackend, "start", "sandbox start")
    phases.wrap(DockerSandbox, "exec", _exec_kind)
    phases.wrap(workspace, "install", "runner install")
    phases.wrap(workspace.DockerWorkspace, "run", "steps")
    phases.wrap(workspace.DockerWorkspace, "diff", "tree diff")
    phases.wrap(workspace.DockerWorkspace, "close", "sandbox removal")
    phases.wrap(serving, "run_attempt", "attempt")
    phases.mark_first(serving, "expect", "hello", lambda message, kind, *a, **k: kind == HELLO)
    phases.wrap(AttemptWriter, "__call__", "records + replay comparison")
    try:
        yield phases
    finally:
        phases.restore()


def ours_library(subject: Subject, run_id: str, runs: Path) -> dict:
    import harness
    args = subject.args
    with instrumented() as phases:
        started = time.perf_counter()
        result = harness.solve(args.instances, replay=args.trajectories, instance_ids=[args.instance_id],
                               repositories=harness.Repositories(args.repos_dir, clone=False), run_id=run_id,
                               output_dir=runs, cache_dir=args.cache_dir, quiet=True)
        wall = time.perf_counter() - started
    if result.incomplete or result.solve["predictions"]["count"] != 1:
        raise RuntimeError(f"harness.solve did not complete the attempt: {result.solve.get('totals')}")
    attempt_start = phases.first_start("attempt")
    driver = (phases.marks["hello"] - attempt_start) if attempt_start and "hello" in phases.marks else float("nan")
    parts = {name: phases.total(name) for name in
             ("plan (trajectory read)", "pin environment", "instance image look-up", "sandbox start", "populate",
              "fold", "runner install", "steps", "tree diff", "sandbox removal", "records + replay comparison",
              "other exec")}
    parts["driver start (to hello)"] = driver
    parts["agent loop otherwise"] = (phases.total("attempt") - driver - parts["steps"] - parts["tree diff"])
    parts["other"] = wall - sum(v for k, v in parts.items() if k not in ("other exec",)) - parts["other exec"]
    return {"wall": wall, "parts": parts, "step_count": phases.count("steps"),
            "attempt_seconds": phases.total("attempt"), **_run_facts(runs / run_id, args.instance_id)}


def ours_cli(subject: Subject, run_id: str, runs: Path) -> dict:
    args = subject.args
    argv = [sys.executable, "-m", "harness.cli", "solve", "--instances", str(args.instances), "--instance-ids",
            args.instance_id, "--replay", str(args.trajectories), "--repos-dir", str(args.repos_dir), "--no-clone",
            "--run-id", run_id, "--output-dir", str(runs), "--cache-dir", str(args.cache_dir), "--quiet"]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=C.PROJECT_ROOT, timeout=3600)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"harness solve failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return {"wall": wall, **_run_facts(runs / run_id, args.instance_id)}


def _run_facts(run: Path, instance_id: str) -> dict:
    agent = json.loads((run / instance_id / "agent.json").read_text())
    replay = json.loads((run / instance_id / "replay.json").read_text())
    return {"agent_wall_seconds": agent["wall_seconds"], "steps": agent["steps"], "exit_status": agent["exit_status"],
            "exec_seconds": sum(t.get("exec_seconds") or 0.0 for t in agent["step_timings"]),
            "exec_seconds_per_step": [t.get("exec_seconds") for t in agent["step_timings"]],
            "same_submission": replay["same_submission"], "observation_agreement": replay["observation_agreement"]}


def mini_attempt(subject: Subject, work: Path) -> dict:
    from harness.agents.scaffold import same_diff
    request = {"config": {**subject.config, "environment": subject.mini_environment()}, "task": subject.task, "outputs": subject.recorded.outputs,
               "costs": subject.recorded.step_costs}
    side = MiniSide(subject, "attempt", request, work)
    head = side.head
    removed = side.close(end=False)
    return {"start_seconds": head["start_seconds"], "setup_seconds": head["setup_seconds"],
            "run_seconds": head["run_seconds"], "wall": head["start_seconds"] + head["run_seconds"],
            "exec_seconds": sum(head["exec_seconds"]), "executions": len(head["exec_seconds"]),
            "exec_seconds_per_command": head["exec_seconds"],
            "loop_otherwise": head["run_seconds"] - sum(head["exec_seconds"]),
            "remove_seconds": removed["remove_seconds"], "exit_status": head["exit_status"], "calls": head["calls"],
            "same_submission": same_diff(head["submission"], subject.recorded.submission)}


def measure_attempts(subject: Subject, rounds: int, work: Path) -> list[dict]:
    sides: dict[str, Callable[[int], dict]] = {
        "harness CLI": lambda r: ours_cli(subject, f"cli-{r}", work / "runs"),
        "harness library": lambda r: ours_library(subject, f"lib-{r}", work / "runs"),
        "mini-swe-agent": lambda r: mini_attempt(subject, work)}
    names = list(sides)
    out = []
    for r in range(rounds):
        order = names[r % 3:] + names[:r % 3]
        row: dict[str, Any] = {"round": r, "order": order}
        for name in order:
            busy0, total0 = C.cpu_times()
            row[name] = sides[name](r)
            busy1, total1 = C.cpu_times()
            row[name]["machine_busy"] = (busy1 - busy0) / max(1, total1 - total0)
            print(f"attempt round {r + 1}/{rounds}: {name} {row[name]['wall']:.1f} s", file=sys.stderr)
        out.append(row)
    return out


def summarise_attempts(rows: list[dict], action_steps: list[int], commands: list[str]) -> dict:
    def med(side: str, key: str) -> float:
        return C.median(r[side][key] for r in rows)

    # each command's execution, paired across the two sides by its place in the trajectory
    pairs: list[tuple[float, float, str]] = []
    for r in rows:
        ours, mini = r["harness library"]["exec_seconds_per_step"], r["mini-swe-agent"]["exec_seconds_per_command"]
        if len(mini) == len(action_steps) == len(commands) and max(action_steps) <= len(ours):
            pairs += [(ours[step - 1] or 0.0, theirs, command)
                      for step, theirs, command in zip(action_steps, mini, commands)]

    def per_step(chosen: list[tuple[float, float, str]]) -> dict:
        return {"n": len(chosen), "median_difference": C.median(o - m for o, m, _ in chosen),
                "ours_total": sum(o for o, _, _ in chosen) / max(1, len(rows)),
                "mini_total": sum(m for _, m, _ in chosen) / max(1, len(rows))}

    lib_parts = {k: C.median(r["harness library"]["parts"][k] for r in rows)
                 for k in rows[0]["harness library"]["parts"]}
    mini = {k: med("mini-swe-agent", k) for k in ("wall", "start_seconds", "setup_seconds", "run_seconds",
                                                  "exec_seconds", "loop_otherwise", "remove_seconds")}
    ours = {"cli": med("harness CLI", "wall"), "library": med("harness library", "wall")}
    paired = {"cli": C.median(r["harness CLI"]["wall"] / r["mini-swe-agent"]["wall"] for r in rows),
              "library": C.median(r["harness library"]["wall"] / r["mini-swe-agent"]["wall"] for r in rows)}
    return {"ours": ours, "mini": mini, "ratio": paired, "library_parts": lib_parts,
            "per_step": {"shell tools only": per_step([p for p in pairs if not runs_python(p[2])]),
                         "commands that run Python": per_step([p for p in pairs if runs_python(p[2])])},
            "busy": {side: C.median(r[side]["machine_busy"] for r in rows)
                     for side in ("harness CLI", "harness library", "mini-swe-agent")}}


# ----------------------------------------------------------------------------- output

def render(data: dict, steps: dict | None, attempts: dict | None) -> str:
    machine, subject, raw_attempts = data["machine"], data["subject"], data.get("attempts")
    title = "Agent stage: the working sandbox and the whole attempt against mini-swe-agent's own Docker environment"
    out = [C.header(title, machine).replace(f"command: `{C.command_line()}`", f"command: `{data['command']}`")]
    out.append(f"subject: {subject['instance_id']}, image `{subject['image']}` ({subject['image_id'][:19]}), "
               f"trajectory {Path(subject['trajectory']).name} ({subject['recorded_steps']} steps, "
               f"{subject['commands']} commands), pin {subject['pin']} {subject['pin_packages']}; CPU weight: the "
               f"harness's sandboxes {subject.get('harness_cpu_shares', 'not recorded')}, mini-swe-agent's "
               f"container run_args {subject.get('mini_run_args', 'as recorded (docker default CPU weight)')}\n")
    if steps is not None:
        rows = [[f"`{c}`", t["n"], C.fmt(t["ours"], 3), C.fmt(t["mini"], 3), C.fmt(t["ratio"]),
                 C.fmt(t["difference"], 3), C.fmt(t["plain_exec"], 3)] for c, t in steps["trivial"].items()]
        out.append("Per-step latency, trivial commands (median s over rounds × repeats):\n")
        out.append(C.markdown_table(["command", "n", "harness `DockerWorkspace.run`",
                                     "mini-swe-agent `DockerEnvironment.execute`", "ratio", "difference",
                                     "plain SDK exec, same sandbox"], rows))
        rows = [[g["group"], g["n"], C.fmt(g["ours_total"], 1), C.fmt(g["mini_total"], 1), C.fmt(g["ratio_of_totals"]),
                 C.fmt(g["median_difference"], 3), C.fmt(g["median_ratio"]), f"{g['same_returncode']}/{g['n']}",
                 f"{g['same_output']}/{g['n']}"] for g in steps["groups"]]
        st = steps["setup"]
        out.append(f"\nEach round's containers (median s): the harness's `open_workspace` {C.fmt(st['ours_open'], 2)} "
                   f"(start, populate /testbed, fold, runner; folded files: {st['folded'] or 'none'}); "
                   f"mini-swe-agent's `docker run -d` {C.fmt(st['mini_start'], 2)}, then its untimed set-up "
                   f"{C.fmt(st['mini_setup'], 2)}. Same python, pytest and a clean tree on both sides: "
                   f"{'yes' if st['checks_agree'] else 'NO'}.")
        if steps.get("bytecode"):
            b = steps["bytecode"]
            out.append(f"\n`{PYTHON_START}` (a Python start importing the repository's own package), median s: "
                       f"harness without the repository's bytecode (PYTHONDONTWRITEBYTECODE=1, grading's environment) "
                       f"{C.fmt(b['no bytecode written, ours'], 3)}, harness with it cached "
                       f"{C.fmt(b['bytecode cached, ours'], 3)}; mini-swe-agent (its bytecode written at its first "
                       f"Python start) {C.fmt(b['no bytecode written, mini'], 3)} and "
                       f"{C.fmt(b['bytecode cached, mini'], 3)} in the same two blocks.")
        out.append("\nThe trajectory's commands in order (per command: median over rounds; totals: sums of those):\n")
        out.append(C.markdown_table(["commands", "n", "harness total (s)", "mini-swe-agent total (s)",
                                     "ratio of totals", "median difference (s)", "median ratio",
                                     "same return code", "same output¹"], rows))
        out.append("\n¹ equal once the replay's normalisation (harness.agents.observations: test durations, "
                   "addresses, temporary paths) is applied, in every round.")
    if attempts is not None:
        m, p = attempts["mini"], attempts["library_parts"]
        rows = [["harness solve --replay (CLI process)", C.fmt(attempts["ours"]["cli"], 1),
                 C.fmt(attempts["ratio"]["cli"])],
                ["harness.solve(replay=...) (library call)", C.fmt(attempts["ours"]["library"], 1),
                 C.fmt(attempts["ratio"]["library"])],
                ["mini-swe-agent: DockerEnvironment start + DefaultAgent.run", C.fmt(m["wall"], 1), "1.00"]]
        out.append("\nThe whole attempt (median s over rounds; ratio: median of the per-round ratios):\n")
        out.append(C.markdown_table(["side", "wall (s)", "ratio to mini-swe-agent"], rows))
        order = ["plan (trajectory read)", "pin environment", "instance image look-up", "sandbox start", "populate",
                 "fold", "runner install", "driver start (to hello)", "steps", "agent loop otherwise", "tree diff",
                 "sandbox removal", "records + replay comparison", "other exec", "other"]
        mini_of = {"sandbox start": m["start_seconds"], "steps": m["exec_seconds"],
                   "agent loop otherwise": m["loop_otherwise"]}
        rows = [[k, C.fmt(p[k], 3), C.fmt(mini_of[k], 3) if k in mini_of else "–"] for k in order]
        paired = [[name, g["n"], C.fmt(g["ours_total"], 1), C.fmt(g["mini_total"], 1),
                   C.fmt(g["median_difference"], 3)] for name, g in attempts["per_step"].items()]
        out.append("\nEach command's execution within the attempts, paired by its place in the trajectory "
                   "(totals: per round, averaged):\n")
        out.append(C.markdown_table(["commands", "pairs", "harness total (s)", "mini-swe-agent total (s)",
                                     "median difference (s)"], paired))
        out.append("\nWhere the time goes (median s):\n")
        out.append(C.markdown_table(["part", "harness (library call)", "mini-swe-agent"], rows))
        out.append(f"\nmini-swe-agent's untimed set-up on our image: {C.fmt(m['setup_seconds'], 2)} s; its container "
                   f"removal (not in its loop): {C.fmt(m['remove_seconds'], 2)} s. Machine CPU busy during the "
                   f"sides (median): {', '.join(f'{k} {v * 100:.0f} %' for k, v in attempts['busy'].items())}.")
        facts = raw_attempts[0]
        out.append(f"\nSame work: harness steps {facts['harness library']['steps']}, exit "
                   f"{facts['harness library']['exit_status']}, same submission "
                   f"{[r['harness library']['same_submission'] for r in raw_attempts]}; mini-swe-agent calls "
                   f"{facts['mini-swe-agent']['calls']}, exit {facts['mini-swe-agent']['exit_status']}, same "
                   f"submission {[r['mini-swe-agent']['same_submission'] for r in raw_attempts]}.")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.render is not None:
        print(render_file(args.render))
        return 0
    machine = C.machine_info()
    args.cache_dir = args.cache_dir.expanduser().resolve()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="harness-bench-agent-"))
    work.mkdir(parents=True, exist_ok=True)
    subject = Subject(args)
    data: dict[str, Any] = {"machine": machine, "command": C.command_line(), "subject": subject.describe(),
                            "final": False}
    out_path = args.out
    steps_summary = attempts_summary = raw_attempts = None
    from harness.engine.sandbox import DockerBackend
    from harness.run.batch import run_scope
    backend = DockerBackend(subject.client, RUN_LABEL, run_dir=run_scope(work))
    try:
        if "steps" in args.parts:
            steps = measure_steps(subject, backend, args.rounds, args.trivial_repeats, work)
            data["steps"] = steps
            steps_summary = data["steps_summary"] = summarise_steps(steps)
            C.write_results("agent_overhead", data, out_path)
        if "attempt" in args.parts:
            raw_attempts = data["attempts"] = measure_attempts(subject, args.attempt_rounds, work)
            attempts_summary = data["attempts_summary"] = summarise_attempts(raw_attempts, *_action_commands(data))
        data["final"] = True
        data["loadavg_at_end"] = os.getloadavg()
        path = C.write_results("agent_overhead", data, out_path)
    finally:
        backend.cleanup_run()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(render(data, steps_summary, attempts_summary))
    print(f"raw data: {path}", file=sys.stderr)
    return 0


def _action_commands(data: dict) -> tuple[list[int], list[str]]:
    """The recorded steps that ran a command, and their commands (read again from the trajectory
    when the raw data predates their being recorded)."""
    from harness.agents.trajectories import load_trajectory
    recorded = load_trajectory(data["subject"]["trajectory"])
    steps = [step for step in recorded.steps if step.action is not None]
    return [step.index for step in steps], [str(step.action) for step in steps]


def render_file(path: Path) -> str:
    """The tables of an earlier run's raw JSON, summarised again by this script."""
    data = json.loads(Path(path).read_text())
    steps = data.get("steps")
    if steps is not None and "commands" not in steps:
        commands = _action_commands(data)[1]
        steps["commands"] = [label.partition(":")[2] if label.startswith("trivial:")
                             else commands[int(label.partition(":")[2]) - 1] for label in steps["sequence"]]
    return render(data, summarise_steps(steps) if steps else None,
                  summarise_attempts(data["attempts"], *_action_commands(data)) if data.get("attempts") else None)


if __name__ == "__main__":
    sys.exit(main())
