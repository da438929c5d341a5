"""The scaffold seam: what a scaffold is to the harness, what one attempt is given, and
what it leaves (the attempt record, ``agent.json``).

A scaffold is a pinned package (harness.agents.pins) plus a *driver*: a script the harness
runs with the pin's own interpreter (``python -I``), which drives the scaffold through its
own Python API, calls the model itself, and asks the host to run each command in the
working sandbox over the protocol of harness.agents.protocol. The host side of that
protocol is the same for every scaffold (harness.agents.serving); what differs is here::

    class Scaffold(Protocol):
        name: str                                   # "mini-swe-agent"
        driver: Path                                # the script, run as <env>/bin/python -I driver FD
        def default_config(env) -> dict             # the config a run uses without --config
        def attempt_config(config, model, budgets) -> dict   # the flags applied; refuses what
                                                    #   it cannot run here, naming the field
        def effective(config) -> Effective          # model name and parameters, step and cost
                                                    #   limits, template hashes, as the config says
        def partial_trajectory(...) -> dict         # the scaffold's trajectory format, from the
                                                    #   messages seen, when its driver died

mini-swe-agent is the first (harness.agents.scaffolds.mini_swe_agent). A second (SWE-agent,
or a user's own) implements the same protocol with a driver of its own and registers its
adapter in :data:`SCAFFOLDS`.
"""

from __future__ import annotations

import hashlib
import importlib
import re

import yaml
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.agents.budgets import Budgets
from harness.errors import InputError, UnknownNameError

#: Scaffold name -> "module:Class" of its host-side adapter.
SCAFFOLDS: dict[str, str] = {
    "mini-swe-agent": "harness.agents.scaffolds.mini_swe_agent:MiniSweAgent",
}
MODES = ("live", "replay")


@dataclass(frozen=True)
class Effective:
    """What a scaffold config says an attempt runs with."""

    model_name: str
    model_parameters: dict
    step_limit: int | None
    cost_limit: float | None
    template_sha256: dict[str, str]


class Scaffold(Protocol):
    name: str

    @property
    def driver(self) -> Path: ...

    def default_config(self, environment_root: Path) -> dict: ...

    def attempt_config(self, config: dict, model: str | None, budgets: Budgets) -> dict: ...

    def effective(self, config: dict) -> Effective: ...

    def partial_trajectory(self, messages: list, *, instance_id: str, exit_status: str, cost: float, calls: int,
                           version: str, error: str | None) -> dict: ...


def get_scaffold(name: str) -> Scaffold:
    """The adapter of scaffold ``name`` (UnknownNameError naming the known ones)."""
    from harness.errors import lookup
    target = lookup(SCAFFOLDS, name, kind="scaffold", field="--scaffold")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()


@dataclass(frozen=True)
class Given:
    """What the agent is given beside the repository: the problem statement always; the
    instance's hints and the paths the reference patch touches only when asked for."""

    hints: bool = False
    reference_files: bool = False

    @classmethod
    def parse(cls, items: list[str] | tuple[str, ...] = ()) -> "Given":
        unknown = sorted(set(items) - {"hints", "reference-files"})
        if unknown:
            raise UnknownNameError(f"unknown --give {unknown[0]!r}; known: hints, reference-files", field="--give")
        return cls("hints" in items, "reference-files" in items)


def task_text(problem_statement: str, *, hints: str | None = None, reference_files: list[str] | None = None) -> str:
    """The text the agent's ``{{task}}`` is: the problem statement, then what ``--give`` adds."""
    text = problem_statement
    if hints is not None:
        text += f"\n\n<hints>\n{hints.strip()}\n</hints>"
    if reference_files is not None:
        text += "\n\n<files_to_change>\n" + "\n".join(reference_files) + "\n</files_to_change>"
    return text


@dataclass(frozen=True)
class ReplayStep:
    """One recorded model output, fed back in order, with its recorded cost and tokens."""

    content: str
    cost: float = 0.0
    tokens_in: int | None = None
    tokens_out: int | None = None


@dataclass(frozen=True)
class AttemptSpec:
    """Everything one attempt is given (plain data: it crosses the executor seam)."""

    instance_id: str
    attempt: int | None
    task: str
    given: dict
    config: dict
    budgets: Budgets
    #: the scaffold pin's spec (``mini-swe-agent==1.15.0``): which environment runs it
    pin: str = ""
    replay: tuple[ReplayStep, ...] | None = None

    @property
    def mode(self) -> str:
        return "replay" if self.replay is not None else "live"


@dataclass
class StepTiming:
    step: int
    model_seconds: float = 0.0
    exec_seconds: float = 0.0
    returncode: int | None = None
    timed_out: bool = False


@dataclass
class AttemptRecord:
    """One attempt, as ``agent.json`` holds it (:meth:`to_json`); secrets never in it."""

    instance_id: str
    attempt: int | None
    mode: str
    scaffold: dict                      # name, version, config_sha256, template_sha256, environment key
    model: dict                         # name, parameters (scrubbed)
    budgets: dict
    given: dict
    exit_status: str
    limit: str | None = None
    usage: dict = field(default_factory=lambda: {"cost": 0.0, "calls": 0, "tokens_in": 0, "tokens_out": 0})
    steps: int = 0
    wall_seconds: float = 0.0
    step_timings: list[dict] = field(default_factory=list)
    image: dict = field(default_factory=dict)
    prediction: dict | None = None      # sha256, files, binary_files, symlinks; None: no tree was read
    submission_sha256: str | None = None
    submission_equals_prediction: bool | None = None
    error: str | None = None
    #: what decided the attempt (harness.run.solve_plan.inputs_sha256): a re-run keeps a record with the same
    inputs_sha256: str = ""
    node: str = ""
    harness_version: str = ""
    harness_commit: str | None = None
    started_at: str = ""
    finished_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AttemptRecord":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def has_prediction(self) -> bool:
        return self.prediction is not None


@dataclass
class AttemptResult:
    """What a node returns for one attempt: the record and the texts the driver writes."""

    record: AttemptRecord
    trajectory: dict | None = None
    submission: str | None = None
    patch: str | None = None            # the tree diff (the prediction); None: no tree was read
    log: str = ""


def sha256_text(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_INDEX_LINE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: [0-7]+)?$", re.MULTILINE)


def same_diff(a: str | None, b: str | None) -> bool | None:
    """Whether two diffs change the same things as git applies them: equal once the
    ``index`` lines (abbreviated blob ids, longer in a repository with more objects) and
    trailing blank lines are set aside. None when either is missing."""
    if a is None or b is None:
        return None
    return _INDEX_LINE.sub("", a).strip("\n") == _INDEX_LINE.sub("", b).strip("\n")


def load_config(path: Path) -> dict:
    """A scaffold's config file (YAML, or JSON, which YAML reads), read as data (never executed)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the scaffold config: {exc}", source=str(path), field="--config") from None
    if not isinstance(data, dict):
        raise InputError("a scaffold config must be a mapping", source=str(path), field="--config")
    return data
