"""The driver of an agent run (harness.run.solve): attempts out to an executor, their files
written as they come back, then ``predictions.jsonl`` and ``solve.json``.

It holds the run directory's lock (taken by :func:`harness.run.solve.solve`), keeps complete
earlier attempts decided by the same inputs (``force`` re-runs them), seeds the run's cost
ledger with what those spent, and hands the executor one request per remaining attempt:
locally the attempts run in this process's threads against this machine's engine, on Ray as
tasks on any node with an engine (the ledger then a shared actor).
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections import Counter
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.agents.budgets import Budgets, RunCostLedger
from harness.agents.node import AttemptRequest, SolveSettings
from harness.agents.scaffold import AttemptRecord
from harness.agents.scrubbing import Scrubber
from harness.paths import RunPaths
from harness.run.solve_plan import Plan, inputs_sha256
from harness.run.solve_records import (AttemptWriter, SolveResult, SolveSetup, complete_earlier, load_record, prediction_lines,
                                       totals, write_predictions)


@dataclass
class SolveSession:
    paths: RunPaths
    run_id: str
    cache_dir: Path
    plan: Plan
    environments: dict
    adapter: Any
    budgets: Budgets
    executor: str
    max_workers: int
    ray_address: str | None
    task_timeout: float
    cpus: float | None
    registry: str | None
    specs: tuple[Path, ...]
    repositories: Any
    force: bool
    mode: str
    instances_path: Path
    input_errors: list[str] = field(default_factory=list)
    on_start: Callable[[int], None] | None = None
    on_progress: Callable[[Any], None] | None = None
    quiet: bool = False
    verbose: bool = False
    source: str | None = None

    def run(self):
        import os
        from harness import logs
        from harness.atomic import write_json_atomic
        started_at = _now()
        logs.configure(self.paths.log, quiet=self.quiet, verbose=self.verbose)
        log = logs.get_logger(run_id=self.run_id)
        self._name_the_gaps(log)
        scrubber = Scrubber.from_environment(os.environ, [c for c in self.plan.configs.values()])
        inputs = {task.key: inputs_sha256(task) for task in self.plan.tasks}
        todo, kept = [], []
        for task in self.plan.tasks:
            files = self.paths.instance(task.instance.instance_id, task.spec.attempt)
            earlier = None if self.force else complete_earlier(files, inputs[task.key])
            (kept if earlier is not None else todo).append(earlier or task)
        spent = sum(float(r.usage.get("cost") or 0.0) for r in kept)
        writer = AttemptWriter(self.paths, scrubber, len(todo), inputs, self.plan.recorded, self.on_progress)
        if self.on_start is not None:
            self.on_start(len(todo))
        setup, executor = self._setup(spent)
        log.info("solve.start", attempts=len(todo), kept=len(kept), mode=self.mode)
        if todo:
            leftovers = executor.cleanup(setup)
            if leftovers:
                log.warning("run.cleaned_leftovers", containers=leftovers)
            try:
                executor.run(setup, (AttemptRequest(task, secrets.token_hex(8)) for task in todo), writer)
            finally:
                executor.cleanup(setup)
        records = [r for task in self.plan.tasks
                   for r in [load_record(self.paths.instance(task.instance.instance_id, task.spec.attempt))]
                   if r is not None]
        run_model = self.run_model_name(records)
        lines, without = prediction_lines(self.paths, self.plan.tasks, lambda _record: run_model)
        write_predictions(self.paths.predictions, lines, scrubber)
        incomplete = [r.instance_id + (f"#{r.attempt}" if r.attempt is not None else "") for r in records
                      if r.exit_status == "InfrastructureError"]
        solve = scrubber.data(self._record(records, lines, without, kept, incomplete, started_at, scrubber,
                                           executor))
        write_json_atomic(self.paths.solve_record, solve)
        return SolveResult(self.run_id, solve, records, self.paths, incomplete=incomplete)

    # ------------------------------------------------------------------ parts
    def _name_the_gaps(self, log) -> None:
        """What the run will not attempt, said on stderr and in the log (and in solve.json)."""
        plan = self.plan
        for instance_id in plan.without_trajectory:
            print(f"harness: no trajectory for {instance_id} in {self.source}: not replayed", file=sys.stderr)
        for instance_id in plan.trajectories_without_instance:
            print(f"harness: the trajectory of {instance_id} has no instance in {self.instances_path}: not "
                  "replayed", file=sys.stderr)
        for why in plan.refused.values():
            print(f"harness: refused: {why}", file=sys.stderr)
        log.info("solve.plan", without_trajectory=plan.without_trajectory,
                 trajectories_without_instance=plan.trajectories_without_instance, refused=sorted(plan.refused))

    def _setup(self, spent: float):
        from harness.buildinfo import build_info
        from harness._version import __version__
        from harness.engine.sandbox import Limits
        from harness.evaluation.tasks import RunConfig
        from harness.inputs.repos import RepoResolver
        from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
        from harness.run.batch import run_scope
        from harness.run.executors import make_executor
        config = RunConfig(run_id=self.run_id, output_dir=self.paths.root.parent, cache_dir=self.cache_dir,
                           max_workers=self.max_workers, task_timeout=self.task_timeout, registry=self.registry,
                           limits=Limits(cpus=self.cpus))
        executor = make_executor(self.executor, self.max_workers, address=self.ray_address)
        limit = self.budgets.run_cost_limit
        ledger: Any
        if self.executor == "ray":
            from harness.run.executors.ray import shared_object
            executor.connect()
            ledger = shared_object(RunCostLedger, limit, spent)
        else:
            ledger = RunCostLedger(limit, spent)
        settings = SolveSettings(self.adapter.name, dict(self.plan.pins), ledger, __version__, build_info().commit)
        specs = SpecRegistry.load(DEFAULT_SPECS_DIR, *self.specs)
        repos = self.repositories
        resolver = RepoResolver(self.cache_dir, repos.repos_dir, repos.overrides, allow_clone=repos.clone)
        setup = SolveSetup(config, run_scope(self.paths.root), specs=specs, repos=resolver,
                           harness_version=__version__, harness_commit=build_info().commit, settings=settings)
        if self.executor == "local":
            from harness.agents.node import AttemptEvaluator
            from harness.engine.client import connect
            from harness.preparation.preparer import Preparer
            client = connect()
            preparer = Preparer(client, specs, resolver, self.cache_dir)
            if self.registry:
                preparer.images.use_registry(self.registry)
            setup.bind(AttemptEvaluator(config, client, preparer, settings, scope=setup.scope))  # type: ignore[arg-type]
        return setup, executor

    def model_name_or_path(self, record: AttemptRecord) -> str:
        """``<scaffold>-<version>__<model>``, as SWE-bench's bash-only entries name theirs."""
        return f"{record.scaffold.get('name')}-{record.scaffold.get('version')}__{record.model.get('name')}"

    def run_model_name(self, records: list[AttemptRecord]) -> str:
        """The one name predictions.jsonl gives every line (:func:`run_model_name`), the
        other recorded names said on stderr."""
        names = Counter(self.model_name_or_path(r) for r in records)
        chosen = run_model_name(names)
        if len(names) > 1 and not self.quiet:
            others = ", ".join(f"{name} ({count})" for name, count in sorted(names.items()) if name != chosen)
            print(f"harness: predictions.jsonl names the model {chosen}; attempts recorded under other names: "
                  f"{others} (each attempt's own is in its agent.json)", file=sys.stderr)
        return chosen

    def _record(self, records: list[AttemptRecord], lines: list[dict], without: list[str], kept: list,
                incomplete: list[str], started_at: str, scrubber: Scrubber, executor) -> dict:
        from harness._version import __version__
        from harness.buildinfo import build_info
        from harness.hashing import file_sha256
        from harness.agents.serving import config_sha256
        configs = {config_sha256(c): scrubber.scrub_config(c) for c in self.plan.configs.values()}
        first = next(iter(self.plan.configs.values()), {})
        effective = self.adapter.effective(first) if first else None
        by_instance: dict[str, list] = {}
        for r in records:
            by_instance.setdefault(r.instance_id, []).append(
                {"attempt": r.attempt, "exit_status": r.exit_status, "limit": r.limit, "steps": r.steps,
                 "cost": r.usage.get("cost"), "wall_seconds": r.wall_seconds})
        attempts = max((t.spec.attempt or 1 for t in self.plan.tasks), default=1)
        return {
            "run_id": self.run_id, "mode": self.mode,
            "scaffold": {"name": self.adapter.name,
                         "pins": {spec: env.to_json() for spec, env in self.environments.items()},
                         "config": configs[config_sha256(first)] if first else None,
                         "config_sha256": config_sha256(first) if first else None,
                         "configs": configs if len(configs) > 1 else None,
                         "template_sha256": effective.template_sha256 if effective else None},
            "model": {"name": effective.model_name if effective else None,
                      "parameters": scrubber.scrub_config(effective.model_parameters) if effective else None},
            "budgets": {**self.budgets.to_json(),
                        "step_limit": effective.step_limit if effective else self.budgets.step_limit,
                        "cost_limit": effective.cost_limit if effective else self.budgets.cost_limit},
            "given": self.plan.tasks[0].spec.given if self.plan.tasks else None,
            "attempts_per_instance": attempts,
            "instances": {"file": str(self.instances_path), "sha256": file_sha256(self.instances_path),
                          "attempted": sorted(by_instance), "input_errors": self.input_errors,
                          "without_trajectory": self.plan.without_trajectory,
                          "trajectories_without_instance": self.plan.trajectories_without_instance,
                          "refused": self.plan.refused, "replay_source": self.source},
            "attempts": by_instance,
            "totals": totals(records),
            "predictions": {"file": str(self.paths.predictions), "count": len(lines),
                            "model_name_or_path": lines[0]["model_name_or_path"] if lines else None,
                            "model_names": dict(sorted(Counter(self.model_name_or_path(r) for r in records).items())),
                            "attempts_without_prediction": without},
            "kept_from_earlier": len(kept), "incomplete": incomplete,
            "executor": {"name": self.executor, "max_workers": self.max_workers},
            "secrets_redacted": scrubber.names,
            "harness_version": __version__, "harness_commit": build_info().commit,
            "started_at": started_at, "finished_at": _now(),
        }


def run_model_name(names: "Counter[str]") -> str:
    """The run's model name from its attempts' (a predictions file holds one model). A
    replay's trajectories can name one model through different routes (the shared run's are
    ``google/...`` through OpenRouter and ``@google/...`` through Portkey): the most common
    name, the first in order on a tie; each attempt's own stays in its agent.json and
    solve.json counts them (``predictions.model_names``). No attempt: no line to name, "". """
    if not names:
        return ""
    return sorted(names.items(), key=lambda item: (-item[1], item[0]))[0][0]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
