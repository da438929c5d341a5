"""The host's side of one attempt: start the scaffold's driver, serve it, record what happened.

:func:`run_attempt` starts the driver (``<env>/bin/python -I <driver> FD``) with one end of
a socketpair, answers its requests (harness.agents.protocol) until it says ``done``:

* ``execute``: the command runs in the working sandbox (``Workspace.run``: a fresh shell,
  the scaffold's cwd, env and timeout, the timeout cut to the attempt's remaining wall time);
* ``check``: before each model call, whether the host stops the attempt (wall time spent,
  the run's cost limit reached: harness.agents.budgets);
* ``usage``: after each model call, its cost (charged to the run's ledger), tokens and
  seconds.

Then the prediction is read from the sandbox's tree (``Workspace.diff``: tree truth), and
the scaffold's submission is kept beside it. A driver that breaks the protocol, dies, or
stays silent past the wall-time limit ends its attempt (``ScaffoldError``,
``WallTimeExceeded``) with the trajectory rebuilt from the messages the host saw; the
attempt never raises for the scaffold's faults. Everything returned is scrubbed of secrets
(harness.agents.scrubbing).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from harness.agents import budgets as limits
from harness.agents.protocol import CHECK, DONE, EXECUTE, HELLO, REPLY, START, USAGE, Channel, ProtocolError, expect
from harness.agents.scaffold import AttemptRecord, AttemptResult, AttemptSpec, Scaffold, StepTiming, same_diff, sha256_text
from harness.agents.scrubbing import Scrubber
from harness.errors import InfrastructureError

if TYPE_CHECKING:
    from harness.agents.pins import ScaffoldEnvironment
    from harness.agents.workspace import Workspace

#: How long a driver may take to import its scaffold and say hello.
STARTUP_SECONDS = 180.0
#: Past the wall-time limit, how long a silent driver (a model call that hangs) is waited for.
SILENCE_GRACE_SECONDS = 15.0
#: The driver's own output kept for scaffold.log (its tail).
LOG_LIMIT = 1 << 20
#: The variables the driver is started with in replay: it calls no model, so it gets no secret.
_DRIVER_SETTINGS = {
    "MSWEA_SILENT_STARTUP": "1",           # no banner
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm's bundled prices, no fetch of the cost map
    "LITELLM_LOG": "ERROR",
    "DO_NOT_TRACK": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",                 # no tokenizer download from the Hub
    "TOKENIZERS_PARALLELISM": "false",
    "NO_COLOR": "1",
    "TERM": "dumb",
}


def driver_environment(environ: Mapping[str, str], config_dir: str, *, live: bool) -> dict[str, str]:
    """The driver's environment: the host's (a live model needs its provider's variables
    and proxies), without the harness's and Python's own, plus the settings above and an
    empty global config directory (mini-swe-agent would read a ``.env`` from its own).
    In replay, without any secret-named variable."""
    from harness.agents.scrubbing import NOT_SECRET, SECRET_NAME
    env = {k: v for k, v in environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "HARNESS_", "MSWEA_GLOBAL_CONFIG_DIR"))
           and (live or not (SECRET_NAME.search(k) and not NOT_SECRET.fullmatch(k)))}
    env.update(_DRIVER_SETTINGS)
    env["MSWEA_GLOBAL_CONFIG_DIR"] = config_dir
    return env


@dataclass
class _Attempt:
    """What the host saw of one attempt so far."""

    spec: AttemptSpec
    ledger: limits.Ledger
    clock: limits.AttemptClock
    timings: dict[int, StepTiming] = field(default_factory=dict)
    messages: list = field(default_factory=list)
    cost: float = 0.0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    version: str = ""

    def step(self) -> StepTiming:
        index = max(self.calls, 1)
        return self.timings.setdefault(index, StepTiming(index))


def run_attempt(scaffold: Scaffold, environment: ScaffoldEnvironment, workspace: Workspace, spec: AttemptSpec, *,
                ledger: limits.Ledger, scrubber: Scrubber, environ: Mapping[str, str] | None = None,
                on_process: Any = None) -> AttemptResult:
    """Run one attempt of ``scaffold`` in ``workspace`` (see the module doc).
    ``on_process(proc)``: told the driver's process once started (a deadline kill ends it)."""
    started_at = _now()
    state = _Attempt(spec, ledger, limits.AttemptClock(spec.budgets.wall_seconds_limit))
    effective = scaffold.effective(spec.config)
    done: dict | None = None
    error: str | None = None
    exit_status = limits.SCAFFOLD_ERROR
    with tempfile.TemporaryDirectory(prefix="harness-scaffold-") as config_dir:
        parent, child = socket.socketpair()
        env = driver_environment(os.environ if environ is None else environ, config_dir, live=spec.replay is None)
        proc = subprocess.Popen([str(environment.python), "-I", str(scaffold.driver), str(child.fileno())],
                                pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, cwd=config_dir, start_new_session=True)
        child.close()
        if on_process is not None:
            on_process(proc)
        output = _OutputTail(proc)
        channel = Channel(parent)
        try:
            done = _serve(channel, scaffold, environment, workspace, state)
            exit_status = str(done.get("exit_status") or limits.SCAFFOLD_ERROR)
        except ProtocolError as exc:
            if state.clock.expired():
                exit_status, error = limits.WALL_TIME_EXCEEDED, f"the driver was silent past the wall-time limit: {exc}"
            else:
                exit_status, error = limits.SCAFFOLD_ERROR, f"the scaffold driver failed: {exc}"
        except InfrastructureError as exc:  # the sandbox or its engine failed under the attempt
            exit_status, error = limits.INFRASTRUCTURE_ERROR, f"{type(exc).__name__}: {exc}"
        finally:
            channel.close()
            _end(proc, wait=done is not None)
            output.join()
    log = scrubber.text(output.text())
    if done is None and exit_status == limits.SCAFFOLD_ERROR and log.strip():
        error = f"{error}; its output ends: {log.strip()[-1500:]}"
    try:
        tree = workspace.diff()
    except InfrastructureError as exc:
        tree, error = None, f"{error + '; ' if error else ''}the tree could not be read: {exc}"
    trajectory = done.get("trajectory") if done is not None else None
    if not isinstance(trajectory, dict):
        trajectory = scaffold.partial_trajectory(state.messages, instance_id=spec.instance_id, exit_status=exit_status,
                                                 cost=state.cost, calls=state.calls, version=state.version,
                                                 error=error)
    submission = done.get("submission") if done is not None else None
    submission = submission if isinstance(submission, str) else None
    if done is not None and done.get("error"):
        error = str(done["error"])[-4000:]
    record = AttemptRecord(
        instance_id=spec.instance_id, attempt=spec.attempt, mode=spec.mode,
        scaffold={"name": scaffold.name, "version": state.version or environment.pin.version,
                  "pin": environment.pin.spec, "environment_key": environment.key,
                  "config_sha256": config_sha256(spec.config), "template_sha256": effective.template_sha256},
        model={"name": effective.model_name, "parameters": scrubber.scrub_config(effective.model_parameters)},
        budgets={**spec.budgets.to_json(), "step_limit": effective.step_limit, "cost_limit": effective.cost_limit},
        given=spec.given, exit_status=exit_status,
        limit=limits.limit_hit(exit_status, steps=state.calls, cost=state.cost, step_limit=effective.step_limit,
                               cost_limit=effective.cost_limit),
        usage={"cost": round(state.cost, 8), "calls": state.calls, "tokens_in": state.tokens_in,
               "tokens_out": state.tokens_out},
        steps=state.calls, wall_seconds=round(state.clock.elapsed(), 3),
        step_timings=[t.__dict__ for _, t in sorted(state.timings.items())],
        image={"tag": workspace.image, "id": workspace.image_id,
               # tracked files the image's build changed, folded into the one commit (workspace.FOLD_SCRIPT)
               "folded_into_commit": list(getattr(workspace, "folded", ()))},
        prediction=None if tree is None else {"sha256": tree.sha256, "files": list(tree.files),
                                              "binary_files": list(tree.binary_files), "symlinks": list(tree.symlinks)},
        submission_sha256=sha256_text(submission),
        submission_equals_prediction=same_diff(submission, None if tree is None else tree.patch),
        error=scrubber.text(error) if error else None, started_at=started_at, finished_at=_now())
    return AttemptResult(record, scrubber.data(trajectory), scrubber.text(submission) if submission else submission,
                         None if tree is None else scrubber.text(tree.patch), log)


