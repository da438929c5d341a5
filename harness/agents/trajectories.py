"""Recorded agent trajectories, read and checked: what a replay feeds back and compares against.

One format is read: mini-swe-agent 1.x's own (``"trajectory_format": "mini-swe-agent-1"``, written by
its ``run/utils/save.py``). A file is ``<instance_id>.traj.json`` or ``<instance_id>.traj.json.gz``::

    {"trajectory_format": "mini-swe-agent-1", "instance_id": ...,
     "info": {"exit_status": "Submitted", "submission": "<diff>", "mini_version": "1.15.0",
              "model_stats": {"instance_cost": 0.71, "api_calls": 57},
              "config": {"agent": {...templates, step_limit, cost_limit}, "model": {...}, "environment": {...}, ...}},
     "messages": [system, user (the instance), then per step: assistant, user...]}

How the messages come to be (mini-swe-agent 1.x ``agents/default.py``): each model call appends one
assistant message; what follows it is one user message: the rendered observation
(``<returncode>N</returncode>`` and the output, in the SWE-bench config), or the format-error message when
the output did not hold exactly one bash block, or the timeout message. When the command's output starts
with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` the rest of it is the submission and becomes the last
message; any other end (``LimitsExceeded``, ...) appends its message last too.

:func:`load_trajectory` refuses anything else with :class:`~harness.errors.InputError` naming the file and
the field; :func:`find_trajectories` finds the files of a directory. :func:`parse_messages` is the same
reading applied to a replay's messages (harness.agents.replay).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.errors import InputError

#: The one format read, and the exit status whose last message is the submission.
TRAJECTORY_FORMAT = "mini-swe-agent-1"
SUBMITTED = "Submitted"
#: Largest trajectory read (bytes, after decompression). The 62 shared ones are at most 2.1 MB (a
#: ``build/`` tree in the submission); a gzip bomb stops here instead of filling memory.
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
SUFFIXES = (".traj.json.gz", ".traj.json")

# Observation kinds (Observation.kind), in the order mini-swe-agent 1.x produces them.
OBSERVATION = "observation"    # the command ran: "<returncode>N</returncode>" and its output
FORMAT_ERROR = "format_error"  # the output held no or several bash blocks: nothing ran
TIMEOUT = "timeout"            # one bash block, but no rendered output: the timeout message
SUBMISSION = "submission"      # the last message of a Submitted run: the submission itself
EXIT = "exit"                  # the last message of any other end (LimitsExceeded, ...)

#: mini-swe-agent 1.x's DefaultAgent.parse_action: exactly one such block is an action.
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"\A<returncode>(-?\d+)</returncode>")


@dataclass(frozen=True)
class Observation:
    """One user message that followed a step's model output."""

    kind: str
    content: str
    #: the rendered return code (kind OBSERVATION); None for every other kind
    returncode: int | None = None


@dataclass(frozen=True)
class RecordedStep:
    """One model call and what answered it."""

    index: int                 # 1-based
    output: str                # the assistant content, exactly as it must be fed back
    action: str | None         # the bash command parsed out of it (None: a format error)
    cost: float | None         # as recorded (extra.cost, else extra.response.usage.cost); None if absent
    observations: tuple[Observation, ...]

    @property
    def returncode(self) -> int | None:
        return next((o.returncode for o in self.observations if o.returncode is not None), None)


