"""A user's spec file is a layer over the project's, per version and field by field
(harness.inputs.spec_layers), and ``harness specs show`` / ``list`` print the result with where
each field came from."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.errors import InputError, UnknownNameError
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.spec_commands import spec_values

PROJECT = """
    repo: o/r
    defaults:
      python: "3.9"
      requirements: [attrs==23.1.0]
      test_cmd: "pytest -rA"
      timeout: 600
      env: {A: "1"}
    versions:
      "1.0":
        requirements: [attrs==23.1.0, pluggy==0.13.1]
        env: {B: "2"}
      "2.0":
        python: "3.11"
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(textwrap.dedent(text).lstrip())
    return directory


@pytest.fixture
def project(tmp_path) -> Path:
    return write(tmp_path / "project", "o__r.yaml", PROJECT)


def test_a_user_file_with_one_new_version_adds_it_and_leaves_the_others(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", """
        repo: o/r
        versions:
          "3.0": {requirements: [exceptiongroup==1.1.3]}
    """)
    alone, layered = SpecRegistry.load(project), SpecRegistry.load(project, user)
    with pytest.raises(UnknownNameError):
        alone.get("o/r", "3.0")
    added = layered.get("o/r", "3.0")
    assert added.requirements == ("exceptiongroup==1.1.3",)
    assert (added.python, added.timeout, added.env_dict) == ("3.9", 600, {"A": "1"})  # the project's defaults
    for version in ("1.0", "2.0"):
        assert layered.get("o/r", version) == alone.get("o/r", version)
        assert layered.get("o/r", version).checksum() == alone.get("o/r", version).checksum()


def test_a_user_entry_for_a_project_version_overrides_only_the_fields_it_names(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", """
        repo: o/r
        versions:
          "1.0": {timeout: 60, env: {B: "two", C: "3"}}
    """)
    spec = SpecRegistry.load(project, user).get("o/r", "1.0")
    assert spec.timeout == 60                                              # the user's
    assert spec.requirements == ("attrs==23.1.0", "pluggy==0.13.1")        # the project's version entry
    assert spec.python == "3.9"                                            # the project's defaults
    assert spec.env_dict == {"A": "1", "B": "two", "C": "3"}               # merged key by key


def test_extending_a_list_in_a_user_file_extends_the_project_list(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", """
        repo: o/r
        defaults: {"requirements+": [iniconfig==2.0.0]}
        versions:
          "1.0": {"requirements+": [toml==0.10.2]}
    """)
    registry = SpecRegistry.load(project, user)
    assert registry.get("o/r", "1.0").requirements == (
        "attrs==23.1.0", "pluggy==0.13.1", "iniconfig==2.0.0", "toml==0.10.2")
    # a user's defaults go over every version, the project's version entries included
    assert registry.get("o/r", "2.0").requirements == ("attrs==23.1.0", "iniconfig==2.0.0")


def test_a_user_default_overrides_a_project_version_field(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", 'repo: o/r\ndefaults: {python: "3.10"}\n')
    registry = SpecRegistry.load(project, user)
    assert registry.get("o/r", "2.0").python == "3.10"
    assert "user file" in registry.resolve("o/r", "2.0").describe("python")


def test_extending_in_a_repositorys_first_file_defaults_is_refused_with_the_reason(tmp_path):
    d = write(tmp_path / "only", "o__r.yaml", 'repo: o/r\ndefaults: {"requirements+": [a]}\nversions: {"1": {}}\n')
    with pytest.raises(InputError, match="nothing to extend") as info:
        SpecRegistry.load(d)
    assert info.value.field == "defaults.requirements+"


def test_the_fallback_entry_stands_in_only_for_versions_no_file_lists(tmp_path):
    project = write(tmp_path / "project", "o__r.yaml", """
        repo: o/r
        versions:
          "1.0": {timeout: 10}
          "*": {timeout: 99}
    """)
    user = write(tmp_path / "user", "o__r.yaml", 'repo: o/r\nversions: {"2.0": {python: "3.11"}}\n')
    registry = SpecRegistry.load(project, user)
    assert registry.get("o/r", "2.0").timeout == 1800       # listed by the user: the project's "*" is not used
    assert registry.get("o/r", "5.0").timeout == 99         # listed by no file: "*"
    assert registry.get("o/r", "1.0").timeout == 10


def test_an_empty_user_version_entry_takes_everything_from_below(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", 'repo: o/r\nversions:\n  "4.0":\n')
    spec = SpecRegistry.load(project, user).get("o/r", "4.0")
    assert (spec.python, spec.requirements) == ("3.9", ("attrs==23.1.0",))


def test_an_unknown_version_names_every_files_versions_and_the_way_to_add_one(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", 'repo: o/r\nversions: {"3.0": {}}\n')
    with pytest.raises(UnknownNameError) as info:
        SpecRegistry.load(project, user).get("o/r", "9.9")
    message = str(info.value)
    assert "1.0, 2.0, 3.0" in message and "--specs DIR" in message and "o__r.yaml" in message


def test_origins_name_the_file_and_section_of_every_field(project, tmp_path):
    user = write(tmp_path / "user", "o__r.yaml", """
        repo: o/r
        versions:
          "1.0": {timeout: 60, env: {C: "3"}, "requirements+": [toml==0.10.2]}
    """)
    resolved = SpecRegistry.load(project, user).resolve("o/r", "1.0")
    project_file, user_file = str(project / "o__r.yaml"), str(user / "o__r.yaml")
    assert resolved.describe("timeout") == f"user file {user_file}: versions.1.0"
    assert resolved.describe("python") == f"project file {project_file}: defaults"
    assert resolved.describe("env.A") == f"project file {project_file}: defaults"
    assert resolved.describe("env.B") == f"project file {project_file}: versions.1.0"
    assert resolved.describe("env.C") == f"user file {user_file}: versions.1.0"
    assert resolved.describe("requirements") == (f"project file {project_file}: versions.1.0, extended by "
                                                 f"user file {user_file}: versions.1.0")
    assert resolved.describe("compiler") == "harness default"
    assert [str(o) for o in resolved.sections] == [f"project file {project_file}: defaults",
                                                   f"project file {project_file}: versions.1.0",
                                                   f"user file {user_file}: versions.1.0"]


def test_the_projects_own_directory_is_labelled_project():
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    files = registry.files("pytest-dev/pytest")
    assert len(files) == 1 and files[0].project and files[0].kind == "project file"


# --------------------------------------------------------------------------- the CLI

USER_PYTEST = """
    repo: pytest-dev/pytest
    versions:
      "7.9":
        requirements: [attrs==23.1.0, exceptiongroup==1.1.3]
        env: {SETUPTOOLS_SCM_PRETEND_VERSION: "7.9.0.dev1"}
"""


def test_specs_show_prints_the_resolved_spec_with_each_fields_file(tmp_path, capsys):
    user = write(tmp_path / "user", "pytest-dev__pytest.yaml", USER_PYTEST)
    assert main(["specs", "show", "pytest-dev/pytest", "7.9", "--specs", str(user)]) == 0
    out = capsys.readouterr().out
    expected = SpecRegistry.load(DEFAULT_SPECS_DIR, user).get("pytest-dev/pytest", "7.9")
    printed = yaml.safe_load(out)
    assert printed.pop("repo") == "pytest-dev/pytest" and printed.pop("version") == "7.9"
    assert printed == spec_values(expected)                       # the YAML is the spec a run builds
    lines = out.splitlines()
    project_file = str(DEFAULT_SPECS_DIR / "pytest-dev__pytest.yaml")
    assert f"#   [1] project file {project_file}" in lines
    assert f"#   [2] user file {user / 'pytest-dev__pytest.yaml'}" in lines
    assert lines[lines.index("requirements:") - 1] == "# [2] versions.7.9"
    assert lines[lines.index("python: '3.9'") - 1] == "# [1] defaults"
    assert lines[lines.index("  SETUPTOOLS_SCM_PRETEND_VERSION: 7.9.0.dev1") - 1] == "  # [2] versions.7.9"
    assert lines[lines.index("compiler: none") - 1] == "# harness default"
    assert f"# checksum {expected.checksum()}" in lines


def test_specs_show_json_and_an_unknown_version(tmp_path, capsys):
    user = write(tmp_path / "user", "pytest-dev__pytest.yaml", USER_PYTEST)
    assert main(["specs", "show", "pytest-dev/pytest", "7.9", "--specs", str(user), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fields"]["requirements"]["from"] == f"user file {user / 'pytest-dev__pytest.yaml'}: versions.7.9"
    assert data["fields"]["env"]["from"] == {"SETUPTOOLS_SCM_PRETEND_VERSION":
                                             f"user file {user / 'pytest-dev__pytest.yaml'}: versions.7.9"}
    assert main(["specs", "show", "pytest-dev/pytest", "7.9"]) == 2   # without the user's file: no 7.9
    assert "no version '7.9'" in capsys.readouterr().err


def test_specs_list_names_the_files_listing_each_version(tmp_path, capsys):
    user = write(tmp_path / "user", "pytest-dev__pytest.yaml",
                 USER_PYTEST + '      "8.0": {timeout: 60}\n')
    assert main(["specs", "list", "--specs", str(user)]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("pytest-dev/pytest")
    block = out[start:start + 20]
    assert f"  [2] user file {user / 'pytest-dev__pytest.yaml'}" in block
    assert any(line.split() == ["7.9", "[2]"] for line in block)
    assert any(line.split()[:3] == ["8.0", "[1]", "[2]"] and "field by field" in line for line in block)
    assert any(line.split() == ["4.4", "[1]"] for line in block)
