"""Predictions: what is graded for each instance.

``--predictions`` takes ``gold`` (each instance's own reference patch), ``empty`` (no
patch) or a file in SWE-bench's predictions format: JSONL, a JSON list, or a JSON
object keyed by instance id, of ``{instance_id, model_name_or_path, model_patch}``.
One model per file. Without an ``attempt`` field, duplicate ids are rejected (every copy:
which one was meant cannot be known); with it, each (id, attempt) pair must be unique
(repeated attempts, see harness.results.stats).

An agent's predictions (``harness solve``) also carry what the attempt spent and how it
ended: ``cost`` (a number >= 0), ``calls``, ``steps`` (integers >= 0), ``agent_seconds``
(a number >= 0) and ``exit_status`` (a short string). Each is optional (absent or null:
unknown); a value of the wrong type refuses the record, naming it and the field, because
a cost or a step count read as "unknown" would silently change the run's cost per
resolved instance and its step percentiles. Everything else is kept in ``extra``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from harness.errors import InputError
from harness.inputs.instances import Instance, read_located_records, record_key, refuse_shared_keys
from harness.paths import instance_dir_problem

GOLD = "gold"
EMPTY = "empty"

#: What an agent's prediction carries beside its patch (see the module docstring); the
#: same names are the fields of :class:`harness.results.report.InstanceResult`.
AGENT_FIELDS = ("cost", "calls", "steps", "agent_seconds", "exit_status")
#: an exit status is a name (Submitted, LimitsExceeded, ...), not a message
MAX_EXIT_STATUS = 200
#: the longest model name, the most attempts, the largest count a record may carry
MAX_MODEL_NAME = 256
MAX_ATTEMPT = 1000
MAX_COUNT = 10 ** 12


@dataclass(frozen=True)
class Prediction:
    """One model patch for one instance. ``model_patch`` None means no patch was produced."""

    instance_id: str
    model_name_or_path: str
    model_patch: str | None
    attempt: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    #: what the attempt spent and how it ended (AGENT_FIELDS); None: not recorded
    cost: float | None = field(default=None, compare=False)
    calls: int | None = field(default=None, compare=False)
    steps: int | None = field(default=None, compare=False)
    agent_seconds: float | None = field(default=None, compare=False)
    exit_status: str | None = field(default=None, compare=False)

    @property
    def is_empty(self) -> bool:
        return not (self.model_patch or "").strip()

    @property
    def key(self) -> str:
        """Unique within a run: the instance id, plus the attempt when there is one."""
        return self.instance_id if self.attempt is None else f"{self.instance_id}/attempt-{self.attempt}"

    def usage(self) -> dict[str, Any]:
        """The agent fields, by name (the keyword arguments of an InstanceResult)."""
        return {name: getattr(self, name) for name in AGENT_FIELDS}

    def checksum(self) -> str:
        """sha256 of the patch text (empty string for no patch). Lone surrogates (a JSON
        file may hold them) are hashed as themselves: the patch is then rejected, not the batch."""
        return hashlib.sha256((self.model_patch or "").encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class LoadedPredictions:
    predictions: list[Prediction]
    errors: list[InputError]
    model_name_or_path: str


def control_predictions(kind: str, instances: Iterable[Instance]) -> LoadedPredictions:
    """The reference-patch (``gold``) or empty-patch (``empty``) control."""
    if kind == GOLD:
        preds = [Prediction(i.instance_id, GOLD, i.patch) for i in instances]
    elif kind == EMPTY:
        preds = [Prediction(i.instance_id, EMPTY, "") for i in instances]
    else:
        raise InputError(f"unknown control {kind!r}: use 'gold', 'empty' or a file path",
                         field="--predictions")
    return LoadedPredictions(preds, [], kind)


def load_predictions(path: Path) -> LoadedPredictions:
    """Load a predictions file. Bad records become errors; the rest is kept. Records that
    share a key (instance id, and attempt when given) are all refused, with one error
    naming each of them (file and line).

    Raises InputError when the file is unreadable or holds more than one model.
    """
    source = str(path)
    parsed: list[tuple[str, Prediction]] = []
    errors: list[InputError] = []
    malformed: list[tuple[str, str]] = []
    for index, (where, raw) in enumerate(read_located_records(Path(path))):
        try:
            parsed.append((where, _parse(raw, f"{source} {where}", index)))
        except InputError as exc:
            errors.append(exc)
            if record_key(raw) is not None:
                malformed.append((where, str(record_key(raw))))
    # a malformed record naming an id another record has refuses them all (which was meant
    # cannot be known): never one graded while the other is counted as an error
    preds, refused, _ = refuse_shared_keys(parsed, lambda pred: pred.key, source, "prediction", malformed,
                                           group=lambda key: key.split("/attempt-")[0])
    shared = {e.record for e in refused}
    errors = [e for e in errors if e.record not in shared] + refused
    models = {pred.model_name_or_path for _, pred in parsed}
    if len(models) > 1:
        raise InputError(f"one model per file, found {sorted(models)}", field="model_name_or_path",
                         source=source)
    return LoadedPredictions(preds, errors, next(iter(models), "unknown"))


def _parse(raw: Any, source: str, index: int) -> Prediction:
    if not isinstance(raw, dict):
        raise InputError(f"is a {type(raw).__name__}, not an object", record=f"#{index}", source=source)
    rid = raw.get("instance_id")
    if not isinstance(rid, str) or not rid:
        raise InputError("missing or not a string", record=f"#{index}", field="instance_id", source=source)
    problem = instance_dir_problem(rid)
    if problem:
        raise InputError(problem, record=rid[:80], field="instance_id", source=source)
    patch = raw.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        raise InputError(f"must be a string or null, got {type(patch).__name__}", record=rid,
                         field="model_patch", source=source)
    model = raw.get("model_name_or_path")
    if not isinstance(model, str) or not model:
        raise InputError("missing or not a string", record=rid, field="model_name_or_path", source=source)
    if len(model) > MAX_MODEL_NAME:
        raise InputError(f"is {len(model)} characters, over {MAX_MODEL_NAME}", record=rid,
                         field="model_name_or_path", source=source)
    attempt = raw.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool)
                                or not 1 <= attempt <= MAX_ATTEMPT):
        raise InputError(f"must be an integer from 1 to {MAX_ATTEMPT}", record=rid, field="attempt", source=source)
    known = {"instance_id", "model_patch", "model_name_or_path", "attempt", *AGENT_FIELDS}
    return Prediction(rid, model, patch, attempt, {k: v for k, v in raw.items() if k not in known},
                      **_agent_fields(raw, rid, source))


def _agent_fields(raw: dict, rid: str, source: str) -> dict[str, Any]:
    """The AGENT_FIELDS of one record, checked (null or absent: None)."""
    def refuse(name: str, expected: str) -> InputError:
        value = raw[name]
        shown = repr(value)[:40] if isinstance(value, (bool, int, float)) else type(value).__name__
        return InputError(f"must be {expected} or null, got {shown}", record=rid, field=name, source=source)

    def number(name: str) -> float | None:
        value = raw.get(name)
        if value is None:
            return None
        try:  # an integer too large for a float is refused like an infinity
            as_float = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        except OverflowError:
            as_float = None
        if as_float is None or not math.isfinite(as_float) or as_float < 0:
            raise refuse(name, "a finite number >= 0")
        return as_float

    def count(name: str) -> int | None:
        value = raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise refuse(name, f"an integer from 0 to {MAX_COUNT}")
        return value

    status = raw.get("exit_status")
    if status is not None and (not isinstance(status, str) or not status.strip()
                               or len(status) > MAX_EXIT_STATUS):
        raise refuse("exit_status", f"a non-empty string of at most {MAX_EXIT_STATUS} characters")
    return {"cost": number("cost"), "calls": count("calls"), "steps": count("steps"),
            "agent_seconds": number("agent_seconds"), "exit_status": status}


def resolve_predictions(spec: str, instances: list[Instance]) -> LoadedPredictions:
    """``gold``/``empty`` or a path, as given to ``--predictions``."""
    if spec in (GOLD, EMPTY):
        return control_predictions(spec, instances)
    path = Path(spec)
    if not path.exists():
        raise InputError("no such file (use 'gold', 'empty' or a predictions file)",
                         source=spec, field="--predictions")
    return load_predictions(path)
