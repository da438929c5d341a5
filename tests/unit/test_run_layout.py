"""One object names the run directory (harness.paths): no other module of the package spells
a run or instance file name, and the names and the attempt rule behave as the layout says."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import paths
from harness.paths import InstanceFiles, RunPaths, attempt_dir_name, attempt_number

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"

#: Every name of the run directory's layout: the run's own files and an instance's.
LAYOUT_NAMES = frozenset({*paths.RUN_FILE_NAMES, paths.REPORT, *paths.ARTEFACTS, paths.PAGE, paths.AGENT_RECORD,
                          *paths.AGENT_ARTEFACTS})
#: Modules that spell some of those names for another layout, and which names:
ELSEWHERE = {
    # the sandbox's output directory, on the host and inside the sandbox
    "harness/integrity/steps.py": {"results.xml", "evidence.json", "events.jsonl"},
    # SWE-bench's layout (logs/run_evaluation/...): SWE-bench's names
    "harness/swebench/layout.py": {"report.json", "test_output.txt", "patch.diff"},
    # the suffix of the cache's lock files (<cache>/locks/, beside the demo repositories),
    # not the run directory's lock
    "harness/locks.py": {".lock"},
    "harness/inputs/demo/build.py": {".lock"},
    # the demo set's own predictions file (instances/demo/), not a run's
    "harness/cli.py": {"predictions.jsonl"},
}
#: Files copied into the sandbox (they import nothing of the harness): their own names.
SANDBOX = PACKAGE / "incontainer"


def _spelled(path: Path) -> list[tuple[int, str]]:
    """(line, name) for every string constant of the module that is a layout name or an
    attempt directory's prefix (f-string pieces included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in LAYOUT_NAMES or node.value.startswith(paths.ATTEMPT_PREFIX):
                found.append((node.lineno, node.value))
    return found


def test_no_module_but_paths_spells_a_run_directory_file_name():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "paths.py" and path.parent == PACKAGE or SANDBOX in path.parents:
            continue
        relative = str(path.relative_to(ROOT))
        allowed = ELSEWHERE.get(relative, set())
        offenders += [f"{relative}:{line}: {name!r}" for line, name in _spelled(path) if name not in allowed]
    assert offenders == [], "name these through harness.paths (RunPaths, InstanceFiles):\n" + "\n".join(offenders)


def test_the_check_finds_a_name_spelled_in_a_path_join_and_an_f_string(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('p = d / "report.json"\nq = f"attempt-{n}"\nr = "a report.json mention"\n')
    assert _spelled(module) == [(1, "report.json"), (2, "attempt-")]


def test_instance_files_name_every_file_of_an_instance_directory(tmp_path):
    files = RunPaths(tmp_path).instance("astropy__astropy-12907")
    assert files.root == tmp_path / "astropy__astropy-12907"
    named = {files.report, files.patch, files.instance_record, files.commands, files.test_output,
             files.results_xml, files.evidence, files.events, files.build_log, files.page}
    assert {p.parent for p in named} == {files.root} and len(named) == 10
    assert {p.name for p in named} == {paths.REPORT, paths.PAGE, *paths.ARTEFACTS}
    assert files.attempt(2).report == files.root / "attempt-2" / "report.json"
    assert RunPaths(tmp_path).instance("a-1", 3) == InstanceFiles(tmp_path / "a-1" / "attempt-3")


def test_instance_files_name_what_an_agent_attempt_writes_beside_the_grading(tmp_path):
    files = RunPaths(tmp_path).instance("astropy__astropy-12907", 2)
    named = {files.agent_record, files.trajectory, files.agent_patch, files.submission, files.scaffold_log,
             files.replay}
    assert {p.parent for p in named} == {files.root} and len(named) == 6
    assert {p.name for p in named} == {paths.AGENT_RECORD, "astropy__astropy-12907.traj.json", *paths.AGENT_ARTEFACTS}
    # mini-swe-agent's own layout, <id>/<id>.traj.json: a run directory replays as it is
    assert RunPaths(tmp_path).instance("a-1").trajectory == tmp_path / "a-1" / "a-1.traj.json"
    # none of them is one grading removes or writes
    assert not {p.name for p in named} & {paths.REPORT, paths.PAGE, *paths.ARTEFACTS}
    run = RunPaths(tmp_path)
    assert {run.solve_record.name, run.predictions.name} <= paths.RUN_FILE_NAMES


def test_the_attempt_rule_round_trips_and_refuses_other_names():
    assert attempt_dir_name(7) == "attempt-7" and attempt_number("attempt-7") == 7
    assert attempt_number("attempt-0") == 0      # a number, refused as an attempt by the readers
    for name in ("attempt-", "attempt-x", "attempt-1a", "Attempt-1", "attempts-1", "report.json"):
        assert attempt_number(name) is None, name


def test_an_instance_id_that_would_leave_or_shadow_the_run_directory_is_refused(tmp_path):
    from harness.errors import InputError
    for bad in ("../x", "summary.json", ".lock", "a/b"):
        with pytest.raises(InputError):
            RunPaths(tmp_path).instance(bad)


def test_report_files_walks_instances_and_attempts_only(tmp_path):
    for rel in ("a-1/report.json", "b-2/attempt-1/report.json", "b-2/attempt-2/report.json",
                "c-3/deeper/attempt-1/report.json", "d-4/patch.diff", "report.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    found = [str(p.relative_to(tmp_path)) for p in RunPaths(tmp_path).report_files()]
    assert found == ["a-1/report.json", "b-2/attempt-1/report.json", "b-2/attempt-2/report.json"]