@dataclass(frozen=True)
class RecordedTrajectory:
    """A trajectory as recorded. ``config`` is ``info.config`` whole (templates, limits, model, environment)."""

    path: Path
    instance_id: str
    format: str
    scaffold_version: str
    config: Mapping[str, Any] = field(compare=False, repr=False)
    system_message: str = field(repr=False)
    instance_message: str = field(repr=False)
    steps: tuple[RecordedStep, ...] = field(repr=False)
    exit_status: str
    submission: str = field(repr=False)
    instance_cost: float
    api_calls: int
    #: how step_costs were obtained: "recorded" (every step has its cost) or "filled" (see step_costs)
    cost_source: str

    @property
    def outputs(self) -> list[str]:
        """The model outputs in order: what a replay model returns, one per call."""
        return [step.output for step in self.steps]

    @property
    def cost_limit(self) -> float | None:
        """The scaffold's per-attempt cost limit (``config.agent.cost_limit``; None when unset or 0)."""
        agent = self.config.get("agent")
        limit: Any = agent.get("cost_limit") if isinstance(agent, dict) else None
        return float(limit) if _number(limit) and limit > 0 else None

    @property
    def step_costs(self) -> list[float]:
        """One cost per step, whose running sum ends exactly at ``instance_cost``.

        mini-swe-agent stops when ``cost_limit <= model.cost`` before a call, ``model.cost`` being the
        running float sum of the calls' costs; a replay adding these in order reaches the same sums, so a
        cost limit trips at the step where it tripped. Recorded costs are kept. Missing ones (a model
        class that records none) share what the recorded ones leave of ``instance_cost`` equally, except
        that the sum before the last call stays below the cost limit (the recording made that call, so its
        sum was below); the last missing one takes the rest, to the bit.
        """
        return _fill_costs([s.cost for s in self.steps], self.instance_cost, self.cost_limit)


def _running_sum(costs: Sequence[float]) -> float:
    total = 0.0
    for cost in costs:  # in order, as mini-swe-agent's model adds them
        total += cost
    return total


def _fill_costs(costs: Sequence[float | None], total: float, limit: float | None = None) -> list[float]:
    known = math.fsum(c for c in costs if c is not None)
    missing = [i for i, c in enumerate(costs) if c is None]
    share = max(total - known, 0.0) / len(missing) if missing else 0.0
    filled = [share if c is None else c for c in costs]
    if not filled:
        return filled
    before_last = [i for i in missing if i < len(filled) - 1]
    if limit is not None and before_last and missing[-1] == len(filled) - 1 \
            and _running_sum(filled[:-1]) >= limit:
        # even shares would trip the limit a call early: the earlier missing steps share what stays below it
        room = max(limit - math.fsum(c for c in costs[:-1] if c is not None), 0.0)
        for i in before_last:
            filled[i] = room / (len(before_last) + 1)
    if _running_sum(filled) == total:
        return filled
    # the float residue goes to the last missing step (the last step when every cost was recorded),
    # walked one ulp at a time until the running sum is the total exactly
    at = missing[-1] if missing else len(filled) - 1
    filled[at] = max(filled[at] + (total - _running_sum(filled)), 0.0)
    for _ in range(64):
        reached = _running_sum(filled)
        if reached == total:
            break
        filled[at] = max(math.nextafter(filled[at], math.inf if reached < total else -math.inf), 0.0)
    return filled


def _refuse(path: Path | str, message: str, field_name: str | None = None) -> InputError:
    return InputError(message, source=str(path), field=field_name)


def _read_bounded(path: Path) -> bytes:
    """The file's bytes (decompressed for ``.gz``), refused past MAX_TRAJECTORY_BYTES."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                data = handle.read(MAX_TRAJECTORY_BYTES + 1)
        else:
            with path.open("rb") as handle:
                data = handle.read(MAX_TRAJECTORY_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise _refuse(path, f"cannot read the trajectory: {exc}") from None
    if len(data) > MAX_TRAJECTORY_BYTES:
        raise _refuse(path, f"larger than {MAX_TRAJECTORY_BYTES} bytes (decompressed); refused unread")
    return data


def _get(mapping: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: Path, name: str) -> Any:
    if key not in mapping:
        raise _refuse(path, "missing", name)
    value = mapping[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise _refuse(path, f"expected {expected}, found {type(value).__name__}", name)
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _content(message: Mapping[str, Any], source: str, name: str) -> str:
    """A message's text: a string, or a list of text blocks (a cache-control form) joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                         and isinstance(b.get("text"), str) for b in content):
        return "".join(b["text"] for b in content)
    raise _refuse(source, f"expected text content, found {type(content).__name__}", f"{name}.content")


