"""Drive mini-swe-agent (1.x) for one attempt, inside the scaffold's own virtualenv.

Run by the harness as ``<env>/bin/python -I mini_swe_agent_driver.py FD`` (never imported
by the harness; it imports only mini-swe-agent and the standard library). FD is this
process's end of a socketpair speaking harness.agents.protocol: JSON lines, the driver
asks, the host answers.

* The agent is mini-swe-agent's own ``DefaultAgent`` with the config's ``agent`` section,
  given the task as mini-swe-agent's SWE-bench runner gives it (``agent.run(task)``).
* Commands go to the host (``execute``): :class:`HostEnvironment` is mini-swe-agent's
  environment protocol, answering as its Docker environment does (``{"output",
  "returncode"}``, ``subprocess.TimeoutExpired`` past the timeout).
* The model is called here, in this process on the host, through mini-swe-agent's normal
  route (``get_model``: litellm, with ``MSWEA_MODEL_API_KEY`` and the provider's variables
  from this process's environment). Replay uses :class:`ReplayModel` instead: the recorded
  outputs in order with their recorded costs, taken as text (mini-swe-agent's
  ``DeterministicModel`` would obey "/sleep" or "/warning" inside an output).
* Before each model call the host may stop the attempt (wall time, the run's cost);
  after it the host is told its cost and tokens.
* At the end the trajectory is mini-swe-agent's own ``save_traj`` output (captured in
  memory, never written here) and goes to the host with the exit status and submission.
"""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
import traceback

MAX_MESSAGE = 256 * 1024 * 1024


class Channel:
    """The driver's end of harness.agents.protocol (the host's is harness.agents.protocol.Channel)."""

    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.buffer = b""

    def send(self, message):
        self.sock.sendall(json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")

    def receive(self):
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_MESSAGE:
                raise RuntimeError("host message over the size limit")
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the host closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line.decode("utf-8", "surrogatepass"))

    def call(self, message):
        self.send(message)
        reply = self.receive()
        if reply.get("type") != "reply":
            raise RuntimeError(f"unexpected host message {reply.get('type')!r}")
        return reply


