"""Requirements with origins, tree requirements, resolver and build-failure explanations
(harness.preparation.requirements), interpreter sources (harness.engine.interpreters) and the
wheelhouse's pure helpers."""

from __future__ import annotations

import tarfile
import io

import pytest

from harness.engine.interpreters import prefix_excluded
from harness.errors import InputError
from harness.preparation.requirements import (Req, TargetPython, explain_conflict, failing_package, installer_pins,
                                              needs_building, parse_egg_requires, parse_metadata, tree_requirements)
from harness.inputs.spec_fields import InterpreterSource, parse_interpreter_source
from harness.preparation.index import Target, _wheel_fits, sdist_build_requires
from harness.preparation.wheelhouse import LocalProject


# ------------------------------------------------------------------ installer pins

def test_installer_pins_come_from_the_base_unless_the_spec_pins_them():
    tools = installer_pins(("pip==24.0", "setuptools==69.5.1", "wheel==0.43.0"), ("pip==21.3.1",),
                           ("setuptools==68.0.0", "numpy==1.25.2"), "bases.yaml", "spec.yaml")
    by_name = {t.name: t for t in tools}
    assert by_name["pip"].text == "pip==21.3.1" and "spec installer" in by_name["pip"].origin
    assert by_name["wheel"].text == "wheel==0.43.0" and "bases.yaml" in by_name["wheel"].origin
    # pinned among the spec's requirements: that pin is the one (and builds use it too)
    assert by_name["setuptools"].text == "setuptools==68.0.0" and "spec requirements" in by_name["setuptools"].origin


def test_installer_pins_are_never_silently_missing():
    with pytest.raises(ValueError, match="pip"):
        installer_pins((), ("setuptools==68.0.0", "wheel==0.44.0"), (), "bases.yaml", "spec.yaml")


# ------------------------------------------------------------------ tree requirements

def test_extras_are_evaluated_here_and_other_markers_kept_for_the_resolver():
    requires = ['numpy>=1.20', 'pytest>=7.0; extra == "test"', 'scipy; extra == "all"',
                'tomli; python_version < "3.11"', 'pytest-xdist; extra == "test" and python_version < "3.8"',
                'astropy[recommended]; extra == "all"']
    got = tree_requirements(requires, ("test",), TargetPython("3.9.2"), project="astropy")
    assert got == ["numpy>=1.20", "pytest>=7.0", 'tomli; python_version < "3.11"']
    assert tree_requirements(requires, (), TargetPython("3.9.2")) == ["numpy>=1.20", 'tomli; python_version < "3.11"']


def test_metadata_and_egg_info_requirements_parse():
    name, version, requires, extras = parse_metadata(
        "Metadata-Version: 2.1\nName: pylint\nVersion: 2.15.0\nRequires-Dist: astroid<=2.14,>=2.12\n"
        "Requires-Dist: tomli>=1.1; python_version < \"3.11\"\nProvides-Extra: spelling\n\nbody\n")
    assert (name, version, extras) == ("pylint", "2.15.0", ["spelling"])
    assert requires == ["astroid<=2.14,>=2.12", 'tomli>=1.1; python_version < "3.11"']
    assert parse_egg_requires("numpy>=1.10\n\n[test]\npytest-astropy\n\n[:python_version<'3']\nfuture\n") == [
        "numpy>=1.10", 'pytest-astropy; extra == "test"', "future; (python_version<'3')"]


# ------------------------------------------------------------------ resolver output

UV_CONFLICT = """  x No solution found when resolving dependencies:
  `-> Because you require wheel==0.44.0 and wheel>=0.37.1,<0.38.dev0, we can conclude that your
      requirements are unsatisfiable.
"""


def test_a_conflict_names_where_each_side_came_from():
    reqs = [Req("wheel==0.44.0", "spec requirements (pylint.yaml (version 2.15))"),
            Req("wheel~=0.37.1", "tree [build-system] requires (pyproject.toml)"),
            Req("astroid==2.12.13", "spec requirements (pylint.yaml (version 2.15))")]
    sides = explain_conflict(UV_CONFLICT, reqs)
    assert sides == ["wheel: 'wheel==0.44.0' from spec requirements (pylint.yaml (version 2.15))",
                     "wheel: 'wheel~=0.37.1' from tree [build-system] requires (pyproject.toml)"]
    assert failing_package("Because wheel==0.44.0 depends on x and you require ...") == "wheel"


