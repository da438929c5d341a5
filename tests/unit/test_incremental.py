"""The pure parts of the incremental rebuild of a further instance: which build inputs it may
absorb, how two declarations of a project differ, and what a project declares (read by
running a real setup.py with this interpreter's setuptools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.engine.incremental import DECLARED, compare, generated_siblings
from harness.engine.instance_reuse import is_build_input, is_rebuildable
from harness.inputs.specs import DEFAULT_COMPILED_SOURCES


def _ext(name, sources, **definition):
    path = name.replace(".", "/")
    return {"name": name, "definition": {"sources": sources, **definition},
            "inplace": f"{path}.so", "build_lib": f"build/lib/{path}.so"}


def _declared(extensions, **fields):
    base = {"name": "p", "version": "1.0", "metadata": "Name: p\n", "install_requires": [], "extras_require": {},
            "entry_points": None, "packages": ["p"], "py_modules": [], "package_dir": {}}
    return {**base, **fields, "extensions": extensions}


def test_compiled_sources_and_declarations_are_absorbable_other_build_inputs_are_not():
    for path in ("astropy/io/fits/src/compressionmodule.c", "astropy/stats/_stats.pyx", "cextern/x/zlib.h",
                 "setup.cfg", "pyproject.toml", "setup.py", "astropy/wcs/setup_package.py", "MANIFEST.in"):
        assert is_rebuildable(path, DEFAULT_COMPILED_SOURCES), path
    for path in ("requirements.txt", "pylint/__pkginfo__.py", "CMakeLists.txt", "meson.build", "x/_version.py"):
        assert not is_rebuildable(path, DEFAULT_COMPILED_SOURCES), path


def test_a_specs_build_inputs_are_whole_paths_and_absorbable():
    # astropy generates wcs/src/docstrings.c from wcs/docstrings.py at build time
    extra = ("astropy/wcs/docstrings.py",)
    assert not is_build_input("astropy/wcs/docstrings.py", DEFAULT_COMPILED_SOURCES)
    assert is_build_input("astropy/wcs/docstrings.py", DEFAULT_COMPILED_SOURCES, extra)
    assert is_rebuildable("astropy/wcs/docstrings.py", DEFAULT_COMPILED_SOURCES, extra)
    assert not is_build_input("astropy/io/fits/docstrings.py", DEFAULT_COMPILED_SOURCES, extra)


def test_the_astropy_spec_names_its_generated_c_inputs():
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    spec = SpecRegistry.load(DEFAULT_SPECS_DIR).get("astropy/astropy", "5.1")
    assert spec.build_inputs == ("astropy/wcs/docstrings.py",)


def test_unchanged_declarations_rebuild_nothing_by_definition():
    same = _declared([_ext("p._a", ["p/a.c"]), _ext("p._b", ["p/b.pyx"])])
    changes = compare(same, json.loads(json.dumps(same)))
    assert changes.installed == () and changes.redefined == () and changes.removed == ()
    assert changes.stale_outputs == ()


def test_a_redefined_or_removed_extension_loses_its_built_module_before_the_rebuild():
    old = _declared([_ext("p._a", ["p/a.c", "zlib/inflate.c"]), _ext("p._b", ["p/b.c"]), _ext("p._c", ["p/c.c"])])
    new = _declared([_ext("p._a", ["p/a.c"]), _ext("p._b", ["p/b.c"], define_macros=[["X", "1"]]),
                     _ext("p._d", ["p/d.c"])])
    changes = compare(old, new)
    assert changes.redefined == ("p._a", "p._b")
    assert changes.removed == ("p._c",)
    assert changes.installed == ()
    assert set(changes.stale_outputs) == {"p/_a.so", "build/lib/p/_a.so", "p/_b.so", "build/lib/p/_b.so",
                                          "p/_c.so", "build/lib/p/_c.so"}


def test_other_metadata_or_packages_mean_the_install_must_run():
    old = _declared([_ext("p._a", ["p/a.c"])])
    assert compare(old, _declared([_ext("p._a", ["p/a.c"])], extras_require={"docs": ["sphinx"]})).installed == \
        ("extras_require",)
    assert compare(old, _declared([_ext("p._a", ["p/a.c"])], packages=["p", "q"])).installed == ("packages",)
    assert compare(old, _declared([], version="1.1")).installed == ("version",)


def test_c_files_generated_from_a_removed_pyx_go_too_unless_tracked():
    deleted = ("p/_gone.pyx", "p/_kept.pyx", "p/plain.c")
    assert generated_siblings(deleted, {"p/_kept.c"}) == ["p/_gone.c", "p/_gone.cpp", "p/_kept.cpp"]


def test_declared_reads_metadata_and_extensions_without_building(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "setup(name='p', version='2.5', packages=['p'], install_requires=['attrs>=1'],\n"
        "      ext_modules=[Extension('p._fast', ['p/_fast.c'], define_macros=[('FAST', '1')])])\n")
    out = tmp_path / "declared.json"
    subprocess.run([sys.executable, str(DECLARED), "declare", str(out)], cwd=tmp_path, check=True,
                   capture_output=True)
    declared = json.loads(out.read_text())
    assert declared["name"] == "p" and declared["version"] == "2.5"
    assert declared["packages"] == ["p"] and declared["install_requires"] == ["attrs>=1"]
    [ext] = declared["extensions"]
    assert ext["name"] == "p._fast"
    assert ext["definition"]["sources"] == ["p/_fast.c"]
    assert ext["definition"]["define_macros"] == [["FAST", "1"]]
    assert ext["inplace"].startswith("p/_fast.") and ext["inplace"].endswith(".so")
    assert ext["build_lib"].startswith("build/lib") and ext["build_lib"].endswith(ext["inplace"])
    assert not (tmp_path / "build").exists() and not list((tmp_path / "p").glob("*.so"))
    # verify: nothing is built, and p is not installed here
    report = tmp_path / "verify.json"
    subprocess.run([sys.executable, str(DECLARED), "verify", str(out), str(report)], cwd=tmp_path, check=True,
                   capture_output=True)
    problems = json.loads(report.read_text())["problems"]
    assert any("p._fast is not built" in p for p in problems)
    assert any("installed p is (not installed" in p for p in problems)
    # a module built after the stamp must import; one built before it is only checked to exist
    stamp = tmp_path / "stamp"
    stamp.write_text("")
    ext_file = tmp_path / ext["inplace"]
    ext_file.write_bytes(b"not a shared object")
    os.utime(stamp, (1000, 1000))
    subprocess.run([sys.executable, str(DECLARED), "verify", str(out), str(report), str(stamp)], cwd=tmp_path,
                   check=True, capture_output=True)
    assert any("p._fast does not import" in p for p in json.loads(report.read_text())["problems"])
    os.utime(ext_file, (500, 500))
    subprocess.run([sys.executable, str(DECLARED), "verify", str(out), str(report), str(stamp)], cwd=tmp_path,
                   check=True, capture_output=True)
    assert not any("p._fast" in p for p in json.loads(report.read_text())["problems"])


def test_a_build_ext_that_adds_an_extension_as_it_is_finalized_is_declared_once_and_in_time(tmp_path):
    """astropy_helpers' build_ext inserts ``<package>._compiler`` into the distribution's
    extensions each time it is finalized. Finalizing build_ext per extension while iterating
    that list never ended: astropy 1.3's further instances waited out the step's 600 s."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "from setuptools.command.build_ext import build_ext\n\n\n"
        "class AddsItsOwn(build_ext):\n"
        "    def finalize_options(self):\n"
        "        self.distribution.ext_modules.insert(0, Extension('p._compiler', ['p/_compiler.c']))\n"
        "        super().finalize_options()\n\n\n"
        "setup(name='p', version='1.0', packages=['p'], cmdclass={'build_ext': AddsItsOwn},\n"
        "      ext_modules=[Extension('p._a', ['p/_a.c']), Extension('p._b', ['p/_b.c'])])\n")
    out = tmp_path / "declared.json"
    subprocess.run([sys.executable, str(DECLARED), "declare", str(out)], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    extensions = json.loads(out.read_text())["extensions"]
    assert [e["name"] for e in extensions] == ["p._a", "p._b", "p._compiler"]
    assert extensions[2]["definition"]["sources"] == ["p/_compiler.c"]
    assert extensions[2]["inplace"].startswith("p/_compiler.") and extensions[2]["build_lib"].startswith("build/lib")


def test_a_rebuilt_library_loaded_with_ctypes_verifies_and_a_broken_extension_does_not(tmp_path):
    """astropy 5's ``astropy.convolution._convolve`` is built by setup.py as an extension but is
    a plain shared library loaded with ctypes: importing it says it defines no module, which
    refused every incremental rebuild that rebuilt it. It verifies when it loads; a rebuilt
    library that does not load (an unresolved symbol) is still a finding, as is one whose import
    fails otherwise."""
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "__init__.py").write_text("")
    (tmp_path / "plain.c").write_text("int answer(void) { return 42; }\n")
    (tmp_path / "broken.c").write_text("int missing_elsewhere(void);\nint answer(void) { return missing_elsewhere(); }\n")
    for name, source in (("_plain", "plain.c"), ("_broken", "broken.c")):
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", f"q/{name}.so", source], cwd=tmp_path, check=True,
                       capture_output=True)
    (tmp_path / "q" / "_garbage.so").write_bytes(b"not a shared object")
    declared = {"name": "q", "version": "1.0",
                "extensions": [_ext("q._plain", ["plain.c"]), _ext("q._broken", ["broken.c"]),
                               _ext("q._garbage", ["garbage.c"])]}
    out, report = tmp_path / "declared.json", tmp_path / "verify.json"
    out.write_text(json.dumps(declared))
    subprocess.run([sys.executable, str(DECLARED), "verify", str(out), str(report)], cwd=tmp_path, check=True,
                   capture_output=True)
    problems = json.loads(report.read_text())["problems"]
    assert not any("q._plain" in p for p in problems)
    assert any("extension q._broken does not import" in p and "missing_elsewhere" in p for p in problems)
    assert any("extension q._garbage does not import" in p for p in problems)
    assert any("installed q is (not installed" in p for p in problems)
