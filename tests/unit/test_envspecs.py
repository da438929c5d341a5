"""Environment fields of specs (issue 10): shared lists extended per version, YAML anchors,
interpreter sources, installer pins, build requirements, compilers, re-install rules; and
the project's specs against SWE-bench v4.1.0's Python pins."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry


def load(tmp_path, text: str) -> SpecRegistry:
    d = tmp_path / "specs"
    d.mkdir(parents=True, exist_ok=True)
    (d / "s.yaml").write_text(textwrap.dedent(text).lstrip())
    return SpecRegistry.load(d)


def test_versions_extend_a_shared_list_and_anchors_splice_into_lists(tmp_path):
    reg = load(tmp_path, """
        repo: o/r
        x-anchors:
          common: &common [attrs==23.1.0, six==1.16.0]
        defaults:
          requirements: [*common, pytest==7.4.0]
          pre_install: ["echo one"]
        versions:
          "1.0": {requirements+: [numpy==1.25.2], pre_install+: "echo two"}
          "2.0": {requirements: [*common]}
          "3.0": {}
    """)
    assert reg.get("o/r", "1.0").requirements == ("attrs==23.1.0", "six==1.16.0", "pytest==7.4.0", "numpy==1.25.2")
    assert reg.get("o/r", "1.0").pre_install == ("echo one", "echo two")
    assert reg.get("o/r", "2.0").requirements == ("attrs==23.1.0", "six==1.16.0")
    assert reg.get("o/r", "3.0").requirements == ("attrs==23.1.0", "six==1.16.0", "pytest==7.4.0")


def test_extension_is_for_list_fields_in_versions_only(tmp_path):
    with pytest.raises(InputError, match="timeout\\+"):
        load(tmp_path, 'repo: o/r\nversions: {"1": {timeout+: 5}}\n')
    with pytest.raises(InputError, match="requirements\\+"):
        load(tmp_path, 'repo: o/r\ndefaults: {requirements+: [a]}\nversions: {"1": {}}\n')


def test_environment_fields_parse(tmp_path):
    reg = load(tmp_path, """
        repo: o/r
        defaults:
          python: "3.8"
          interpreter: {image: "python:3.8-slim-bookworm", suite: bookworm}
          installer: [pip==21.3.1, setuptools==59.6.0, wheel==0.37.1]
          build_requires: []
          install_extras: [test]
          compiler: keep
          install: "pip install -e ."
          reinstall_timeout: 120
          submodules: {astropy_helpers: astropy/astropy-helpers}
          resolve_as_of: "2024-11-01"
        versions: {"1": {}}
    """)
    spec = reg.get("o/r", "1")
    assert dict(spec.interpreter) == {"image": "python:3.8-slim-bookworm", "suite": "bookworm"}
    assert spec.installer == ("pip==21.3.1", "setuptools==59.6.0", "wheel==0.37.1")
    assert spec.build_requires == () and spec.install_extras == ("test",) and spec.compiler == "keep"
    assert spec.submodules == (("astropy_helpers", "astropy/astropy-helpers"),)
    assert (spec.reinstall_command, spec.reinstall_timeout, spec.resolve_as_of) == ("pip install -e .", 120,
                                                                                   "2024-11-01")


def test_build_requires_absent_means_read_from_the_tree(tmp_path):
    assert load(tmp_path, 'repo: o/r\nversions: {"1": {}}\n').get("o/r", "1").build_requires is None


@pytest.mark.parametrize("mode, touched, expected", [
    ("auto", ["pkg/module.py"], False),
    ("auto", ["pkg/_fast.pyx"], True),
    ("auto", ["cextern/lib/include/x.h"], True),
    ("never", ["pkg/_fast.c"], False),
    ("always", ["README.rst"], True),
])
def test_reinstall_runs_when_a_compiled_source_is_touched(tmp_path, mode, touched, expected):
    value = {"auto": '"auto"', "never": "false", "always": "true"}[mode]
    spec = load(tmp_path, f'repo: o/r\ndefaults: {{install: "python setup.py build_ext --inplace", '
                          f'rebuild_in_place: true, reinstall_after_patch: {value}}}\nversions: {{"1": {{}}}}\n'
                ).get("o/r", "1")
    assert spec.reinstall_needed(touched) is expected


def test_no_reinstall_without_an_install_command(tmp_path):
    spec = load(tmp_path, 'repo: o/r\ndefaults: {reinstall_after_patch: true, rebuild_in_place: true}\n'
                          'versions: {"1": {}}\n').get("o/r", "1")
    assert spec.reinstall_needed(["x.c"]) is False


def test_a_reinstall_after_every_patch_needs_an_environment_that_rebuilds_in_place(tmp_path):
    # the sandbox's environment is read-only: `always` with a re-install into site-packages could never run
    with pytest.raises(InputError, match="reinstall_after_patch.*rebuild_in_place: true"):
        load(tmp_path, 'repo: o/r\ndefaults: {install: "pip install .", reinstall_after_patch: true}\n'
                       'versions: {"1": {}}\n').get("o/r", "1")
    with pytest.raises(InputError, match="rebuild_in_place.*true or false"):
        load(tmp_path, 'repo: o/r\ndefaults: {rebuild_in_place: "yes"}\nversions: {"1": {}}\n').get("o/r", "1")


# ------------------------------------------------------------------ the project's specs

#: SWE-bench v4.1.0 swebench/harness/constants/python.py: the Python of every Lite version
#: (and of the Verified versions whose Python a base provides).
SWE_BENCH_PYTHON = {
    "sphinx-doc/sphinx": {v: "3.9" for v in ("3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0", "4.1", "4.2", "4.3", "5.0",
                                              "5.1", "5.2", "7.1", "7.2")},
    "astropy/astropy": {"1.3": "3.6", "3.1": "3.9", "4.3": "3.9", "5.0": "3.9", "5.1": "3.9", "5.2": "3.9"},
    "pydata/xarray": {"0.12": "3.10", "2022.03": "3.10", "2022.06": "3.10", "2022.09": "3.10"},
    "mwaskom/seaborn": {"0.12": "3.9", "0.13": "3.9"},
    "pylint-dev/pylint": {v: "3.9" for v in ("2.9", "2.10", "2.13", "2.14", "2.15", "3.0")},
    "pytest-dev/pytest": {v: "3.9" for v in ("4.4", "4.5", "4.6", "5.0", "5.1", "5.2", "5.4", "6.0", "6.2", "6.3", "7.0",
                                              "7.2", "8.0")},
    "psf/requests": {v: "3.9" for v in ("0.14", "1.1", "2.0", "2.3", "2.4", "2.7", "2.9", "2.10", "2.26", "2.27")},
    "pallets/flask": {"2.0": "3.9", "2.3": "3.11"},
    "scikit-learn/scikit-learn": {"0.20": "3.6", "0.21": "3.6", "0.22": "3.6", "1.3": "3.9"},
    # 1.11 and 2.2 are pinned to 3.5, which no base provides (3.6 here, images/specs/django__django.yaml)
    "django/django": {"3.0": "3.6", "3.1": "3.6", "3.2": "3.6", "4.0": "3.8", "4.1": "3.9", "4.2": "3.9", "5.0": "3.11"},
    "matplotlib/matplotlib": {"3.0": "3.7", "3.1": "3.8", "3.3": "3.8", "3.4": "3.8", "3.5": "3.11", "3.6": "3.11",
                              "3.7": "3.11"},
}


@pytest.mark.parametrize("repo", sorted(SWE_BENCH_PYTHON))
def test_specs_use_the_python_swe_bench_pins(repo):
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    for version, python in SWE_BENCH_PYTHON[repo].items():
        assert registry.get(repo, version).python == python, (repo, version)


def test_every_python_a_spec_names_has_an_interpreter_source_and_installer_pins():
    from harness.engine.layers import BaseDefinition
    bases = BaseDefinition.load()
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    for repo, versions in SWE_BENCH_PYTHON.items():
        for version in versions:
            spec = registry.get(repo, version)
            assert bases.source_for(spec.python, dict(spec.interpreter) or None)
            assert spec.installer or bases.installer_for(spec.python)


def test_downloads_are_checked_data(tmp_path):
    digest = "0" * 64
    spec = load(tmp_path, f"""
        repo: o/r
        defaults:
          downloads: [{{url: "https://files.example/x.tar.gz", sha256: "{digest}", to: /tmp/.cache/x/{digest}}}]
        versions: {{"1": {{}}}}
    """).get("o/r", "1")
    assert spec.downloads == (("https://files.example/x.tar.gz", digest, f"/tmp/.cache/x/{digest}"),)
    for bad, field in ((f'{{url: "ftp://x", sha256: "{digest}", to: /tmp/x}}', "downloads[0].url"),
                       ('{url: "https://x", sha256: "abc", to: /tmp/x}', "downloads[0].sha256"),
                       (f'{{url: "https://x", sha256: "{digest}", to: relative}}', "downloads[0].to"),
                       ('{url: "https://x"}', "downloads[0]")):
        with pytest.raises(InputError) as info:
            load(tmp_path / field.replace("[", "").replace("]", "").replace(".", ""),
                 f'repo: o/r\ndefaults: {{downloads: [{bad}]}}\nversions: {{"1": {{}}}}\n').get("o/r", "1")
        assert info.value.field == field


def test_build_inputs_decide_whether_a_further_instance_can_reuse_an_earlier_build():
    from harness.engine.instance_reuse import is_build_input
    from harness.inputs.specs import DEFAULT_COMPILED_SOURCES
    for path in ("setup.py", "setup.cfg", "pyproject.toml", "astropy/wcs/setup_package.py", "cextern/wcslib/C/prj.c",
                 "astropy/stats/_stats.pyx", "pylint/__pkginfo__.py", "requirements_test.txt", "src/_path.h"):
        assert is_build_input(path, DEFAULT_COMPILED_SOURCES), path
    for path in ("pylint/checkers/base.py", "tests/test_self.py", "docs/index.rst", "README.md", "tox.ini"):
        assert not is_build_input(path, DEFAULT_COMPILED_SOURCES), path


# ------------------------------------------------------------------ a failed rebuild's detail

def test_a_failed_rebuild_names_the_compiler_error_even_when_warnings_follow_it():
    from harness.errors import build_failure_excerpt
    # matplotlib 3.3's rebuild: g++'s error, then setuptools' deprecation text, then the exit line
    noise = "".join(f"        ********** deprecation notice line {n} **********\n" for n in range(60))
    output = ("building 'matplotlib.ft2font' extension\ng++ -c src/ft2font.cpp -o build/ft2font.o\n"
              "src/ft2font.cpp:826:1: error: expected unqualified-id before 'this'\n"
              f"{noise}error: command '/usr/bin/g++' failed with exit code 1\n")
    excerpt = build_failure_excerpt(output, limit=1500)
    assert len(excerpt) <= 1500
    assert excerpt.startswith("src/ft2font.cpp:826:1: error: expected unqualified-id before 'this'\n[...]\n")
    assert excerpt.endswith("error: command '/usr/bin/g++' failed with exit code 1\n")
    # an error already in the end is not repeated; output without error lines is just its end
    short = "gcc -c x.c\nx.c:3:1: error: expected ';'\n"
    assert build_failure_excerpt(short) == short
    assert build_failure_excerpt("a" * 3000, limit=100) == "a" * 100
    # scikit-learn 0.21's rebuild of a broken .pyx: Cython's located message, then numpy.distutils' traceback
    cython = ("Error compiling Cython file:\n---\ncdef this is not Cython\n         ^\n---\n\n"
              "sklearn/utils/murmurhash.pyx:134:10: Syntax error in C variable declaration\n"
              + "  File \"setup.py\", line 290, in <module>\n" * 60
              + "Cython.Compiler.Errors.CompileError: sklearn/utils/murmurhash.pyx\n")
    assert build_failure_excerpt(cython, limit=600).startswith(
        "sklearn/utils/murmurhash.pyx:134:10: Syntax error in C variable declaration\n[...]\n")


VERIFIED = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "swebench_verified_versions.json")
                      .read_text())["versions"]


@pytest.mark.parametrize("repo", sorted(VERIFIED))
def test_every_verified_version_has_a_spec_whose_convention_is_the_records_log_parser(repo):
    from harness.grading.conventions import convention_for_swebench_parser, get_convention
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    for version, facts in VERIFIED[repo].items():
        assert version in registry.versions(repo), (repo, version)   # listed, not the '*' fallback
        spec = registry.get(repo, version)
        expected = convention_for_swebench_parser(facts["log_parser"])
        assert expected is not None, facts["log_parser"]
        assert get_convention(spec.id_convention).to_dataset is get_convention(expected).to_dataset, \
            (repo, version, spec.id_convention, facts["log_parser"])
