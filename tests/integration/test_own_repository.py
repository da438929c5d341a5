"""A repository's own fix commits to a validated instance set, with real containers:
``harness instances from-commits``, ``harness specs init``, ``harness instances derive``,
then ``harness validate``. The demo set's records rebuilt from their fix commits equal
the shipped ones; a small library made here (not in SWE-bench: a flit_core project, whose
build backend only reaches the environment through the tree's [build-system]) goes from
its commits to a set whose reference patches are FULL and empty patches NO; bad input is
one line on stderr, exit 2 and nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.inputs.demo import DEMO_DIR, build_demo_repos, history_shas, iter_source_repos
from tests.gitrepo import git

pytestmark = pytest.mark.engine

PYPROJECT = """\
[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tinyunits"
version = "0.3.0"
description = "Sizes with units, parsed and formatted"
requires-python = ">=3.8"
classifiers = ["Programming Language :: Python :: 3", "Programming Language :: Python :: 3.11"]

[project.optional-dependencies]
test = ["pytest>=7,<9"]
"""
CODE = '''"""Sizes with units, parsed and formatted."""

UNITS = {"B": 1, "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3}


def parse_size(text):
    number, unit = text.split()
    return int(float(number) * UNITS[unit])


def format_size(size):
    for unit in ("GB", "MB", "KB"):
        if size >= UNITS[unit]:
            return f"{size // UNITS[unit]} {unit}"
    return f"{size} B"
'''
TESTS = '''from tinyunits import format_size, parse_size


def test_parse_bytes():
    assert parse_size("12 B") == 12


def test_parse_kilobytes():
    assert parse_size("1.5 KB") == 1500


def test_format_small():
    assert format_size(999) == "999 B"
'''


def _write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def _library(root: Path) -> tuple[Path, dict[str, str]]:
    """own/tinyunits: a tagged release, two fixes with tests, a change whose new test passes
    without it, a change without tests."""
    repo = root / "repos" / "own__tinyunits"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = {"release": _commit(repo, "tinyunits 0.3.0", {"pyproject.toml": PYPROJECT, "tinyunits/__init__.py": CODE,
                                                         "tests/test_units.py": TESTS})}
    git(repo, "tag", "v0.3.0")
    fixed_case = CODE.replace("UNITS[unit])", "UNITS[unit.upper()])")
    shas["case"] = _commit(repo, "parse_size: units in any case\n\n'10 kb' raised KeyError.\n", {
        "tinyunits/__init__.py": fixed_case,
        "tests/test_units.py": TESTS + '\n\ndef test_parse_lowercase_unit():\n    assert parse_size("2 kb") == 2000\n'})
    fixed_format = fixed_case.replace('return f"{size // UNITS[unit]} {unit}"',
                                      'return f"{size / UNITS[unit]:g} {unit}"')
    shas["format"] = _commit(repo, "format_size: keep the fraction (1500 is 1.5 KB, not 1 KB)", {
        "tinyunits/__init__.py": fixed_format,
        "tests/test_format.py": 'from tinyunits import format_size\n\n\ndef test_fraction_kept():\n'
                                '    assert format_size(1500) == "1.5 KB"\n\n\ndef test_whole():\n'
                                '    assert format_size(2000000) == "2 MB"\n'})
    shas["refactor"] = _commit(repo, "refactor: name the unit table", {
        "tinyunits/__init__.py": fixed_format.replace('"""Sizes', '"""Sizes (SI units)'),
        "tests/test_table.py": 'from tinyunits import UNITS\n\n\ndef test_table():\n    assert UNITS["KB"] == 1000\n'})
    shas["docs"] = _commit(repo, "docs only", {"tinyunits/__init__.py": fixed_format + "\n# SI, not IEC\n"})
    shas["tests_only"] = _commit(repo, "more tests", {"tests/test_more.py": "def test_more():\n    pass\n"})
    return repo, shas


def _harness(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_demo_sets_records_rebuilt_from_their_fix_commits_equal_the_shipped_ones(tmp_path, cache_dir, capsys):
    repos = build_demo_repos(DEMO_DIR, tmp_path / "repos")
    sources = {r.full_name: r for r in iter_source_repos(DEMO_DIR)}
    made: list[dict] = []
    for entry in yaml.safe_load((DEMO_DIR / "instances.src.yaml").read_text()):
        fix = history_shas(sources[entry["repo"]].path)[entry["fix"]]
        statement = tmp_path / f"{entry['instance_id']}.md"
        statement.write_text(entry["problem_statement"])
        out = tmp_path / f"{entry['instance_id']}.jsonl"
        code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"{entry['repo']}={repos[entry['repo']]}",
                                fix, "--out", str(out), "--version", str(entry["version"]),
                                "--problem-statement", f"{fix}={statement}", "--instance-id", f"{fix}={entry['instance_id']}")
        assert code == 0, err
        made += _lines(out)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in made))
    derived = tmp_path / "derived.jsonl"
    code, out, err = _harness(capsys, "instances", "derive", "--instances", str(records), "--out", str(derived),
                              "--repeat", "2", "--max-workers", "2", "--output-dir", str(tmp_path / "runs"),
                              "--cache-dir", str(cache_dir), "--quiet")
    assert code == 0, err
    assert _lines(derived) == _lines(DEMO_DIR / "instances.jsonl")
    table = json.loads((tmp_path / "derived.jsonl.derivation.json").read_text())
    assert [r["status"] for r in table["instances"]] == ["derived"] * 4


def test_a_repository_not_in_swebench_goes_from_fix_commits_to_a_validated_set(tmp_path, cache_dir, capsys):
    repo, shas = _library(tmp_path)
    specs, records, derived = tmp_path / "specs", tmp_path / "records.jsonl", tmp_path / "derived.jsonl"
    code, out, err = _harness(capsys, "specs", "init", "--repo", f"own/tinyunits={repo}", "--commit", "v0.3.0",
                              "--out", str(specs))
    assert code == 0, err
    spec = yaml.safe_load((specs / "own__tinyunits.yaml").read_text())
    assert spec["defaults"]["python"] == "3.11" and spec["defaults"]["install_extras"] == ["test"]
    assert spec["versions"] == {"0.3": {}}
    code, out, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}",
                              f"{shas['release']}..{shas['format']}", "--out", str(records))
    assert code == 0, err
    made = _lines(records)
    assert [r["instance_id"] for r in made] == [f"own__tinyunits-{shas['case'][:12]}",
                                                f"own__tinyunits-{shas['format'][:12]}"]
    assert {r["version"] for r in made} == {"0.3"} and made[1]["base_commit"] == shas["case"]
    assert made[0]["problem_statement"].startswith("parse_size: units in any case")
    assert "tests/test_units.py" in made[0]["test_patch"] and "tests/" not in made[0]["patch"]
    common = ("--specs", str(specs), "--repos-dir", str(tmp_path / "repos"), "--no-clone", "--output-dir",
              str(tmp_path / "runs"), "--cache-dir", str(cache_dir), "--quiet")
    code, out, err = _harness(capsys, "instances", "derive", "--instances", str(records), "--out", str(derived),
                              "--repeat", "2", "--max-workers", "2", *common)
    assert code == 0, err
    lists = {r["instance_id"]: (r["FAIL_TO_PASS"], r["PASS_TO_PASS"]) for r in _lines(derived)}
    assert lists[made[0]["instance_id"]] == (["tests/test_units.py::test_parse_lowercase_unit"],
                                            ["tests/test_units.py::test_parse_bytes",
                                             "tests/test_units.py::test_parse_kilobytes",
                                             "tests/test_units.py::test_format_small"])
    assert lists[made[1]["instance_id"]] == (["tests/test_format.py::test_fraction_kept"],
                                            ["tests/test_format.py::test_whole"])
    code, out, err = _harness(capsys, "validate", "--instances", str(derived), "--repeat", "1", *common)
    assert code == 0, err
    report = json.loads((tmp_path / "runs" / "validate-derived" / "validity.json").read_text())
    assert report["instances_validated"] == 2 and report["valid_instances"] == 2
    assert {r["empty_status"] for r in report["instances"].values()} == {"NO"}
    assert {s for r in report["instances"].values() for s in r["reference_statuses"]} == {"FULL"}

    # a reference patch that fixes nothing: refused with the evidence, exit 2, no OUT
    lone, lone_out = tmp_path / "refactor.jsonl", tmp_path / "refactor-derived.jsonl"
    assert _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}", shas["refactor"],
                    "--out", str(lone))[0] == 0
    code, out, err = _harness(capsys, "instances", "derive", "--instances", str(lone), "--out", str(lone_out),
                              "--repeat", "1", *common)
    assert code == 2
    refused = err.strip().splitlines()
    assert len(refused) == 1 and refused[0].startswith("harness: refused:")
    assert "the reference patch fixes no test" in refused[0]
    assert "of the 1 tests run with it, 1 pass and 0 fail with and without it" in refused[0]  # the evidence
    assert not lone_out.exists()
    assert json.loads((tmp_path / "refactor-derived.jsonl.derivation.json").read_text())["refused"] == 1

    # an environment that does not build: validate exits 2 naming it (it exited 0)
    broken = tmp_path / "broken-specs"
    broken.mkdir()
    (broken / "own__tinyunits.yaml").write_text(
        (specs / "own__tinyunits.yaml").read_text().replace(
            "install: python -m pip install --no-build-isolation --no-deps -e .", "install: exit 3"))
    code, out, err = _harness(capsys, "validate", "--instances", str(derived), "--repeat", "1", "--run-id",
                              "validate-broken", *(a if a != str(specs) else str(broken) for a in common))
    assert code == 2 and "failed to build" in err.splitlines()[-1]


@pytest.mark.parametrize("case", ["absent", "no-tests", "no-code"])
def test_a_commit_that_cannot_make_a_record_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys, case):
    repo, shas = _library(tmp_path)
    out = tmp_path / "records.jsonl"
    commit = {"absent": "0" * 40, "no-tests": shas["docs"], "no-code": shas["tests_only"]}[case]
    code, stdout, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}",
                                 shas["case"], commit, "--out", str(out))
    assert code == 2 and not out.exists() and stdout == ""
    assert len(err.strip().splitlines()) == 1
    assert {"absent": "names no commit", "no-tests": "changes no test file",
            "no-code": "changes only test files"}[case] in err
    # in a range, such a commit is skipped and said, the others still make records
    code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}",
                            f"{shas['format']}..{shas['docs']}", "--out", str(out))
    assert code == 0 and len(_lines(out)) == 1 and f"skipped {shas['docs'][:12]}: changes no test file" in err


def test_a_tree_whose_build_backend_cannot_be_inferred_is_refused(tmp_path, capsys):
    repo = tmp_path / "script"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    sha = _commit(repo, "a script", {"tool.py": "print(1)\n", "tests/test_tool.py": "def test_x():\n    pass\n",
                                     "pyproject.toml": "[tool.black]\nline-length = 100\n"})
    out = tmp_path / "specs"
    code, stdout, err = _harness(capsys, "specs", "init", "--repo", f"own/script={repo}", "--commit", sha,
                                 "--version", "1.0", "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "build backend cannot be inferred" in err
    assert not (out / "own__script.yaml").exists()


def test_validate_exits_2_when_every_record_is_refused(tmp_path, cache_dir, capsys):
    record = json.loads((DEMO_DIR / "instances.jsonl").read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**record, "base_commit": "not-a-commit"}) + "\n")
    code, out, err = _harness(capsys, "validate", "--instances", str(bad), "--repeat", "1", "--output-dir",
                              str(tmp_path / "runs"), "--cache-dir", str(cache_dir), "--quiet")
    assert code == 2 and "every record was refused" in err.splitlines()[-1]


def test_a_pull_requests_merge_commit_stands_for_the_request_and_since_filters(tmp_path, capsys):
    repo, shas = _library(tmp_path)
    mainline = git(repo, "rev-parse", "main").strip()
    git(repo, "checkout", "-q", "-b", "feature", shas["format"])
    _commit(repo, "kibibytes", {"tinyunits/binary.py": "def kib(size):\n    return size / 1024\n"})
    _commit(repo, "test it", {"tests/test_binary.py": "from tinyunits.binary import kib\n\n\ndef test_kib():\n"
                                                      "    assert kib(2048) == 2\n"})
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "feature", "-m", "Merge pull request #7 from someone/bytes\n\nBytes too")
    merge = git(repo, "rev-parse", "HEAD").strip()
    out = tmp_path / "records.jsonl"
    code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}",
                            f"{mainline}..{merge}", "--out", str(out))
    assert code == 0, err
    (record,) = _lines(out)  # the request's own commits are not walked: first parents only
    assert record["instance_id"] == "own__tinyunits-7" and record["base_commit"] == mainline
    assert "tests/test_binary.py" in record["test_patch"] and "tinyunits/binary.py" in record["patch"]
    assert record["problem_statement"].startswith("Merge pull request #7")
    future = "2999-01-01"
    code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}",
                            f"{shas['release']}..{merge}", "--since", future, "--out", str(tmp_path / "none.jsonl"))
    assert code == 2 and "before --since" in err and not (tmp_path / "none.jsonl").exists()


def test_reading_commits_runs_nothing_a_repository_configures_and_opens_what_git_opens(tmp_path, capsys):
    repo, shas = _library(tmp_path)
    marker = tmp_path / "ran"
    (repo / ".git" / "config").write_text((repo / ".git" / "config").read_text() + (
        f'[diff]\n\texternal = touch {marker}-external\n[diff "evil"]\n\ttextconv = touch {marker}-textconv\n'
        f'[core]\n\tfsmonitor = touch {marker}-fsmonitor\n\tpager = touch {marker}-pager\n'))
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("*.py diff=evil\n")
    out = tmp_path / "records.jsonl"
    code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={repo}", shas["case"],
                            "--out", str(out))
    assert code == 0, err
    assert not list(tmp_path.glob("ran*")), "a command the repository configures ran"
    assert "+def test_parse_lowercase_unit" in _lines(out)[0]["test_patch"]
    # a bare copy that lost its empty refs/ and has no config: git opens it (through a view), so do we
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(bare, "pack-refs", "--all")
    for path in sorted(bare.joinpath("refs").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    bare.joinpath("refs").rmdir()
    bare.joinpath("config").unlink()
    code, _, err = _harness(capsys, "instances", "from-commits", "--repo", f"own/tinyunits={bare}", "v0.3.0..main",
                            "--out", str(out))
    assert code == 0, err
    assert len(_lines(out)) == 3  # case, format, refactor; docs (no tests) and more tests (no code) skipped
