"""mini-swe-agent behind the scaffold seam: the host-side adapter of
``mini_swe_agent_driver.py`` (see harness.agents.scaffold).

The config is mini-swe-agent's own YAML, taken as it is (its ``agent``, ``model`` and
``environment`` sections): without ``--config`` the one the pinned package ships for
SWE-bench (``minisweagent/config/extra/swebench.yaml`` of that version). The flags change
only ``model.model_name`` (``--model``) and ``agent.step_limit`` / ``agent.cost_limit``
(``--step-limit`` / ``--cost-limit``), and the record keeps the whole config it ran with.

What of the ``environment`` section applies here: ``cwd``, ``env`` and ``timeout`` (each
command gets a fresh shell in the working sandbox, in ``cwd``, with ``env``, killed past
``timeout`` seconds, as mini-swe-agent's Docker environment does). Docker's own settings
(``image``, ``executable``, ``run_args``, ``container_timeout``, ``pull_timeout``,
``environment_class``) name what the harness replaces and are kept only as recorded;
``forward_env`` is not honoured (no host variable enters the sandbox). A
``run.env_startup_command`` is refused: nothing would run it.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

from harness.agents.budgets import Budgets
from harness.agents.scaffold import Effective, load_config
from harness.errors import InputError

DRIVER = Path(__file__).resolve().parent / "mini_swe_agent_driver.py"
#: the config the pinned package ships for SWE-bench runs, relative to its site-packages
DEFAULT_CONFIG = Path("minisweagent") / "config" / "extra" / "swebench.yaml"
TRAJECTORY_FORMAT = "mini-swe-agent-1"
#: environment fields the harness's sandbox applies (the rest are Docker's, recorded only)
APPLIED_ENVIRONMENT = ("cwd", "env", "timeout")


class MiniSweAgent:
    name = "mini-swe-agent"

    @property
    def driver(self) -> Path:
        return DRIVER

    def default_config(self, environment_root: Path) -> dict:
        found = sorted(Path(environment_root).glob(f"lib/python*/site-packages/{DEFAULT_CONFIG}"))
        if not found:
            raise InputError(f"the scaffold environment {environment_root} has no {DEFAULT_CONFIG}: pass --config",
                             field="--config")
        return load_config(found[0])

    def attempt_config(self, config: dict, model: str | None, budgets: Budgets) -> dict:
        config = copy.deepcopy(config)
        for section in ("agent", "model", "environment"):
            value = config.setdefault(section, {})
            if not isinstance(value, dict):
                raise InputError(f"the config's {section!r} must be a mapping, got {type(value).__name__}",
                                 field=f"--config {section}")
        run = config.get("run") or {}
        if isinstance(run, dict) and run.get("env_startup_command"):
            raise InputError("run.env_startup_command is not supported: the working sandbox is the instance's "
                             "image as the harness prepares it", field="--config run.env_startup_command")
        if model:
            config["model"]["model_name"] = model
        if budgets.step_limit is not None:
            config["agent"]["step_limit"] = budgets.step_limit
        if budgets.cost_limit is not None:
            config["agent"]["cost_limit"] = budgets.cost_limit
        environment = config["environment"]
        if "timeout" in environment and not isinstance(environment["timeout"], (int, float)):
            raise InputError("environment.timeout must be a number of seconds", field="--config environment.timeout")
        if not isinstance(environment.get("env", {}), dict):
            raise InputError("environment.env must be a mapping", field="--config environment.env")
        return config

    def effective(self, config: dict) -> Effective:
        agent, model = config.get("agent") or {}, config.get("model") or {}
        templates = {k: hashlib.sha256(str(v).encode()).hexdigest() for k, v in sorted(agent.items())
                     if k.endswith("_template")}
        parameters = {k: v for k, v in model.items() if k != "model_name"}
        return Effective(model_name=str(model.get("model_name") or ""), model_parameters=parameters,
                         step_limit=int(agent.get("step_limit", 0)) or None,
                         cost_limit=float(agent.get("cost_limit", 3.0)) or None,
                         template_sha256=templates)

    def partial_trajectory(self, messages: list, *, instance_id: str, exit_status: str, cost: float, calls: int,
                           version: str, error: str | None) -> dict:
        """The trajectory in mini-swe-agent's format from the messages the host saw, when
        the driver could not write its own (it was killed or died)."""
        return {"info": {"exit_status": exit_status, "submission": None,
                         "model_stats": {"instance_cost": cost, "api_calls": calls}, "mini_version": version,
                         "harness_note": "written by the harness from the messages it saw: the driver ended "
                                         "without its own record", "error": error},
                "messages": messages, "trajectory_format": TRAJECTORY_FORMAT, "instance_id": instance_id}