def main(argv):
    channel = Channel(int(argv[1]))
    import minisweagent
    from minisweagent.agents.default import DefaultAgent, TerminatingException
    from minisweagent.run.utils.save import save_traj

    class WallTimeExceeded(TerminatingException):
        """The host stopped the attempt: its wall time is spent."""

    class RunCostLimitExceeded(TerminatingException):
        """The host stopped the attempt: the run's cost limit is reached."""

    class ReplayExhausted(TerminatingException):
        """Replay: the agent asked for more outputs than the recording holds."""

    stops = {"wall_time": WallTimeExceeded, "run_cost": RunCostLimitExceeded}
    channel.send({"type": "hello", "scaffold": "mini-swe-agent", "version": minisweagent.__version__,
                  "packages": _packages()})
    start = channel.receive()
    if start.get("type") != "start":
        raise RuntimeError("expected the start message")
    config = start["config"]

    @dataclasses.dataclass
    class HostEnvironmentConfig:
        cwd: str = "/testbed"
        env: dict = dataclasses.field(default_factory=dict)
        timeout: int = 30
        sandbox: str = "the harness's working sandbox (commands run by the host)"

    class HostEnvironment:
        def __init__(self, given):
            self.given = dict(given)
            self.config = HostEnvironmentConfig(cwd=given.get("cwd", "/testbed"), env=dict(given.get("env") or {}),
                                                timeout=given.get("timeout", 30))

        def execute(self, command, cwd="", *, timeout=None):
            reply = channel.call({"type": "execute", "command": command, "cwd": cwd or self.config.cwd,
                                  "timeout": timeout or self.config.timeout, "env": self.config.env})
            if reply.get("error"):  # what subprocess refuses in the scaffold's own environment (a NUL byte)
                raise ValueError(reply["error"])
            if reply["timed_out"]:
                raise subprocess.TimeoutExpired(command, timeout or self.config.timeout,
                                                output=reply["output"].encode("utf-8", "replace"))
            return {"output": reply["output"], "returncode": reply["returncode"]}

        def get_template_vars(self):
            return self.given | dataclasses.asdict(self.config)

    @dataclasses.dataclass
    class ReplayModelConfig:
        model_name: str
        recorded_outputs: int
        source: str = "replay of a recorded trajectory"

    class ReplayModel:
        def __init__(self, steps, recorded_config):
            self.steps = steps
            self.recorded_config = dict(recorded_config)
            self.config = ReplayModelConfig(str(recorded_config.get("model_name", "replay")), len(steps))
            self.cost = 0.0
            self.n_calls = 0

        def query(self, messages, **kwargs):
            if self.n_calls >= len(self.steps):
                raise ReplayExhausted(f"the recording holds {len(self.steps)} model outputs; the agent asked "
                                      "for another")
            step = self.steps[self.n_calls]
            self.n_calls += 1
            self.cost += float(step.get("cost") or 0.0)
            return {"content": step["content"], "extra": {"replayed_output": self.n_calls}}

        def get_template_vars(self):
            return self.recorded_config | dataclasses.asdict(self.config) | {"n_model_calls": self.n_calls,
                                                                             "model_cost": self.cost}

    class HarnessAgent(DefaultAgent):
        """DefaultAgent, with the host's budget check before each model call and its
        usage reported after it."""

        sent = 0

        def query(self):
            new, self.sent = self.messages[self.sent:], len(self.messages)
            stop = channel.call({"type": "check", "step": self.model.n_calls + 1, "messages": new})["stop"]
            if stop:
                raise stops[stop](f"stopped by the harness: {stop.replace('_', ' ')} limit reached")
            cost, started = self.model.cost, time.monotonic()
            response = super().query()
            usage = _usage(response)
            if replay is not None:
                step = replay[self.model.n_calls - 1]
                usage = (step.get("tokens_in"), step.get("tokens_out"))
            channel.call({"type": "usage", "step": self.model.n_calls, "cost": self.model.cost - cost,
                          "tokens_in": usage[0], "tokens_out": usage[1], "seconds": time.monotonic() - started})
            return response

    replay = (start.get("replay") or {}).get("steps")
    model_config = dict(config.get("model") or {})
    model = agent = extra_info = None
    try:
        if replay is not None:
            model = ReplayModel(replay, model_config)
        else:
            import litellm
            litellm.telemetry = False
            litellm.suppress_debug_info = True
            from minisweagent.models import get_model
            model = get_model(config=model_config)
        agent = HarnessAgent(model, HostEnvironment(config.get("environment") or {}), **(config.get("agent") or {}))
        exit_status, result = agent.run(start["task"])
    except Exception as exc:  # as mini-swe-agent's SWE-bench runner records a failed instance
        exit_status, result = type(exc).__name__, str(exc)
        extra_info = {"traceback": traceback.format_exc()}
    captured = _Captured()
    save_traj(agent, captured, print_path=False, exit_status=exit_status, result=result, extra_info=extra_info,
              instance_id=start.get("instance_id"))
    trajectory = json.loads(captured.text)
    _drop_keys(trajectory.get("info", {}).get("config", {}).get("model", {}))
    channel.call({"type": "done", "exit_status": exit_status, "submission": result, "trajectory": trajectory,
                  "cost": model.cost if model is not None else 0.0,
                  "calls": model.n_calls if model is not None else 0,
                  "error": (extra_info or {}).get("traceback")})
    return 0


class _Captured:
    """What save_traj writes, kept in memory (a trajectory can hold the model's config)."""

    class parent:  # noqa: N801 - save_traj calls path.parent.mkdir(...)
        @staticmethod
        def mkdir(*args, **kwargs):
            return None

    text = ""

    def write_text(self, text, *args, **kwargs):
        self.text = text


def _drop_keys(model_config):
    """The model config's secret fields out before anything leaves this process (the
    host scrubs again)."""
    kwargs = model_config.get("model_kwargs")
    if isinstance(kwargs, dict):
        for key in list(kwargs):
            if "key" in key.lower() or "token" in key.lower() or "secret" in key.lower():
                kwargs[key] = "[REDACTED]"


def _usage(response):
    usage = ((response.get("extra") or {}).get("response") or {}).get("usage") or {}
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def _packages():
    from importlib import metadata
    wanted = ("mini-swe-agent", "litellm", "openai")
    found = {}
    for name in wanted:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


if __name__ == "__main__":
    os.umask(0o077)
    sys.exit(main(sys.argv))
