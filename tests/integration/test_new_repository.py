"""A repository the project has never seen, added by one spec file and nothing else: a
small git repository made here, a spec YAML passed with --specs, Python 3.13 (Debian
trixie, a base the other tests do not use)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.engine.client import run_once
from tests.gitrepo import git as _git

SPEC = """\
repo: example/tinyparse
defaults:
  python: "3.13"
  requirements: ["pytest==8.3.4"]
  install: "python -m pip install --no-build-isolation --no-deps -e ."
  install_requires_from_tree: true
  test_cmd: "pytest -rA -p no:cacheprovider"
  parser: pytest
  env: {PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1"}
  setup_files: {"build/notes/from-spec.txt": "written by the spec's setup_files\\n"}
versions:
  "0.1": {}
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyparse"
version = "0.1"
"""

BUGGY = "def parse_pair(text):\n    key, value = text.split('=')\n    return key, value\n"
FIXED = "def parse_pair(text):\n    key, value = text.split('=', 1)\n    return key.strip(), value.strip()\n"
TESTS = "from tinyparse import parse_pair\n\n\ndef test_simple():\n    assert parse_pair('a=b') == ('a', 'b')\n"
NEW_TESTS = TESTS + ("\n\ndef test_value_with_equals():\n    assert parse_pair('a=b=c') == ('a', 'b=c')\n"
                     "\n\ndef test_spaces():\n    assert parse_pair(' a = b ') == ('a', 'b')\n")


def _make_repo(root: Path) -> tuple[Path, dict]:
    repo = root / "tinyparse"
    (repo / "tinyparse").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "tinyparse" / "__init__.py").write_text(BUGGY)
    (repo / "tests" / "test_parse.py").write_text(TESTS)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "tinyparse" / "__init__.py").write_text(FIXED)
    (repo / "tests" / "test_parse.py").write_text(NEW_TESTS)
    patch = _git(repo, "diff", "--", "tinyparse")
    test_patch = _git(repo, "diff", "--", "tests")
    _git(repo, "commit", "-qam", "fix")
    record = {"instance_id": "example__tinyparse-1", "repo": "example/tinyparse", "base_commit": base,
              "patch": patch, "test_patch": test_patch, "version": "0.1",
              "FAIL_TO_PASS": ["tests/test_parse.py::test_value_with_equals", "tests/test_parse.py::test_spaces"],
              "PASS_TO_PASS": ["tests/test_parse.py::test_simple"]}
    return repo, record


def test_a_new_repository_needs_only_a_spec_file(tmp_path, harness_run, engine):
    repo, record = _make_repo(tmp_path)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "example__tinyparse.yaml").write_text(SPEC)
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([record]))
    common = ("--instances", str(instances), "--specs", str(specs), "--repo", f"example/tinyparse={repo}",
              "--no-clone")
    gold = harness_run(*common, "--predictions", "gold", run_id="tiny-gold")
    empty = harness_run(*common, "--predictions", "empty", run_id="tiny-empty")
    assert gold.report("example__tinyparse-1")["status"] == "FULL"
    assert empty.report("example__tinyparse-1")["status"] == "NO"
    report = gold.report("example__tinyparse-1")
    assert report["image"]["env_tag"].startswith("harness-env:py3.13-")
    written = run_once(engine, report["image"]["tag"], ["cat", "/opt/harness/testbed/build/notes/from-spec.txt"])
    assert written == b"written by the spec's setup_files\n"
    python = [c for c in report["commands"] if c["phase"] == "tests"][0]["output_tail"]
    assert "Python 3.13" in python or "python3.13" in (gold.root / "example__tinyparse-1" / "test_output.txt").read_text()