def test_sources_only_packages_are_recognised_in_uv_output():
    out = ("Because atomicwrites==1.4.1 has no usable wheels and you require atomicwrites==1.4.1, we can "
           "conclude that your requirements are unsatisfiable.\n"
           "Because all versions of flasgger have no usable wheels and you require flasgger, ...")
    exact, loose = needs_building(out)
    assert exact == [("atomicwrites", "1.4.1")]
    assert loose == ["flasgger"]


@pytest.mark.parametrize("log, package", [
    ("  Building wheel for markupsafe (setup.py): finished with status 'error'\n"
     "  ERROR: Failed building wheel for markupsafe\n", "markupsafe"),
    ("ERROR: No matching distribution found for numpy==9.9\n", "numpy"),
    ("Traceback...\nModuleNotFoundError: No module named 'pkg_resources'\n", "pkg_resources"),
    # uv, two pins of one package: the package, not "you"
    ("  cause: Because you require setuptools==69.5.1 and setuptools>=77, we can conclude that your "
     "requirements are unsatisfiable.\n", "setuptools"),
    ("nothing useful here", None),
])
def test_failing_package_is_named(log, package):
    assert failing_package(log) == package


# ------------------------------------------------------------------ interpreter sources

def test_interpreter_sources_parse():
    assert parse_interpreter_source({"debian": "bullseye"}) == InterpreterSource("debian", "bullseye", "bullseye")
    assert parse_interpreter_source({"pyenv": "3.8"}).suite == "bookworm"
    image = parse_interpreter_source({"image": "python:3.8-slim-bookworm", "suite": "bookworm"})
    assert (image.kind, image.prefix) == ("image", "/usr/local")
    assert parse_interpreter_source({"image": "x/python:3.8", "prefix": "/opt/py"}).prefix == "/opt/py"


@pytest.mark.parametrize("raw, message", [
    ({}, "exactly one"), ({"debian": "bookworm", "pyenv": "3.8"}, "exactly one"),
    ({"pyenv": "three"}, "X.Y"), ({"prefix": "relative/path"}, "absolute"), ({"conda": "3.8"}, "unknown key"),
    ("3.8", "mapping"),
])
def test_bad_interpreter_sources_are_input_errors(raw, message):
    with pytest.raises(InputError, match=message):
        parse_interpreter_source(raw)


def test_prefix_copies_leave_out_tests_site_packages_and_static_libraries():
    assert prefix_excluded("lib/python3.8/test/test_os.py")
    assert prefix_excluded("lib/python3.8/site-packages/pip/__init__.py")
    assert prefix_excluded("lib/python3.8/config-3.8-x86_64-linux-gnu/libpython3.8.a")
    assert not prefix_excluded("lib/python3.8/os.py")
    assert not prefix_excluded("lib/python3.8/site-packages")
    assert not prefix_excluded("include/python3.8/Python.h")


# ------------------------------------------------------------------ wheelhouse helpers

def test_wheel_fit_for_the_target():
    target = Target("3.9.2", "2.31")
    assert _wheel_fits("numpy-1.25.2-cp39-cp39-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", target)
    assert _wheel_fits("six-1.16.0-py2.py3-none-any.whl", target)
    assert _wheel_fits("cryptography-40.0.1-cp36-abi3-manylinux_2_28_x86_64.whl", target)
    assert not _wheel_fits("numpy-1.25.2-cp310-cp310-manylinux_2_17_x86_64.whl", target)
    assert not _wheel_fits("numpy-1.25.2-cp39-cp39-win_amd64.whl", target)
    assert not _wheel_fits("atomicwrites-1.4.1.tar.gz", target)


