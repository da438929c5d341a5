"""An agent run as a library call: :func:`solve` (``harness solve`` maps its flags onto it).

    import harness
    result = harness.solve("instances/demo/instances.jsonl", model="openai/gpt-4o-mini",
                           budgets=harness.Budgets(step_limit=30, cost_limit=1.0), grade=True)
    result.solve["totals"]["cost"], result.graded.summary["resolved_ids"]

    harness.solve(instances, replay="trajs/")      # recorded trajectories re-executed offline

For each instance (and each of ``attempts``), a pinned scaffold (harness.agents.pins) runs in
a working sandbox started from the instance's image, until it submits or exhausts its budget
(harness.agents.budgets); the sandbox tree's diff is its prediction. The run directory
(harness.paths) gets, per attempt, ``agent.json``, the trajectory, the prediction and the
submission (and ``replay.json`` in a replay), then ``predictions.jsonl`` (SWE-bench's format,
one line per attempt) and ``solve.json`` (scaffold, model, budgets, what the agent was given,
totals). ``grade=True`` then grades the predictions into the same directory with
:func:`harness.evaluate`, so each ``report.json`` sits beside its ``agent.json``.

Attempts run on the same executors as grading (local threads or Ray tasks). A re-run of the
same run id keeps complete attempts decided by the same inputs and runs the rest; an attempt
whose sandbox could not be had (``InfrastructureError``) is run again. API keys are read from
the environment by the scaffold's driver and scrubbed from everything written.
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from harness.agents.budgets import Budgets
from harness.agents.pins import DEFAULT_PIN
from harness.errors import InputError
from harness.run.session import DEFAULT_OUTPUT_DIR, InstancesInput, PathLike, Repositories
from harness.run.solve_records import SolveResult

if TYPE_CHECKING:
    from harness.run.solve_records import SolveProgress

__all__ = ["Budgets", "SolveResult", "solve"]


#: the defaults: no limit beyond the scaffold config's own; repositories found as grading finds them
NO_BUDGETS = Budgets()
DEFAULT_REPOSITORIES = Repositories()


def solve(instances: InstancesInput, *, model: str | None = None, config: PathLike | None = None,
          replay: PathLike | None = None, scaffold: str = DEFAULT_PIN, scaffold_with: Sequence[str] = (),
          attempts: int = 1, budgets: Budgets = NO_BUDGETS, give: Sequence[str] = (),
          instance_ids: Sequence[str] | None = None, specs: Sequence[PathLike] = (),
          repositories: Repositories = DEFAULT_REPOSITORIES, executor: str = "local", max_workers: int = 1,
          ray_address: str | None = None, task_timeout: float = 7200.0, cpus: float | None = None,
          run_id: str | None = None, output_dir: PathLike = DEFAULT_OUTPUT_DIR, cache_dir: PathLike | None = None,
          force: bool = False, grade: bool = False, grade_timeout: int | None = None,
          grading: Mapping[str, Any] | None = None, registry: str | None = None,
          on_start: Callable[[int], None] | None = None, on_progress: Callable[[SolveProgress], None] | None = None,
          quiet: bool = False, verbose: bool = False) -> SolveResult:
    """Run (``model``) or replay (``replay``: a directory of ``<instance_id>.traj.json[.gz]``)
    a pinned scaffold on ``instances`` and write ``output_dir/run_id`` (see the module doc).

    ``config``: the scaffold's own config file (default: the one the pin ships);
    ``scaffold``: the pin (``mini-swe-agent==1.15.0``), ``scaffold_with``: exact versions it is
    installed with; ``budgets``: the limits; ``give``: ``"hints"``, ``"reference-files"``.
    ``grade``: grade the predictions into the same directory (``grade_timeout``: the test
    run's; ``grading``: more keyword arguments of :func:`harness.evaluate`).
    Raises InputError for input refused before anything runs.
    """
    from harness.agents.scaffold import Given, get_scaffold
    from harness.inputs.instances import load_instances
    from harness.locks import run_directory_lock
    from harness.paths import RunPaths, cache_root
    from harness.run.session import _instances_file, _slug

    if replay is not None and (model is not None or config is not None):
        raise InputError("--replay feeds back the recorded model and config: --model and --config do not apply",
                         field="--replay")
    if replay is not None and (attempts != 1 or give):
        raise InputError("--replay re-executes one recorded attempt as it was given: --attempts and --give do "
                         "not apply", field="--replay")
    if replay is None and model is None and config is None:
        raise InputError("say what to run: --model NAME (with --config FILE) for a live run, or --replay DIR",
                         field="--model")
    if not 1 <= attempts <= 100:
        raise InputError(f"--attempts must be 1..100, got {attempts}", field="--attempts")
    given = Given.parse(list(give))
    cache = Path(cache_dir).expanduser().resolve() if cache_dir is not None else cache_root()
    instances_path = _instances_file(instances, cache)
    loaded = load_instances(instances_path, instance_ids)
    for error in loaded.errors:
        print(f"harness: skipped: {error}", file=sys.stderr)
    adapter_name = _scaffold_name(scaffold)
    adapter = get_scaffold(adapter_name)
    in_file = None
    if replay is not None and instance_ids:  # a selection: trajectories of the others are not orphans
        in_file = {i.instance_id for i in load_instances(instances_path).instances}
    plan, environments = _plan(loaded.instances, adapter, model, config, replay, scaffold, scaffold_with, budgets,
                               attempts, given, cache, in_file)
    label = model or ("replay" if replay is not None else "solve")
    run_id = run_id or f"solve-{_slug(label)}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    paths = RunPaths.create(Path(output_dir), run_id)
    repositories = Repositories(Path(repositories.repos_dir).expanduser() if repositories.repos_dir else None,
                                {n: Path(p) for n, p in repositories.overrides.items()}, repositories.clone)
    from harness.run.solve_session import SolveSession
    session = SolveSession(paths=paths, run_id=run_id, cache_dir=cache, plan=plan, environments=environments,
                           adapter=adapter, budgets=budgets, executor=executor, max_workers=max_workers,
                           ray_address=ray_address, task_timeout=task_timeout, cpus=cpus, registry=registry,
                           specs=tuple(Path(s) for s in specs), repositories=repositories, force=force,
                           mode="replay" if replay is not None else "live", instances_path=instances_path,
                           input_errors=[str(e) for e in loaded.errors], on_start=on_start,
                           on_progress=on_progress, quiet=quiet, verbose=verbose,
                           source=str(Path(replay).expanduser().resolve()) if replay is not None else None)
    with run_directory_lock(paths.root):
        result = session.run()
    if grade and result.solve["predictions"]["count"]:
        from harness.run.session import RunLimits, evaluate
        attempted = sorted({task.instance.instance_id for task in plan.tasks})
        graded = evaluate(instances_path, str(paths.predictions), instance_ids=attempted, specs=specs,
                          repositories=repositories,
                          executor="local" if executor == "local" else "ray", max_workers=max_workers,
                          ray_address=ray_address, limits=RunLimits(timeout=grade_timeout, task_timeout=task_timeout,
                                                                    cpus=cpus),
                          run_id=run_id, output_dir=paths.root.parent, cache_dir=cache, registry=registry,
                          quiet=quiet, verbose=verbose, **dict(grading or {}))
        result = replace(result, graded=graded)
    return result


def _scaffold_name(pin_text: str) -> str:
    from harness.agents.pins import DEFAULT_SCAFFOLD
    name = str(pin_text).partition("==")[0].strip()
    return name if "==" in str(pin_text) else DEFAULT_SCAFFOLD


def _plan(instances, adapter, model, config, replay, scaffold, scaffold_with, budgets, attempts, given, cache,
          in_file=None):
    """The plan, and the environment of every pin it uses (installed here first: a pin
    that cannot be installed is refused before any sandbox starts)."""
    from harness.agents.pins import ensure_environment, parse_pin
    from harness.run.solve_plan import plan_live, plan_replay
    if replay is not None:
        directory = Path(replay).expanduser().resolve()
        if not directory.is_dir():
            raise InputError("not a directory of trajectories", source=str(directory), field="--replay")
        plan = plan_replay(instances, directory, adapter, budgets, scaffold_with, in_file)
        environments = {spec: ensure_environment(pin, cache) for spec, pin in plan.pins.items()}
        return plan, environments
    from harness.agents.scaffold import load_config
    pin = parse_pin(scaffold, list(scaffold_with))
    environment = ensure_environment(pin, cache)
    raw = load_config(Path(config).expanduser()) if config is not None else adapter.default_config(environment.root)
    effective_config = adapter.attempt_config(raw, model, budgets)
    if not adapter.effective(effective_config).model_name:
        raise InputError("no model: pass --model NAME (or set model.model_name in --config)", field="--model")
    plan = plan_live(instances, adapter, pin, effective_config, budgets, attempts, given.hints, given.reference_files)
    return plan, {pin.spec: environment}

