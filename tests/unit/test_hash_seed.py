"""The tests' string hashing: randomised as in SWE-bench's runs, one recorded seed per
evaluation (harness.evaluation.setup.HASH_SEEDS), unless the spec fixes it."""

from __future__ import annotations

from dataclasses import replace

from harness.evaluation.evaluator import Evaluator
from harness.evaluation.setup import HASH_SEEDS, EvalConfig, draw_hash_seed, scrubbed_env
from harness.inputs.instances import parse_instance
from harness.inputs.predictions import Prediction
from harness.inputs.specs import EnvSpec

_RECORD = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "patch": "",
           "test_patch": "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x\n+y\n",
           "FAIL_TO_PASS": ["t.py::f"], "PASS_TO_PASS": [], "version": "1.0"}


def _evaluator(spec: EnvSpec, config: EvalConfig = EvalConfig()) -> Evaluator:  # noqa: B008 (frozen)
    instance = parse_instance(_RECORD)
    return Evaluator(instance, Prediction(instance.instance_id, "m", ""), spec, lambda path: None, config)


def test_seeds_are_drawn_as_swebench_draws_them_never_zero():
    seeds = {draw_hash_seed() for _ in range(2000)}
    assert len(seeds) > 1990 and all(0 < s < HASH_SEEDS for s in seeds)   # 0 would turn randomisation off


def test_each_evaluation_draws_its_own_seed_and_records_it():
    spec = EnvSpec(repo="o/r", version="1.0")
    first, second = _evaluator(spec), _evaluator(spec)
    for evaluator in (first, second):
        seed = evaluator.env["PYTHONHASHSEED"]
        assert 0 < int(seed) < HASH_SEEDS and evaluator.result.resources["python_hash_seed"] == seed
        assert evaluator.result.to_report()["resources"]["python_hash_seed"] == seed
    assert first.env["PYTHONHASHSEED"] != second.env["PYTHONHASHSEED"]


def test_a_configured_seed_replays_and_a_spec_may_fix_it():
    spec = EnvSpec(repo="o/r", version="1.0")
    assert _evaluator(spec, EvalConfig(hash_seed=12345)).env["PYTHONHASHSEED"] == "12345"
    fixed = replace(spec, env=(("PYTHONHASHSEED", "0"),))
    assert scrubbed_env(fixed, 777)["PYTHONHASHSEED"] == "0"
    assert _evaluator(fixed).result.resources["python_hash_seed"] == "0"
    assert "PYTHONHASHSEED" not in scrubbed_env(spec)                     # nothing drawn: Python's own default
