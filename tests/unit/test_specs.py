"""Environment specs (harness.inputs.specs), including the project's own images/specs/."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from harness.errors import InputError, UnknownNameError
from harness.grading.parsers import PARSERS
from harness.inputs.specs import DEFAULT_SPECS_DIR, EnvSpec, SpecRegistry


def spec_dir(tmp_path: Path, *texts: str, name: str = "specs") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    for i, text in enumerate(texts):
        (d / f"s{i}.yaml").write_text(textwrap.dedent(text).lstrip())
    return d


FLASKISH = """
    repo: pallets/flask
    defaults:
      python: "3.11"
      requirements: ["pytest==7.4.4"]
      install: "pip install -e ."
      test_cmd: "pytest -rA"
      parser: pytest
      timeout: 600
      env: {A: "1", B: "2"}
    versions:
      "2.3":
        requirements: ["pytest==7.4.4", "werkzeug==2.3.7"]
        env: {B: "two", C: "3"}
      "2.0":
        python: "3.9"
        timeout: 60
"""


@pytest.fixture
def registry(tmp_path) -> SpecRegistry:
    return SpecRegistry.load(spec_dir(tmp_path, FLASKISH))


# --------------------------------------------------------------------------- merging

def test_defaults_merged_under_versions(registry):
    spec = registry.get("pallets/flask", "2.3")
    assert spec.repo == "pallets/flask" and spec.version == "2.3"
    assert spec.requirements == ("pytest==7.4.4", "werkzeug==2.3.7")  # version overrides
    assert spec.python == "3.11" and spec.install == "pip install -e ." and spec.timeout == 600


def test_env_dicts_are_merged_key_by_key(registry):
    assert registry.get("pallets/flask", "2.3").env_dict == {"A": "1", "B": "two", "C": "3"}
    assert registry.get("pallets/flask", "2.0").env_dict == {"A": "1", "B": "2"}


def test_scalar_overrides(registry):
    spec = registry.get("pallets/flask", "2.0")
    assert (spec.python, spec.timeout) == ("3.9", 60)
    assert spec.requirements == ("pytest==7.4.4",)


def test_unset_fields_take_envspec_defaults(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, 'repo: o/r\nversions: {"1": {}}\n'))
    spec = reg.get("o/r", "1")
    assert spec == EnvSpec(repo="o/r", version="1")


def test_star_is_the_fallback_version(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, """
        repo: o/r
        defaults: {python: "3.10"}
        versions:
          "1.0": {python: "3.8"}
          "*": {python: "3.12"}
    """))
    assert reg.get("o/r", "1.0").python == "3.8"
    fallback = reg.get("o/r", "9.9")
    assert fallback.python == "3.12" and fallback.version == "9.9"


def test_numeric_instance_version_is_looked_up_as_a_string(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, 'repo: o/r\nversions: {"2": {timeout: 5}, 3: {timeout: 7}}\n'))
    assert reg.get("o/r", 2).timeout == 5  # type: ignore[arg-type]
    assert reg.get("o/r", "3").timeout == 7


def test_later_dirs_override_earlier(tmp_path):
    first = spec_dir(tmp_path, 'repo: o/r\nversions: {"1": {timeout: 10}}\n', name="a")
    second = spec_dir(tmp_path, 'repo: o/r\nversions: {"1": {timeout: 20}}\n', name="b")
    assert SpecRegistry.load(first, second).get("o/r", "1").timeout == 20
    assert SpecRegistry.load(second, first).get("o/r", "1").timeout == 10


def test_yml_suffix_and_repos_listing(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "x.yml").write_text('repo: a/x\nversions: {"*": {}}\n')
    (d / "y.yaml").write_text('repo: b/y\nversions: {"*": {}}\n')
    (d / "ignored.txt").write_text("repo: c/z\n")
    assert SpecRegistry.load(d).repos == ["a/x", "b/y"]


def test_string_lists_accept_a_single_string(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, 'repo: o/r\nversions: {"1": {apt_packages: git}}\n'))
    assert reg.get("o/r", "1").apt_packages == ("git",)


def test_checksum_differs_between_versions(registry):
    a, b = registry.get("pallets/flask", "2.3"), registry.get("pallets/flask", "2.0")
    assert a.checksum() == registry.get("pallets/flask", "2.3").checksum()
    assert a.checksum() != b.checksum()


SERVICE_SPEC = """repo: o/r
defaults:
  services:
    - name: httpbin
      requirements: [httpbin==0.10.2]
      command: gunicorn -b 127.0.0.1:80 httpbin:app
      ready: ["127.0.0.1:80"]
      hosts: [httpbin.org]
    - name: tarpit
      command: python3 -c pass
      setup: ["ip addr add 10.255.255.1/32 dev lo"]
      net_admin: true