def _step_cost(message: Mapping[str, Any], source: str, name: str) -> float | None:
    extra = message.get("extra")
    if not isinstance(extra, dict):
        return None
    cost = extra.get("cost")  # what mini-swe-agent's portkey model adds to its running total
    where = "extra.cost"
    if cost is None:  # the openrouter model keeps the provider's figure in the raw response
        response = extra.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        cost = usage.get("cost") if isinstance(usage, dict) else None
        where = "extra.response.usage.cost"
    if cost is None:
        return None
    if not _number(cost):
        raise _refuse(source, f"a cost must be a finite number >= 0, found {cost!r}", f"{name}.{where}")
    return float(cost)


def _classify(content: str, output: str, *, last: bool, exit_status: str | None, submission: str | None) -> str:
    if last and exit_status == SUBMITTED and (submission is None or content == submission):
        return SUBMISSION
    if _RETURNCODE.match(content):
        return OBSERVATION
    if last and exit_status is not None and exit_status != SUBMITTED:
        return EXIT
    return FORMAT_ERROR if len(_ACTION.findall(output)) != 1 else TIMEOUT


def parse_messages(messages: Any, *, source: str, exit_status: str | None = None,
                   submission: str | None = None) -> tuple[str, str, tuple[RecordedStep, ...]]:
    """(system message, instance message, steps) of a mini-swe-agent 1.x message list.

    ``exit_status`` and ``submission`` say what the last message is (SUBMISSION when the run was
    Submitted, EXIT otherwise); without them (a replay still being judged) a last message that is no
    rendered observation is a SUBMISSION when it equals ``submission``.
    """
    if not isinstance(messages, list) or len(messages) < 2:
        raise _refuse(source, "expected a list of at least the system and instance messages", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            role = message.get("role") if isinstance(message, dict) else type(message).__name__
            raise _refuse(source, f"not a system/user/assistant message: {role!r}", f"messages[{i}].role")
    if messages[0]["role"] != "system" or messages[1]["role"] != "user":
        raise _refuse(source, "the first two messages must be the system and the instance (user) message",
                      "messages[0].role")
    system = _content(messages[0], source, "messages[0]")
    instance = _content(messages[1], source, "messages[1]")
    groups: list[tuple[int, list[int]]] = []
    for i in range(2, len(messages)):
        role = messages[i]["role"]
        if role == "assistant":
            if groups and not groups[-1][1]:
                raise _refuse(source, "an assistant message follows another with no observation between",
                              f"messages[{i}].role")
            groups.append((i, []))
        elif role == "user" and groups:
            groups[-1][1].append(i)
        else:
            raise _refuse(source, f"a {role} message where a model output must come", f"messages[{i}].role")
    if exit_status is None and submission is not None and messages[-1]["role"] == "user":
        tail = _content(messages[-1], source, f"messages[{len(messages) - 1}]")
        exit_status = SUBMITTED if tail == submission and not _RETURNCODE.match(tail) else None
    steps = []
    for number, (at, following) in enumerate(groups, start=1):
        output = _content(messages[at], source, f"messages[{at}]")
        actions = _ACTION.findall(output)
        observations = []
        for j in following:
            content = _content(messages[j], source, f"messages[{j}]")
            kind = _classify(content, output, last=j == len(messages) - 1, exit_status=exit_status,
                             submission=submission)
            code = _RETURNCODE.match(content) if kind == OBSERVATION else None
            observations.append(Observation(kind, content, int(code.group(1)) if code else None))
        steps.append(RecordedStep(number, output, actions[0].strip() if len(actions) == 1 else None,
                                  _step_cost(messages[at], source, f"messages[{at}]"), tuple(observations)))
    return system, instance, tuple(steps)


def _instance_id_of(path: Path) -> str:
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    raise _refuse(path, f"not a trajectory file name (expected <instance_id>{' or '.join(SUFFIXES)})")


def load_trajectory(path: Path | str) -> RecordedTrajectory:
    """Read one ``<instance_id>.traj.json[.gz]`` file (mini-swe-agent-1 format), checked whole."""
    path = Path(path)
    named_id = _instance_id_of(path)
    try:
        data = json.loads(_read_bounded(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _refuse(path, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _refuse(path, f"expected a JSON object, found {type(data).__name__}")
    fmt = _get(data, "trajectory_format", str, path, "trajectory_format")
    if fmt != TRAJECTORY_FORMAT:
        raise _refuse(path, f"unsupported trajectory format {fmt!r} (read: {TRAJECTORY_FORMAT!r})",
                      "trajectory_format")
    instance_id = data.get("instance_id", named_id)
    if instance_id != named_id:
        raise _refuse(path, f"{instance_id!r} is not the file name's {named_id!r}", "instance_id")
    info = _get(data, "info", dict, path, "info")
    version = _get(info, "mini_version", str, path, "info.mini_version")
    config = _get(info, "config", dict, path, "info.config")
    exit_status = _get(info, "exit_status", str, path, "info.exit_status")
    submission = _get(info, "submission", str, path, "info.submission")
    stats = _get(info, "model_stats", dict, path, "info.model_stats")
    instance_cost = _get(stats, "instance_cost", (int, float), path, "info.model_stats.instance_cost")
    api_calls = _get(stats, "api_calls", int, path, "info.model_stats.api_calls")
    if not _number(instance_cost):
        raise _refuse(path, f"expected a finite cost >= 0, found {instance_cost!r}",
                      "info.model_stats.instance_cost")
    system, instance, steps = parse_messages(data.get("messages"), source=str(path), exit_status=exit_status,
                                             submission=submission)
    if api_calls != len(steps):
        # a replay model answers one call per step; a step limit would trip elsewhere
        raise _refuse(path, f"{api_calls} model calls recorded for {len(steps)} model outputs",
                      "info.model_stats.api_calls")
    if exit_status == SUBMITTED and not (steps and steps[-1].observations
                                         and steps[-1].observations[-1].kind == SUBMISSION):
        raise _refuse(path, "exit status Submitted, but the last message is not the submission",
                      "info.submission")
    costs = [s.cost for s in steps]
    known = math.fsum(c for c in costs if c is not None)
    tolerance = 1e-9 * max(1.0, float(instance_cost))
    if known > instance_cost + tolerance or (None not in costs and abs(known - instance_cost) > tolerance):
        # which figure a cost limit followed cannot be told, so neither is trusted
        raise _refuse(path, f"the steps' recorded costs sum to {known!r}, the total is {instance_cost!r}",
                      "info.model_stats.instance_cost")
    return RecordedTrajectory(
        path=path, instance_id=instance_id, format=fmt, scaffold_version=version, config=config,
        system_message=system, instance_message=instance, steps=steps, exit_status=exit_status,
        submission=submission, instance_cost=float(instance_cost), api_calls=api_calls,
        cost_source="filled" if None in costs else "recorded")


def find_trajectories(directory: Path | str) -> dict[str, Path]:
    """``{instance_id: path}`` of the trajectory files of ``directory``.

    Accepted: ``<id>.traj.json[.gz]`` directly in it, and ``<id>/<id>.traj.json[.gz]`` (mini-swe-agent's
    own output layout). Refused: one id found twice (whatever the two forms), a ``<dir>/<x>.traj.json``
    whose folder is not ``<x>``, and a directory holding none. Other files are not read.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise _refuse(directory, "not a directory of trajectories")
    found: dict[str, Path] = {}
    candidates = [p for p in sorted(directory.iterdir()) if p.is_file()]
    for sub in sorted(p for p in directory.iterdir() if p.is_dir()):
        candidates += [p for p in sorted(sub.iterdir()) if p.is_file()]
    for path in candidates:
        if not path.name.endswith(SUFFIXES):
            continue
        instance_id = _instance_id_of(path)
        if path.parent != directory and path.parent.name != instance_id:
            raise _refuse(path, f"a trajectory of {instance_id!r} in a folder named {path.parent.name!r} "
                                "(expected <id>/<id>.traj.json[.gz])")
        if instance_id in found:
            raise _refuse(path, f"a second trajectory of {instance_id!r} (the first: {found[instance_id]})",
                          "instance_id")
        found[instance_id] = path
    if not found:
        raise _refuse(directory, f"holds no <instance_id>{' or '.join(SUFFIXES)} file")
    return found
