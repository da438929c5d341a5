"""What one evaluation is given and gives back, and the command it runs: plain data and
pure functions that the node's evaluator (:mod:`harness.evaluation.evaluator`), the seam's data
(:mod:`harness.evaluation.tasks`) and the re-grader (:mod:`harness.evaluation.regrade`) share.

* :class:`EvalConfig`, the grading configuration; :class:`RunOutputs` and
  :class:`Evaluation`, what an evaluation returns; :func:`exception_record`, how a failure
  is recorded;
* the test environment (:data:`BASE_ENV`, :func:`scrubbed_env`, the hash seed) and the test
  command as the spec's runner spells it (:func:`build_test_command`, :func:`test_files_of`);
* :func:`sandbox_cpu`, the cores a recorded sandbox had.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from harness.engine.cpus import CpuLimit
from harness.engine.layers import VENV
from harness.grading.parsers import get_parser
from harness.inputs.specs import EnvSpec
from harness.patches import PatchFiles
from harness.results.report import InstanceResult
from harness.runners import get_runner

BASE_ENV = {
    "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": "/opt/harness/wheels",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
#: String hashing as SWE-bench's runs have it: randomised, one seed per evaluation
#: (SWE-bench sets no PYTHONHASHSEED, so each of its Python processes draws one; sympy's
#: bin/test draws one for the child it runs the tests in). Drawn from [1, 2**32): 0 would
#: turn the randomisation off. Set, the variable also keeps bin/test in-process, under the
#: harness's reporter; its value is recorded (report.json ``resources.python_hash_seed``), so
#: an outcome that depends on it can be replayed. A spec's ``env`` may fix it.
HASH_SEEDS = 2**32


def draw_hash_seed() -> int:
    import secrets
    return 1 + secrets.randbelow(HASH_SEEDS - 1)


#: The outcome-origin plugin, for runners that are pytest.
OUTCOME_PLUGIN_ARGS = "-p _harness_outcomes"


@dataclass(frozen=True)
class EvalConfig:
    """Grading configuration. Times in seconds, sizes in bytes."""

    timeout: int | None = None          # test-run timeout; None: the spec's
    setup_timeout: int = 300            # every other command
    test_output_limit: int = 32 * 1024 * 1024
    junit_limit: int = 64 * 1024 * 1024
    restore_test_infra: bool = True
    canaries: int = 3                   # canaries planted per run (0: none)
    perturbed_run: bool = False         # a FULL result runs again with one F2P test changed in place
    forbid_runner_internals: bool = True
    monitor: bool = True                # the runtime tamper monitor (audit hook)
    tree_report_limit: int = 48 * 1024 * 1024
    max_tree_changes: int = 20_000
    hash_seed: int | None = None        # PYTHONHASHSEED of the tests; None: one drawn per evaluation

    def __post_init__(self) -> None:
        # a timeout below one second would time out every run and charge it to the model
        if self.timeout is not None and (isinstance(self.timeout, bool) or self.timeout < 1):
            raise ValueError(f"EvalConfig.timeout must be None or at least 1 s, got {self.timeout!r}")
        if self.setup_timeout < 1:
            raise ValueError(f"EvalConfig.setup_timeout must be at least 1 s, got {self.setup_timeout!r}")

    def as_dict(self) -> dict:
        return {"timeout": self.timeout, "setup_timeout": self.setup_timeout,
                "test_output_limit": self.test_output_limit, "junit_limit": self.junit_limit,
                "restore_test_infra": self.restore_test_infra, "canaries": self.canaries,
                **({"perturbed_run": True} if self.perturbed_run else {}),
                "forbid_runner_internals": self.forbid_runner_internals, "monitor": self.monitor,
                "tree_report_limit": self.tree_report_limit, "max_tree_changes": self.max_tree_changes,
                "hash_seed": self.hash_seed}


@dataclass
class RunOutputs:
    """Raw artefacts kept next to report.json."""

    test_output: str = ""
    junit_xml: bytes | None = None
    patch: str = ""
    evidence: bytes | None = None
    events: bytes | None = None


@dataclass
class Evaluation:
    result: InstanceResult
    outputs: RunOutputs = field(default_factory=RunOutputs)


def scrubbed_env(spec: EnvSpec, hash_seed: int | None = None) -> dict[str, str]:
    env = dict(BASE_ENV)
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    env.update(spec.env_dict)
    return env


def test_files_of(test_patch: PatchFiles, runner: str = "pytest") -> list[str]:
    """The test files of the test patch, as the spec's runner sees them (Python files it
    modifies or creates)."""
    return get_runner(runner).test_files(test_patch)


def is_pytest(spec: EnvSpec) -> bool:
    """pytest runs the tests (the outcome-origin plugin and the results-file provenance apply)."""
    return spec.runner == "pytest" and spec.parser.startswith("pytest")


def emits_evidence(spec: EnvSpec) -> bool:
    """The test process states outcome origins and its results file's hash on the evidence
    fd: the outcome plugin under pytest, the in-container reporter under the others."""
    return is_pytest(spec) or get_runner(spec.runner).reporter


def build_test_command(spec: EnvSpec, test_patch: PatchFiles, junit_path: str, plugin: bool = False) -> str:
    """The spec's test command as its runner spells it (harness.runners): the command, its
    targets, and only then our options (the outcome plugin for pytest, then the parser's)."""
    runner = get_runner(spec.runner)
    targets = runner.targets(test_patch) if spec.test_directives == "test_files" else []
    options = [o for o in (OUTCOME_PLUGIN_ARGS if plugin and is_pytest(spec) else "",
                           get_parser(spec.parser).runner_args or "") if o]
    return runner.command(spec.test_cmd, targets, junit_path, " ".join(options))


def sandbox_cpu(result: InstanceResult) -> CpuLimit | None:
    """The cores the result's sandbox had, as report.json recorded them."""
    return CpuLimit.from_dict(result.resources.get("cpus"))


def exception_record(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:4000],
            "traceback": "".join(traceback.format_exception(exc))[-8000:]}