versions: {"1": {}}
"""


def test_services_are_parsed_into_typed_specs(tmp_path):
    spec = SpecRegistry.load(spec_dir(tmp_path, SERVICE_SPEC)).get("o/r", "1")
    httpbin, tarpit = spec.services
    assert httpbin.name == "httpbin" and httpbin.requirements == ("httpbin==0.10.2",)
    assert httpbin.ready == ("127.0.0.1:80",) and httpbin.venv == "/opt/harness/services/httpbin/venv"
    assert spec.service_hosts == {"httpbin.org": "127.0.0.1"}
    assert spec.needs_net_admin and tarpit.net_admin and not httpbin.net_admin


@pytest.mark.parametrize("bad, field", [
    ("    - name: Bad Name\n      command: x\n", "services[0].name"),
    ("    - name: a\n", "services[0].command"),
    ("    - name: a\n      command: x\n      ready: [localhost]\n", "services[0].ready"),
    ("    - name: a\n      command: x\n      net_admin: yes please\n", "services[0].net_admin"),
    ("    - name: a\n      command: x\n      comand: y\n", "services[0].comand"),
])
def test_bad_services_name_the_field(tmp_path, bad, field):
    text = "repo: o/r\ndefaults:\n  services:\n" + bad + 'versions: {"1": {}}\n'
    with pytest.raises(InputError) as info:
        SpecRegistry.load(spec_dir(tmp_path, text)).get("o/r", "1")
    assert field in str(info.value)


# --------------------------------------------------------------------------- unknown names

def test_unknown_repo_suggests_close_names(registry):
    with pytest.raises(UnknownNameError) as info:
        registry.get("palets/flask", "2.3")
    message = str(info.value)
    assert "pallets/flask" in message and "did you mean" in message
    assert "palets__flask.yaml" in message  # tells the user where to add one
    assert info.value.field == "repo"


def test_unknown_repo_with_nothing_close(registry):
    with pytest.raises(UnknownNameError) as info:
        registry.get("zzz/qqq", "1")
    assert "did you mean" not in str(info.value)


def test_unknown_version_lists_the_versions(registry):
    with pytest.raises(UnknownNameError) as info:
        registry.get("pallets/flask", "2.4")
    message = str(info.value)
    assert "'2.4'" in message and "2.0" in message and "2.3" in message
    assert info.value.field == "version"
    assert isinstance(info.value, KeyError)


# --------------------------------------------------------------------------- malformed files

def _load_error(tmp_path, text: str) -> InputError:
    d = spec_dir(tmp_path, text)
    with pytest.raises(InputError) as info:
        SpecRegistry.load(d).get("o/r", "1")
    return info.value


@pytest.mark.parametrize("where, text, key, suggestion", [
    ("defaults", 'repo: o/r\ndefaults: {pyhton: "3.11"}\nversions: {"1": {}}\n', "defaults.pyhton", "python"),
    ("version", 'repo: o/r\nversions: {"1": {test_cmds: "pytest"}}\n', "versions.1.test_cmds", "test_cmd"),
    ("top level", 'repo: o/r\ndefualts: {python: "3.9"}\nversions: {"1": {}}\n', "defualts", "defaults"),
    ("top level version", 'repo: o/r\nversion: {"1": {}}\n', "version", "versions"),
])
def test_unknown_key_names_file_and_key_with_a_suggestion(tmp_path, where, text, key, suggestion):
    err = _load_error(tmp_path, text)
    assert err.field == key
    assert str(tmp_path / "specs" / "s0.yaml") in str(err)
    assert f"did you mean '{suggestion}'" in str(err)


def test_unknown_key_with_nothing_close(tmp_path):
    err = _load_error(tmp_path, 'repo: o/r\nversions: {"1": {zzzzqqq: 1}}\n')
    assert err.field == "versions.1.zzzzqqq" and "did you mean" not in str(err)


def test_non_string_keys_are_input_errors_not_crashes(tmp_path):
    err = _load_error(tmp_path, 'repo: o/r\ndefaults: {1: a, foo: b}\nversions: {"1": {}}\n')
    assert err.field in ("defaults.1", "defaults.foo")


@pytest.mark.parametrize("text, field", [
    ("- just\n- a list\n", "repo"),
    ("repo: 5\n", "repo"),
    ("defaults: {}\n", "repo"),
    ("repo: o/r\ndefaults: [a]\n", "defaults"),
    ("repo: o/r\nversions: [a]\n", "versions"),
    ('repo: o/r\nversions: {"1": [a]}\n', "versions.1"),
    ("repo: o/r\nversions: {1.10: {}}\n", "versions.1.1"),  # YAML reads 1.10 as the float 1.1
])
def test_malformed_structure(tmp_path, text, field):
    err = _load_error(tmp_path, text)
    assert err.field == field
    assert "s0.yaml" in str(err)


def test_invalid_yaml_names_the_file(tmp_path):
    err = _load_error(tmp_path, "repo: o/r\ndefaults: {python: [unclosed\n")
    assert "invalid YAML" in str(err) and "s0.yaml" in str(err)


def test_specs_dir_must_exist(tmp_path):
    with pytest.raises(InputError) as info:
        SpecRegistry.load(tmp_path / "absent")
    assert info.value.field == "--specs"


@pytest.mark.parametrize("entry, field", [
    ("{timeout: 0}", "timeout"),
    ("{timeout: -5}", "timeout"),
    ("{timeout: '60'}", "timeout"),
    ("{timeout: 1.5}", "timeout"),
    ("{timeout: true}", "timeout"),
    ("{env: [A, B]}", "env"),
    ("{setup_files: [a]}", "setup_files"),
    ("{requirements: {a: 1}}", "requirements"),
    ("{requirements: [pytest, 3]}", "requirements"),
    ("{apt_packages: 7}", "apt_packages"),
    ("{pre_install: [[nested, [deeper]]]}", "pre_install"),   # one level of alias splicing only
    ("{compiler: gcc}", "compiler"),
    ("{reinstall_timeout: 0}", "reinstall_timeout"),
    ("{installer: [pip]}", "installer"),
    ("{interpreter: {conda: \"3.8\"}}", "interpreter"),
    ("{submodules: {helpers: not-a-repo}}", "submodules.helpers"),
    ("{test_directives: all}", "test_directives"),
    ("{services: {db: x}}", "services"),
    ("{install_requires_from_tree: 'no'}", "install_requires_from_tree"),
    ("{reinstall_after_patch: 'false'}", "reinstall_after_patch"),
    ("{reinstall_after_patch: 1}", "reinstall_after_patch"),
    ("{python: 3.10}", "python"),           # would silently become '3.1'
    ("{install: [pip, install, .]}", "install"),
    ("{test_cmd: 5}", "test_cmd"),
    ("{parser: [pytest]}", "parser"),
    ("{canaries: -1}", "canaries"),
    ("{canaries: true}", "canaries"),
    ("{canaries: '2'}", "canaries"),
])
def test_bad_types_name_the_field(tmp_path, entry, field):
    err = _load_error(tmp_path, f'repo: o/r\nversions: {{"1": {entry}}}\n')
    assert err.field == field
    assert err.record == "o/r@1"
    assert "s0.yaml" in str(err)


def test_good_scalar_types(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, """
        repo: o/r
        versions:
          "1":
            install_requires_from_tree: true
            reinstall_after_patch: false
            test_directives: none
            env: {N: 5}
            setup_files: {"setup.cfg": "[x]\\n"}
            services: [{name: db, command: "db-server"}]
    """))
    spec = reg.get("o/r", "1")
    assert spec.install_requires_from_tree is True and spec.reinstall_after_patch == "never"
    assert spec.test_directives == "none"
    assert spec.env_dict == {"N": "5"}
    assert spec.setup_files == (("setup.cfg", "[x]\n"),)
    assert [(svc.name, svc.command) for svc in spec.services] == [("db", "db-server")]


def test_a_spec_turns_canaries_down_or_off_and_only_then_changes_its_checksum(tmp_path):
    reg = SpecRegistry.load(spec_dir(tmp_path, 'repo: o/r\nversions: {"1": {canaries: 0}, "2": {canaries: 1}, "3": {}}\n'))
    assert [reg.get("o/r", v).canaries for v in ("1", "2", "3")] == [0, 1, None]
    # an unset field leaves the checksum every spec had before the field existed
    assert reg.get("o/r", "3").checksum() == EnvSpec(repo="o/r", version="3", source="x").checksum()
    assert reg.get("o/r", "1").checksum() != EnvSpec(repo="o/r", version="1").checksum()


def test_a_bad_default_fails_only_where_it_is_not_overridden(tmp_path):
    d = spec_dir(tmp_path, 'repo: o/r\ndefaults: {timeout: "x"}\nversions: {"1": {}, "2": {timeout: 3}}\n')
    reg = SpecRegistry.load(d)
    with pytest.raises(InputError):
        reg.get("o/r", "1")
    assert reg.get("o/r", "2").timeout == 3  # the version's own value replaces the bad default


# --------------------------------------------------------------------------- the real specs

REAL_SPECS = sorted(DEFAULT_SPECS_DIR.glob("*.y*ml"))


def test_there_are_real_specs():
    assert REAL_SPECS, f"no specs under {DEFAULT_SPECS_DIR}"


@pytest.mark.parametrize("path", REAL_SPECS, ids=[p.name for p in REAL_SPECS])
def test_real_spec_parses_and_names_a_registered_parser(path):
    data = yaml.safe_load(path.read_text())
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    versions = [str(v) for v in data.get("versions", {})]
    assert versions, f"{path.name} lists no versions"
    for version in versions:
        spec = registry.get(data["repo"], "some-unlisted-version" if version == "*" else version)
        assert spec.repo == data["repo"]
        assert spec.parser in PARSERS, f"{path.name}@{version}: parser {spec.parser!r} is not registered"
        assert spec.test_cmd and spec.timeout > 0
        assert isinstance(spec.python, str) and spec.python[0].isdigit()
    assert path.name == data["repo"].replace("/", "__") + path.suffix  # the documented naming


def test_real_spec_file_names_are_unique_per_repo():
    repos = [yaml.safe_load(p.read_text())["repo"] for p in REAL_SPECS]
    assert len(repos) == len(set(repos))
