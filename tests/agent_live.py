"""Live `harness solve` runs of the demo set against the scripted model server
(tests/fixtures/model_server.py): what tests/integration/test_agent_solve.py and the browser
test of a solved run's page (tests/browser/test_agent_solve_report.py) share. The model
server's replies are priced by the pinned litellm from its own cost map.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from harness.agents.scaffolds.mini_swe_agent import MiniSweAgent
from harness.inputs.demo import DEMO_DIR
from tests.fixtures.model_server import COMPLETION_TOKENS, PROMPT_TOKENS, SUBMIT, apply_patch_reply, bash_reply

KEY = "sk-planted-test-key-7f3a9c1e5b2d4680"
MODEL = "openai/gpt-4o-mini"
#: litellm's price of one scripted reply for gpt-4o-mini ($0.15 / 1M in, $0.60 / 1M out)
CALL_COST = PROMPT_TOKENS * 0.15e-6 + COMPLETION_TOKENS * 0.6e-6
DEMO = DEMO_DIR / "instances.jsonl"
RECORDS = {r["instance_id"]: r for r in map(json.loads, DEMO.read_text().splitlines())}
CALCLY_1, CALCLY_2 = "harness-demo__calcly-1", "harness-demo__calcly-2"
TEXTKIT_1, INVENTORY_1 = "harness-demo__textkit-1", "harness-demo__inventory-1"
WRONG_SLUG = bash_reply("sed -i 's/strip().lower()/strip()/' textkit/slug.py && echo edited", "A wrong fix.")


def marker(instance_id: str) -> str:
    """What the model server recognises a task by (the start of its problem statement)."""
    return RECORDS[instance_id]["problem_statement"][:60]


def three_attempt_scripts() -> dict:
    """Three attempts per instance: calcly-1's first two conversations apply the reference
    patch and submit, its third submits nothing (2 of 3 resolve it); textkit-1's submit a
    wrong fix; calcly-2 and inventory-1 have no script (the model says ``echo no-script``
    until the step limit)."""
    fix = [apply_patch_reply(RECORDS[CALCLY_1]["patch"]), SUBMIT]
    return {marker(CALCLY_1): [fix, fix, [bash_reply("true"), SUBMIT]],
            marker(TEXTKIT_1): [WRONG_SLUG, SUBMIT]}


def write_config(path: Path, environment, url: str) -> Path:
    """The pinned version's own SWE-bench config, its model sent to the scripted server."""
    config = MiniSweAgent().default_config(environment.root)
    config["model"]["model_kwargs"] = {**config["model"].get("model_kwargs", {}), "api_base": url}
    path.write_text(yaml.safe_dump(config))
    return path


def with_key() -> dict:
    """This process's environment with the planted key in both variables a model route reads."""
    return {**os.environ, "OPENAI_API_KEY": KEY, "MSWEA_MODEL_API_KEY": KEY}