def config_sha256(config: dict) -> str:
    from harness.hashing import canonical_json
    import hashlib
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def _serve(channel: Channel, scaffold: Scaffold, environment: ScaffoldEnvironment, workspace: Workspace,
           state: _Attempt) -> dict:
    spec = state.spec
    hello = expect(channel.receive(STARTUP_SECONDS), HELLO, "version")
    state.version = str(hello["version"])
    if state.version != environment.pin.version:
        raise ProtocolError(f"the driver runs {scaffold.name} {state.version}, the pin is {environment.pin.version}")
    channel.send({"type": START, "instance_id": spec.instance_id, "task": spec.task, "config": spec.config,
                  "replay": None if spec.replay is None else {"steps": [s.__dict__ for s in spec.replay]}})
    while True:
        left = state.clock.remaining()
        message = channel.receive(None if left is None else max(left, 0) + SILENCE_GRACE_SECONDS)
        try:
            done = _answer(channel, workspace, state, message)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ProtocolError(f"a malformed {str(message.get('type'))[:40]!r} message: {exc}") from None
        if done:
            return message


def _answer(channel: Channel, workspace: Workspace, state: _Attempt, message: dict) -> bool:
    """Answer one request; True when it was ``done``."""
    spec = state.spec
    kind = message["type"]
    if kind == CHECK:
        state.messages += [m for m in message.get("messages") or [] if isinstance(m, dict)]
        stop = limits.host_stop(state.clock, state.ledger, spec.budgets.run_cost_limit)
        channel.send({"type": REPLY, "stop": stop})
    elif kind == USAGE:
        cost = float(message.get("cost") or 0.0)
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"a model call's cost must be a finite number >= 0, got {cost!r}")
        state.cost += cost
        state.calls += 1
        state.tokens_in += int(message.get("tokens_in") or 0)
        state.tokens_out += int(message.get("tokens_out") or 0)
        state.ledger.charge(cost)
        state.step().model_seconds = round(float(message.get("seconds") or 0.0), 3)
        channel.send({"type": REPLY})
    elif kind == EXECUTE:
        channel.send({"type": REPLY, **_execute(workspace, message, state)})
    elif kind == DONE:
        channel.send({"type": REPLY})
        return True
    else:
        raise ProtocolError(f"unknown request {kind[:40]!r}")
    return False


