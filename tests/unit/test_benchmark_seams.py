"""The benchmarks reach into the harness only through seams the product keeps: a benchmark
that overrides a method the harness renamed or re-shaped would time something else silently."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    """``benchmarks/<name>.py`` as a module; the path and helper modules it adds are taken back."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    path, modules = list(sys.path), set(sys.modules)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
        for added in set(sys.modules) - modules:
            if BENCHMARKS in Path(getattr(sys.modules[added], "__file__", None) or "/").parents:
                sys.modules.pop(added, None)
    return module


def test_the_overhead_benchmark_overrides_the_evaluators_test_step_as_it_is():
    import harness.evaluation.evaluator as evaluation
    import harness.evaluation.node as runner
    overhead = _load("overhead")
    made, restore = overhead._recording_evaluators(runner)
    try:
        recording = runner.Evaluator
        assert recording is not evaluation.Evaluator and issubclass(recording, evaluation.Evaluator)
    finally:
        restore()
    assert runner.Evaluator is evaluation.Evaluator and made == []
    for name in ("_test_step", "_launch_plan"):
        ours, theirs = getattr(recording, name), getattr(evaluation.Evaluator, name)
        assert ours is not theirs, name
        params = list(inspect.signature(theirs).parameters)
        assert params[0] == "self"
        if list(inspect.signature(ours).parameters)[1:] != ["args", "kwargs"]:
            assert list(inspect.signature(ours).parameters) == params, name
    # what a real evaluation computes is the product's only: the benchmark's calls live in the subclass
    assert not hasattr(evaluation.Evaluator, "bare_call")


def test_a_batch_runner_takes_its_backend_at_construction(tmp_path):
    from harness.run.batch import BatchRunner
    from harness.evaluation.tasks import RunConfig

    class Backend:
        stopped = False

    class Preparer:
        specs = repos = None

    backend = Backend()
    runner = BatchRunner(RunConfig(run_id="r", output_dir=tmp_path, cache_dir=tmp_path / "cache"),
                         client=object(), preparer=Preparer(), backend=backend)
    assert runner.evaluator.backend is backend
    assert not isinstance(inspect.getattr_static(BatchRunner, "backend", None), property)