def test_sdist_build_requirements_are_read_without_executing(tmp_path):
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in (("pkg-1.0/pyproject.toml", '[build-system]\nrequires = ["flit_core>=3.2"]\n'),
                           ("pkg-1.0/setup.py", "raise SystemExit('never run')\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert sdist_build_requires(sdist) == ["flit_core>=3.2"]


def test_the_tree_takes_part_in_resolution_as_a_metadata_only_wheel(tmp_path):
    import zipfile
    wheel = LocalProject("Sphinx", "3.1.0", ("docutils>=0.12",)).stub_wheel(tmp_path)
    assert wheel.name == "Sphinx-3.1.0-py2.py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("Sphinx-3.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: docutils>=0.12" in metadata and "Version: 3.1.0" in metadata


# ------------------------------------------------------------------ declared tree metadata

def test_declared_requirements_are_read_as_data(tmp_path):
    from harness.preparation.treemeta import static_metadata
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(use_scm_version=True)\n")
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = pkg\n\n[options]\ninstall_requires =\n    numpy >= 1.17  # comment\n"
        "    tomli; python_version < '3.11'\n\n[options.extras_require]\ntest =\n    pytest\n")
    meta = static_metadata(tmp_path, {"SETUPTOOLS_SCM_PRETEND_VERSION": "1.2.3"})
    assert (meta.name, meta.version, meta.source) == ("pkg", "1.2.3", "setup.cfg [options]")
    assert meta.requires_dist == ("numpy >= 1.17", "tomli; python_version < '3.11'", 'pytest; extra == "test"')
    # a setup.py that passes requirements itself must be run by its backend, not read
    (tmp_path / "setup.py").write_text("setup(install_requires=compute())\n")
    assert static_metadata(tmp_path) is None


def test_pyproject_project_table_and_literal_versions(tmp_path):
    from harness.preparation.treemeta import static_metadata
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "Tiny-Pkg"\ndynamic = ["version"]\ndependencies = ["attrs>=20"]\n'
        '[project.optional-dependencies]\ndev = ["pytest; python_version >= \'3.8\'"]\n')
    (tmp_path / "tiny_pkg").mkdir()
    (tmp_path / "tiny_pkg" / "__init__.py").write_text('__version__ = "0.4.1"\nimport os  # never run\n')
    meta = static_metadata(tmp_path)
    assert (meta.name, meta.version) == ("Tiny-Pkg", "0.4.1")
    assert meta.requires_dist == ("attrs>=20", "pytest; (python_version >= '3.8') and extra == \"dev\"")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndynamic = ["dependencies"]\n')
    assert static_metadata(tmp_path) is None


def test_a_pin_yields_to_the_tree_only_when_the_tree_excludes_it():
    from harness.preparation.requirements import yield_to_tree
    pins = [Req("astroid==2.12.13", "spec requirements"), Req("pytest==7.4.4", "spec requirements")]
    kept, dropped = yield_to_tree(pins, ["astroid>=2.11.6,<=2.12.0-dev0", 'tomli; python_version < "3.11"'],
                                  ("astroid",), TargetPython("3.9.2"))
    assert [k.text for k in kept] == ["pytest==7.4.4"]
    assert dropped == ["'astroid==2.12.13' (spec requirements) yields to the tree's astroid<=2.12.0-dev0,>=2.11.6"]
    kept, dropped = yield_to_tree(pins, ["astroid<=2.14.0-dev0,>=2.12.2"], ("astroid",), TargetPython("3.9.2"))
    assert kept == pins and dropped == []
    # only the names the spec lets yield
    kept, _ = yield_to_tree(pins, ["pytest>=8"], ("astroid",), TargetPython("3.9.2"))
    assert kept == pins


def test_setup_cfg_extras_interpolate_as_setuptools_reads_them(tmp_path):
    from harness.preparation.treemeta import static_metadata
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = pkg\n\n[options.extras_require]\nio =\n    netCDF4\n"
                                        "complete =\n    %(io)s\n    dask\n")
    meta = static_metadata(tmp_path)
    assert 'netCDF4; extra == "complete"' in meta.requires_dist and 'dask; extra == "complete"' in meta.requires_dist
