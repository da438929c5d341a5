"""mini-swe-agent's own side of benchmarks/agent_overhead.py, run by the scaffold pin's own
interpreter (``<pin env>/bin/python -I _mini_swe_agent_side.py MODE``): it imports only
mini-swe-agent and the standard library, never the harness.

Requests come as JSON lines on stdin, answers go as JSON lines to the stdout this process
started with (mini-swe-agent's own output is sent to stderr). Every time is taken here,
around mini-swe-agent's own calls, so the pipe to the benchmark is never in a figure.

``steps``: one ``DockerEnvironment`` (mini-swe-agent's: ``docker run -d ... sleep``, then
``docker exec -w CWD -e ... ID bash -lc COMMAND`` per command) on the given image::

    <- {"image", "environment": {cwd, env, timeout, ...}, "setup": SHELL}
    -> {"start_seconds", "setup_seconds", "setup_returncode", "setup_output"}
    <- {"command": TEXT}           (repeated)
    -> {"seconds", "returncode", "timed_out", "output_bytes", "output_sha256", "output"}
    <- {"end": true}
    -> {"remove_seconds"}

``attempt``: a whole attempt as mini-swe-agent runs one: its ``DefaultAgent`` with the
recorded config's ``agent`` section, over its ``DockerEnvironment`` with the recorded
``environment`` section (the image replaced), a model that returns the recorded outputs in
order with their recorded costs (taken as text: mini-swe-agent's ``DeterministicModel``
would obey a "/sleep" inside one)::

    <- {"image", "config", "task", "outputs": [TEXT], "costs": [USD], "setup": SHELL}
    -> {"start_seconds", "setup_seconds", "run_seconds", "exec_seconds": [..], "exit_status",
        "submission", "calls", "cost", "remove_seconds"}

``setup`` is run once, as root, through the environment's own ``execute`` before anything is
timed as the agent's: the harness's instance images keep the tree at /opt/harness/testbed
(SWE-bench's have it at /testbed) and activate nothing in a login shell (SWE-bench's
activate their conda environment from root's .bashrc).
"""

import hashlib
import json
import os
import subprocess
import sys
import time


def main(argv):
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever mini-swe-agent prints goes to stderr, never into the answers
    from minisweagent.environments.docker import DockerEnvironment

    def answer(message):
        answers.write(json.dumps(message) + "\n")

    request = json.loads(sys.stdin.readline())
    environment_config = dict(request.get("environment") or (request.get("config") or {}).get("environment") or {})
    environment_config.pop("environment_class", None)
    environment_config["image"] = request["image"]
    started = time.perf_counter()
    env = DockerEnvironment(**environment_config)
    start_seconds = time.perf_counter() - started
    try:
        started = time.perf_counter()
        setup = env.execute(request["setup"], timeout=600)
        setup_seconds = time.perf_counter() - started
        head = {"start_seconds": start_seconds, "setup_seconds": setup_seconds,
                "setup_returncode": setup["returncode"], "setup_output": setup["output"][-2000:],
                "container": env.container_id}
        if argv[1] == "steps":
            answer(head)
            _steps(env, answer)
        else:
            answer({**head, **_attempt(env, request)})
    finally:
        started = time.perf_counter()
        _remove(env)
        answer({"remove_seconds": time.perf_counter() - started})


def _steps(env, answer):
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("end"):
            return
        started = time.perf_counter()
        try:
            result = env.execute(request["command"])
            timed_out = False
        except subprocess.TimeoutExpired as exc:
            result = {"output": (exc.output or b"").decode("utf-8", "replace"), "returncode": None}
            timed_out = True
        seconds = time.perf_counter() - started
        output = result["output"].encode("utf-8", "replace")
        answer({"seconds": seconds, "returncode": result["returncode"], "timed_out": timed_out,
                "output_bytes": len(output), "output_sha256": hashlib.sha256(output).hexdigest(),
                "output": result["output"]})


def _attempt(env, request):
    import dataclasses

    from minisweagent.agents.default import DefaultAgent

    @dataclasses.dataclass
    class RecordedModelConfig:
        model_name: str

    class RecordedModel:
        """The recorded outputs in order, with their recorded costs."""

        def __init__(self, outputs, costs, config):
            self.outputs, self.costs = outputs, costs
            self.recorded_config = dict(config)
            self.config = RecordedModelConfig(str(config.get("model_name", "recorded")))
            self.cost = 0.0
            self.n_calls = 0

        def query(self, messages, **kwargs):
            if self.n_calls >= len(self.outputs):
                raise RuntimeError("the recording has no more outputs")
            content = self.outputs[self.n_calls]
            self.cost += float(self.costs[self.n_calls] or 0.0)
            self.n_calls += 1
            return {"content": content}

        def get_template_vars(self):
            return self.recorded_config | dataclasses.asdict(self.config) | {"n_model_calls": self.n_calls,
                                                                             "model_cost": self.cost}

    exec_seconds = []
    execute = env.execute

    def timed_execute(command, cwd="", *, timeout=None):
        started = time.perf_counter()
        try:
            return execute(command, cwd, timeout=timeout)
        finally:
            exec_seconds.append(time.perf_counter() - started)

    env.execute = timed_execute
    config = request["config"]
    model = RecordedModel(request["outputs"], request["costs"], config.get("model") or {})
    agent = DefaultAgent(model, env, **(config.get("agent") or {}))
    started = time.perf_counter()
    exit_status, submission = agent.run(request["task"])
    run_seconds = time.perf_counter() - started
    return {"run_seconds": run_seconds, "exec_seconds": exec_seconds, "exit_status": exit_status,
            "submission": submission, "calls": model.n_calls, "cost": model.cost}


def _remove(env):
    """Remove the container now (``DockerEnvironment.cleanup`` stops it in the background, which
    with ``sleep`` as PID 1 takes docker's 10 s grace period: not the agent's time either way)."""
    if env.container_id:
        subprocess.run([env.config.executable, "rm", "-f", env.container_id], capture_output=True, timeout=120)
        env.container_id = None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