def _execute(workspace: Workspace, message: dict, state: _Attempt) -> dict:
    command = expect(message, EXECUTE, "command")["command"]
    timeout = float(message.get("timeout") or 60)
    left = state.clock.remaining()
    if left is not None:
        timeout = max(1.0, min(timeout, left))
    env = message.get("env") or {}
    try:
        result = workspace.run(str(command), cwd=str(message.get("cwd") or "/testbed"), timeout=timeout,
                               env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None)
    except ValueError as exc:  # no command can have it (a NUL byte, a relative cwd): the scaffold's exception,
        return {"error": str(exc)}  # as its own environment raises one (subprocess refuses it there)
    timing = state.step()
    timing.exec_seconds = round(timing.exec_seconds + result.seconds, 3)
    timing.returncode, timing.timed_out = result.returncode, result.timed_out
    return {"output": result.output, "returncode": result.returncode, "timed_out": result.timed_out,
            "truncated": result.truncated, "seconds": result.seconds}


class _OutputTail:
    """The driver's stdout+stderr, its last LOG_LIMIT bytes, read by a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._chunks = bytearray()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            self._chunks += chunk
            if len(self._chunks) > 2 * LOG_LIMIT:
                del self._chunks[:-LOG_LIMIT]

    def join(self) -> None:
        self._thread.join(timeout=10)

    def text(self) -> str:
        return bytes(self._chunks[-LOG_LIMIT:]).decode("utf-8", "replace")


def _end(proc: subprocess.Popen, *, wait: bool) -> None:
    """Let the driver exit after ``done`` (``wait``); end its process group otherwise."""
    if wait:
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=30)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
