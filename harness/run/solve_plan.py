"""What an agent run will do, decided before anything runs: one attempt spec per instance
and attempt, from a live configuration or from recorded trajectories (replay).

Live: the pinned scaffold's config (``--config``, or the one the pin ships), the model,
the budgets and what the agent is given, the same for every attempt. Replay: each
instance's recorded trajectory gives its pin (its scaffold version), its whole config and
its model outputs with their costs; an instance without a trajectory and a trajectory
without an instance are both named, never dropped (:class:`Plan`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from harness.agents.budgets import Budgets
from harness.agents.node import AttemptTask
from harness.agents.pins import ScaffoldPin, parse_pin
from harness.agents.scaffold import AttemptSpec, ReplayStep, Scaffold, task_text
from harness.errors import InputError
from harness.inputs.instances import Instance


@dataclass
class Plan:
    tasks: list[AttemptTask]
    #: pin spec -> pin: every scaffold version the run uses
    pins: dict[str, ScaffoldPin]
    #: instance id -> the config its attempts run with (live: one for all)
    configs: dict[str, dict] = field(default_factory=dict)
    #: replay: instances of the set with no trajectory, and trajectories of no instance of the set
    without_trajectory: list[str] = field(default_factory=list)
    trajectories_without_instance: list[str] = field(default_factory=list)
    #: trajectory files (or instances) refused, with why
    refused: dict[str, str] = field(default_factory=dict)
    #: replay: instance id -> the recorded trajectory (harness.agents.trajectories.RecordedTrajectory)
    recorded: dict = field(default_factory=dict)


def given_for(instance: Instance, hints: bool, reference_files: bool) -> tuple[str, dict]:
    """The task text and what the record says was given."""
    from harness.patches import patch_files
    hint_text = str(instance.extra.get("hints_text") or "") if hints else None
    files = sorted(patch_files(instance.patch).all) if reference_files else None
    given = {"problem_statement": True, "hints": hints, "reference_files": files if files is not None else False}
    return task_text(instance.problem_statement, hints=hint_text, reference_files=files), given


def plan_live(instances: Sequence[Instance], scaffold: Scaffold, pin: ScaffoldPin, config: dict, budgets: Budgets,
              attempts: int, hints: bool, reference_files: bool) -> Plan:
    tasks = []
    for instance in instances:
        task, given = given_for(instance, hints, reference_files)
        for n in range(1, attempts + 1):
            spec = AttemptSpec(instance.instance_id, n if attempts > 1 else None, task, given, config, budgets,
                               pin=pin.spec)
            tasks.append(AttemptTask(instance, spec))
    return Plan(tasks, {pin.spec: pin}, {i.instance_id: config for i in instances})


def plan_replay(instances: Sequence[Instance], directory: Path, scaffold: Scaffold, budgets: Budgets,
                scaffold_with: Sequence[str] = (), in_file: set[str] | None = None) -> Plan:
    """One replay attempt per instance that has a trajectory under ``directory``.
    ``in_file``: every id of the instance file, when ``instances`` is a selection of it (a
    trajectory of an instance left out of the selection is not one without an instance)."""
    from harness.agents.trajectories import find_trajectories, load_trajectory
    found = find_trajectories(directory)
    chosen = {i.instance_id for i in instances}
    known = chosen | (in_file or set())
    plan = Plan([], {}, without_trajectory=sorted(chosen - set(found)),
                trajectories_without_instance=sorted(set(found) - known))
    for instance in instances:
        path = found.get(instance.instance_id)
        if path is None:
            continue
        try:
            recorded = load_trajectory(path)
            pin = parse_pin(f"{scaffold.name}=={recorded.scaffold_version}", list(scaffold_with))
            config = scaffold.attempt_config(recorded_config(recorded.config), None, budgets)
        except InputError as exc:
            plan.refused[instance.instance_id] = str(exc)
            continue
        steps = tuple(ReplayStep(output, cost) for output, cost in zip(recorded.outputs, recorded.step_costs))
        task, given = given_for(instance, False, False)
        spec = AttemptSpec(instance.instance_id, None, task, given, config, budgets, pin=pin.spec, replay=steps)
        plan.tasks.append(AttemptTask(instance, spec))
        plan.pins[pin.spec] = pin
        plan.configs[instance.instance_id] = config
        plan.recorded[instance.instance_id] = recorded
    return plan


def recorded_config(config) -> dict:
    """A recorded ``info.config`` as a config to run: its sections, without the class names
    save_traj adds (``agent_type``, ``model_type``, ``environment_type``: the recording's
    classes, which the harness replaces)."""
    return {k: json.loads(json.dumps(v)) for k, v in dict(config).items() if not str(k).endswith("_type")}


def inputs_sha256(task: AttemptTask) -> str:
    """What decides an attempt (a complete earlier one with the same is kept on a re-run):
    the instance record, the spec (task, config, budgets, pin, replayed outputs)."""
    spec = task.spec
    data = {"instance": task.instance.checksum(), "task": spec.task, "given": spec.given, "config": spec.config,
            "budgets": spec.budgets.to_json(), "pin": spec.pin, "attempt": spec.attempt,
            "replay": None if spec.replay is None else [s.__dict__ for s in spec.replay]}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
