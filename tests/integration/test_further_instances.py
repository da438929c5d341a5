"""Further instances of a version: content-keyed instance images, a small layer on an
earlier instance when no build input changed, an incremental rebuild of the earlier
instance when only compiled sources or declarations did (and a full build when what the
install puts into the environment changed), a checked re-install after a patch to a
compiled source, and summaries over several sittings.

A small repository with a C extension is made here (setuptools, ``compiler: keep``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from harness.engine.client import run_once
from tests.gitrepo import git as _git

SPEC = """\
repo: example/cext
defaults:
  python: "3.11"
  requirements: ["pytest==8.3.4"]
  build_requires: []
  install_requires_from_tree: true
  compiler: keep
  install: "python setup.py build_ext --inplace && python -m pip install --no-build-isolation --no-deps -e ."
  reinstall: "python setup.py build_ext --inplace"
  rebuild_in_place: true
  reinstall_timeout: 300
  test_cmd: "pytest -rA -p no:cacheprovider"
  parser: pytest
  env: {{PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1", HARNESS_TEST_SALT: "{salt}"}}
versions:
  "1.0": {{}}
"""

SETUP = ("from setuptools import Extension, setup\n"
         "setup(name='cext', version='1.0', packages=['cext'],\n"
         "      ext_modules=[Extension('cext._fast', ['cext/_fast.c'])])\n")
FAST_C = """#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) {{ long v = PyLong_AsLong(arg); return PyLong_FromLong({expr}); }}
static PyMethodDef methods[] = {{{{"twice", twice, METH_O, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__fast(void) {{ return PyModule_Create(&module); }}
"""
INIT = "from cext._fast import twice\n\n\ndef label(x):\n    return 'value %d' % twice(x){suffix}\n"
TESTS = ("from cext import label, twice\n\n\ndef test_twice():\n    assert twice(2) == 4\n\n\n"
         "def test_label():\n    assert label(1) == 'value 2'\n")


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def cext(tmp_path):
    """Three commits: A; B = A + a changed .py and a removed file (no build input changed);
    C = B + a requirements file (a build input the incremental rebuild does not absorb). Each gets an instance whose gold patch
    fixes ``label`` and whose test patch adds the test of the fix."""
    repo = tmp_path / "cext"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commits = {
        "A": _commit(repo, {"setup.py": SETUP, "cext/_fast.c": FAST_C.format(expr="2 * v"),
                            "cext/__init__.py": INIT.format(suffix=" + '!'"), "cext/old_notes.txt": "old\n",
                            "tests/test_cext.py": TESTS.replace("test_label", "test_twice_again")}, "A"),
    }
    (repo / "cext" / "old_notes.txt").unlink()
    commits["B"] = _commit(repo, {"cext/__init__.py": INIT.format(suffix=" + '!!'")}, "B")
    commits["C"] = _commit(repo, {"requirements-dev.txt": "pytest\n"}, "C")
    records = []
    for name, base in commits.items():
        fixed = INIT.format(suffix="")
        records.append({"instance_id": f"example__cext-{name}", "repo": "example/cext", "base_commit": base,
                        "version": "1.0", "patch": _diff(repo, base, "cext/__init__.py", fixed),
                        "test_patch": _diff(repo, base, "tests/test_cext.py", TESTS),
                        "FAIL_TO_PASS": ["tests/test_cext.py::test_label"],
                        "PASS_TO_PASS": ["tests/test_cext.py::test_twice"]})
    specs = tmp_path / "specs"
    specs.mkdir()
    # a salt of its own: images are built here, not found from an earlier session (tmp_path.name,
    # the salt before, is the same in every session)
    (specs / "example__cext.yaml").write_text(SPEC.format(salt=uuid.uuid4().hex[:12]))
    return repo, records, specs


def _diff(repo: Path, base: str, path: str, new_text: str) -> str:
    _git(repo, "checkout", "-q", base)
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(new_text)
    diff = _git(repo, "diff", "--", path) or _git(repo, "diff", "--no-index", "--", "/dev/null", path)
    _git(repo, "checkout", "-q", "--", ".")
    _git(repo, "clean", "-qfd")
    _git(repo, "checkout", "-q", "main")
    return diff


def _run(harness_run, tmp_path, repo, records, specs, run_id, ids, predictions="gold"):
    instances = tmp_path / f"{run_id}.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in records))
    return harness_run("--instances", str(instances), "--specs", str(specs), "--repo", f"example/cext={repo}",
                       "--no-clone", "--predictions", predictions, "--instance-ids", *ids, run_id=run_id)


def test_a_further_instance_is_a_small_layer_unless_a_build_input_changed(tmp_path, harness_run, engine, cext):
    repo, records, specs = cext
    run = _run(harness_run, tmp_path, repo, records, specs, "further", ["example__cext-A"])
    first = run.report("example__cext-A")
    assert first["status"] == "FULL", first["error_detail"]
    # image builds compile without debug information (instance_layer.NO_DEBUG_INFO): the same
    # code, smaller layers; the compiler kept in the image brings readelf
    sections = run_once(engine, first["image"]["tag"], ["bash", "-c", "readelf -S /opt/harness/testbed/cext/_fast*.so"],
                        user="1000:1000").decode()
    assert ".text" in sections and ".debug_info" not in sections, sections
    run = _run(harness_run, tmp_path, repo, records, specs, "further", ["example__cext-B"])
    second = run.report("example__cext-B")
    assert second["status"] == "FULL", second["error_detail"]
    image = engine.images.get(second["image"]["tag"])
    assert image.labels.get("org.harness.reused-from") == first["image"]["tag"]
    # the new layer holds what differs, nothing of the earlier instance's commit
    check = ("cd /opt/harness/testbed && test ! -e cext/old_notes.txt && grep -q \"'!!'\" cext/__init__.py "
             "&& test \"$(stat -c %u:%g:%Y cext/__init__.py)\" = 1000:1000:946684800 && test ! -e /opt/harness/.delete-list "
             "&& ls cext/_fast*.so && test -d build && git rev-list --all --count "
             "&& test $(git count-objects -v | awk '/^count:/ {print $2}') -eq $(git rev-list --objects --all | wc -l)")
    out = run_once(engine, image.id, ["bash", "-c", check], user="1000:1000").decode()
    assert out.strip().endswith("1"), out
    history = engine.api.history(image.id)
    own_layers = history[: [h["Id"] for h in history].index(engine.images.get(first["image"]["tag"]).id)]
    assert 0 < sum(layer["Size"] for layer in own_layers) < 200_000, own_layers
    # one commit (the delta and the removals together), with the earlier instance's configuration
    assert len(own_layers) == 1, [layer["CreatedBy"] for layer in own_layers]
    keys = ("Env", "User", "WorkingDir", "Cmd", "Entrypoint")
    earlier = engine.images.get(first["image"]["tag"]).attrs["Config"]
    assert {k: image.attrs["Config"].get(k) for k in keys} == {k: earlier.get(k) for k in keys}
    # a requirements file changed: a full build again
    run = _run(harness_run, tmp_path, repo, records, specs, "further", ["example__cext-C"])
    third = run.report("example__cext-C")
    assert third["status"] == "FULL", third["error_detail"]
    assert "org.harness.reused-from" not in engine.images.get(third["image"]["tag"]).labels
    # over three sittings, summary.json describes all three instances; this_invocation only C
    summary = run.summary
    assert summary["resolved_ids"] == ["example__cext-A", "example__cext-B", "example__cext-C"]
    assert summary["this_invocation"]["submitted_ids"] == ["example__cext-C"]


MODULE_C = """#include <Python.h>
static PyObject *f(PyObject *self, PyObject *arg) {{ long v = PyLong_AsLong(arg); return PyLong_FromLong({expr}); }}
static PyMethodDef methods[] = {{{{"{func}", f, METH_O, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{module}(void) {{ return PyModule_Create(&module); }}
"""
TWO_EXTENSIONS = ("from setuptools import Extension, setup\n"
                  "setup(name='cext', version='1.0', packages=['cext'],\n"
                  "      ext_modules=[Extension('cext._fast', ['cext/_fast.c']),\n"
                  "                   Extension('cext._slow', ['cext/_slow.c']{macros})])\n")
BUILT = ("cd /opt/harness/testbed && stat -c '%Y %n' cext/_fast.c cext/_slow.c cext/_fast.*so cext/_slow.*so "
         "build/temp*/cext/_fast.o build/temp*/cext/_slow.o")


def _built(engine, tag) -> dict[str, int]:
    out = run_once(engine, tag, ["bash", "-c", BUILT], user="1000:1000").decode()
    return {line.split()[1].split("/")[-1].split(".")[0] + "." + line.split()[1].rsplit(".", 1)[-1]: int(line.split()[0])
            for line in out.splitlines()}


def test_a_changed_extension_source_rebuilds_only_that_extension_on_the_earlier_instance(tmp_path, harness_run,
                                                                                           engine):
    """A: two extensions. B = A with cext/_fast.c changed (a compiled source): B's image is A's,
    rebuilt in place — _fast compiled again, _slow kept as built for A — and grades as a cold
    build of B does. C = B with setup.py defining a macro for _slow: only _slow is rebuilt.
    D = C with setup.py declaring another version: the install itself runs again on C's image."""
    repo = tmp_path / "cext"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    slow = MODULE_C.format(expr="3 * v", func="thrice", module="_slow")
    commits = {"A": _commit(repo, {"setup.py": TWO_EXTENSIONS.format(macros=""), "cext/_slow.c": slow,
                                   "cext/_fast.c": MODULE_C.format(expr="2 * v", func="twice", module="_fast"),
                                   "cext/__init__.py": INIT.format(suffix=" + '!'"),
                                   "tests/test_cext.py": TESTS.replace("test_label", "test_twice_again")}, "A")}
    commits["B"] = _commit(repo, {"cext/_fast.c": MODULE_C.format(expr="v + v", func="twice", module="_fast")}, "B")
    macro = TWO_EXTENSIONS.format(macros=", define_macros=[('SLOW', '1')]")
    commits["C"] = _commit(repo, {"setup.py": macro}, "C")
    commits["D"] = _commit(repo, {"setup.py": macro.replace("version='1.0'", "version='1.1'")}, "D")
    records = [{"instance_id": f"example__cext-{name}", "repo": "example/cext", "base_commit": base, "version": "1.0",
                "patch": _diff(repo, base, "cext/__init__.py", INIT.format(suffix="")),
                "test_patch": _diff(repo, base, "tests/test_cext.py", TESTS),
                "FAIL_TO_PASS": ["tests/test_cext.py::test_label"], "PASS_TO_PASS": ["tests/test_cext.py::test_twice"]}
               for name, base in commits.items()]
    specs, cold_specs = tmp_path / "specs", tmp_path / "cold-specs"
    # salts of this run's own: which earlier image each is built on is what is tested
    run_salt = uuid.uuid4().hex[:12]
    for directory, salt in ((specs, run_salt), (cold_specs, run_salt + "-cold")):
        directory.mkdir()
        (directory / "example__cext.yaml").write_text(SPEC.format(salt=salt))
    reports = {}
    for name in "ABCD":
        run = _run(harness_run, tmp_path, repo, records, specs, "incremental", [f"example__cext-{name}"])
        reports[name] = run.report(f"example__cext-{name}")
        assert reports[name]["status"] == "FULL", reports[name]["error_detail"]
    tags = {name: report["image"]["tag"] for name, report in reports.items()}
    # (D's trees differ from B's and C's alike: setup.py only, commits of the same second)
    for name, bases in (("B", "A"), ("C", "B"), ("D", "BC")):
        labels = engine.images.get(tags[name]).labels
        assert labels.get("org.harness.reused-from") in [tags[b] for b in bases], (name, labels)
        assert labels.get("org.harness.rebuilt") == "incremental"
    built = {name: _built(engine, tag) for name, tag in tags.items()}
    # sources keep the tree's mtime; B compiled _fast again and kept _slow's objects, C the reverse
    assert built["B"]["_fast.c"] == built["B"]["_slow.c"] == built["A"]["_fast.c"] == 946684800
    assert built["B"]["_fast.o"] > built["A"]["_fast.o"] and built["B"]["_fast.so"] > built["A"]["_fast.so"]
    assert (built["B"]["_slow.o"], built["B"]["_slow.so"]) == (built["A"]["_slow.o"], built["A"]["_slow.so"])
    assert built["C"]["_slow.o"] > built["B"]["_slow.o"] and built["C"]["_slow.so"] > built["B"]["_slow.so"]
    assert (built["C"]["_fast.o"], built["C"]["_fast.so"]) == (built["B"]["_fast.o"], built["B"]["_fast.so"])
    # (a setup.py-only project is installed by `setup.py develop`: its metadata is in the tree)
    version = "cd /opt/harness/testbed && python -c 'import importlib.metadata as m; print(m.version(\"cext\"))'"
    installed = run_once(engine, tags["D"], ["bash", "-c", version], user="1000:1000").decode()
    assert installed.strip() == "1.1", installed
    # the rebuilt image holds what changed, not a second copy of the tree
    history = engine.api.history(engine.images.get(tags["B"]).id)
    own_layers = history[: [h["Id"] for h in history].index(engine.images.get(tags["A"]).id)]
    assert 0 < sum(layer["Size"] for layer in own_layers) < 1_000_000, own_layers
    # a cold build of B (its own salt: nothing to build on) grades the same, test by test
    cold = _run(harness_run, tmp_path, repo, records, cold_specs, "incremental-cold", ["example__cext-B"])
    cold_report = cold.report("example__cext-B")
    assert "org.harness.reused-from" not in engine.images.get(cold_report["image"]["tag"]).labels
    for key in ("status", "tests_status"):
        assert cold_report.get(key) == reports["B"].get(key), key


#: A build_ext of the project's own that adds an extension each time it is finalized, as
#: astropy_helpers does (``<package>._compiler``, its source copied into the package first).
ADDS_ITS_OWN = ("import shutil\n"
                "from setuptools import Extension, setup\n"
                "from setuptools.command.build_ext import build_ext\n\n\n"
                "class AddsItsOwn(build_ext):\n"
                "    def finalize_options(self):\n"
                "        shutil.copy('helpers/compiler.c', 'cext/_compiler.c')\n"
                "        self.distribution.ext_modules.insert(0, Extension('cext._compiler', ['cext/_compiler.c']))\n"
                "        super().finalize_options()\n\n\n"
                "setup(name='cext', version='1.0', packages=['cext'], cmdclass={'build_ext': AddsItsOwn},\n"
                "      ext_modules=[Extension('cext._fast', ['cext/_fast.c'])])\n")


def test_a_project_whose_build_ext_adds_an_extension_is_rebuilt_incrementally(tmp_path, harness_run, engine):
    """astropy 1.3's trees: reading what such a project declares never ended (the step's timeout,
    then a full install: 642 s for astropy-7336 in Verified's cold run). B = A with cext/_fast.c
    changed is A's image rebuilt in place, and grades FULL."""
    repo = tmp_path / "cext"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commits = {"A": _commit(repo, {"setup.py": ADDS_ITS_OWN, "cext/__init__.py": INIT.format(suffix=" + '!'"),
                                   "cext/_fast.c": MODULE_C.format(expr="2 * v", func="twice", module="_fast"),
                                   "helpers/compiler.c": MODULE_C.format(expr="v", func="name", module="_compiler"),
                                   "tests/test_cext.py": TESTS.replace("test_label", "test_twice_again")}, "A")}
    commits["B"] = _commit(repo, {"cext/_fast.c": MODULE_C.format(expr="v + v", func="twice", module="_fast")}, "B")
    records = [{"instance_id": f"example__cext-{name}", "repo": "example/cext", "base_commit": base, "version": "1.0",
                "patch": _diff(repo, base, "cext/__init__.py", INIT.format(suffix="")),
                "test_patch": _diff(repo, base, "tests/test_cext.py", TESTS),
                "FAIL_TO_PASS": ["tests/test_cext.py::test_label"], "PASS_TO_PASS": ["tests/test_cext.py::test_twice"]}
               for name, base in commits.items()]
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "example__cext.yaml").write_text(SPEC.format(salt=uuid.uuid4().hex[:12]))
    tags = {}
    for name in "AB":
        run = _run(harness_run, tmp_path, repo, records, specs, "adds-its-own", [f"example__cext-{name}"])
        report = run.report(f"example__cext-{name}")
        assert report["status"] == "FULL", report["error_detail"]
        tags[name] = report["image"]["tag"]
    labels = engine.images.get(tags["B"]).labels
    assert labels.get("org.harness.reused-from") == tags["A"] and labels.get("org.harness.rebuilt") == "incremental"
    assert "_compiler" in run_once(engine, tags["B"], ["bash", "-c", "ls /opt/harness/testbed/cext"],
                                   user="1000:1000").decode()


def test_identical_content_shares_one_image_whatever_the_instance_id(tmp_path, harness_run, cext):
    repo, records, specs = cext
    copy = dict(records[0], instance_id="example__cext-A-again")
    run = _run(harness_run, tmp_path, repo, [records[0], copy], specs, "shared",
               ["example__cext-A", "example__cext-A-again"])
    assert run.report("example__cext-A")["image"]["tag"] == run.report("example__cext-A-again")["image"]["tag"]


def test_a_patch_to_a_compiled_source_is_rebuilt_and_a_broken_one_is_graded(tmp_path, harness_run, cext):
    repo, records, specs = cext
    base = records[0]["base_commit"]
    good = _diff(repo, base, "cext/_fast.c", FAST_C.format(expr="2 * v + 0")) + records[0]["patch"]
    broken = _diff(repo, base, "cext/_fast.c", FAST_C.format(expr="2 * v +")) + records[0]["patch"]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": iid, "model_name_or_path": "m", "model_patch": patch}) + "\n"
                             for iid, patch in (("example__cext-A", good),)))
    run = _run(harness_run, tmp_path, repo, records, specs, "rebuild-good", ["example__cext-A"], str(preds))
    report = run.report("example__cext-A")
    assert report["status"] == "FULL", report["error_detail"]
    rebuild = [c for c in report["commands"] if c["phase"] == "build"]
    assert rebuild and rebuild[0]["exit_code"] == 0
    # incremental: only the patched source is compiled again
    assert rebuild[0]["output_tail"].count("gcc") <= 2 and "_fast.c" in rebuild[0]["output_tail"]
    preds.write_text(json.dumps({"instance_id": "example__cext-A", "model_name_or_path": "m",
                                 "model_patch": broken}) + "\n")
    run = _run(harness_run, tmp_path, repo, records, specs, "rebuild-broken", ["example__cext-A"], str(preds))
    report = run.report("example__cext-A")
    assert (report["status"], report["error_reason"], report["error_origin"]) == ("INVALID", "rebuild_failed", "model")
    assert "_fast.c" in report["error_detail"]
    assert [c["exit_code"] for c in report["commands"] if c["phase"] == "pristine_build"] == [0]


PURE_SPEC = """\
repo: example/pure
defaults:
  python: "3.11"
  requirements: ["pytest==8.3.4"]
  build_requires: []
  # what an install writes into the tree (setuptools-scm's _version.py, egg-info) must be
  # in the image: this one writes a module the tests import, and a nested directory
  pre_install: ["mkdir -p pure/gen/deep && printf 'VERSION = 3\\\\n' > pure/_version.py && touch pure/gen/deep/mark"]
  install: "python -m pip install --no-build-isolation --no-deps -e ."
  test_cmd: "python -m pytest -rA -p no:cacheprovider"
  parser: pytest
  env: {{HARNESS_TEST_SALT: "{salt}"}}
versions:
  "1.0": {{}}
"""


def test_what_the_install_writes_into_the_tree_is_in_the_image(tmp_path, harness_run, engine):
    """The no-compiler path (the install committed from a build container): files the install
    wrote in /testbed are copied back into the pristine tree, with the test user owning them;
    the image is one layer on the environment, configured as the environment plus the spec's
    variables, with an empty /testbed and no second copy of the tree."""
    repo = tmp_path / "pure"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    setup = "from setuptools import setup\nsetup(name='pure', version='1.0', packages=['pure'])\n"
    base = _commit(repo, {"setup.py": setup, "pure/__init__.py": "def version():\n    return 0\n",
                          "tests/test_pure.py": "def test_placeholder():\n    pass\n"}, "A")
    fixed = "from pure._version import VERSION\n\n\ndef version():\n    return VERSION\n"
    test = "from pure import version\n\n\ndef test_version():\n    assert version() == 3\n"
    record = {"instance_id": "example__pure-1", "repo": "example/pure", "base_commit": base, "version": "1.0",
              "patch": _diff(repo, base, "pure/__init__.py", fixed),
              "test_patch": _diff(repo, base, "tests/test_pure.py", test),
              "FAIL_TO_PASS": ["tests/test_pure.py::test_version"], "PASS_TO_PASS": []}
    specs = tmp_path / "specs"
    specs.mkdir()
    salt = uuid.uuid4().hex[:12]   # built here, not found from an earlier session
    (specs / "example__pure.yaml").write_text(PURE_SPEC.format(salt=salt))
    instances = tmp_path / "pure.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    run = harness_run("--instances", str(instances), "--specs", str(specs), "--repo", f"example/pure={repo}",
                      "--no-clone", "--predictions", "gold", run_id="pure")
    report = run.report("example__pure-1")
    assert report["status"] == "FULL", report["error_detail"]
    listing = run_once(engine, report["image"]["tag"], ["stat", "-c", "%U %n", "/opt/harness/testbed/pure/_version.py",
                                                        "/opt/harness/testbed/pure/gen/deep/mark",
                                                        "/opt/harness/testbed/pure.egg-info/PKG-INFO"]).decode()
    assert [line.split()[0] for line in listing.splitlines()] == ["harness"] * 3, listing
    image, env = engine.images.get(report["image"]["tag"]), engine.images.get(report["image"]["env_id"])
    assert image.attrs["RootFS"]["Layers"][:-1] == env.attrs["RootFS"]["Layers"]   # one layer on the environment
    config, env_config = image.attrs["Config"], env.attrs["Config"]
    assert config["Env"] == [*env_config["Env"], f"HARNESS_TEST_SALT={salt}"]
    assert (config["User"], config["Cmd"], config["WorkingDir"]) == (env_config["User"], env_config["Cmd"], "/testbed")
    assert config["Labels"]["org.harness.kind"] == "inst" and "org.harness.owner" not in config["Labels"]
    shape = run_once(engine, report["image"]["tag"], ["sh", "-c", "stat -c '%U %a' /testbed; ls -A /testbed | wc -l; "
                                                                   "ls /opt/harness"]).decode().split("\n")
    assert shape[:2] == ["harness 755", "0"], shape
    assert "install.sh" in shape and ".install-stamp" not in shape, shape
    # the tree as exported (copied from a read-only mount of the export: the harness user's files,
    # every mtime the export's fixed one), the mount itself gone
    tree = run_once(engine, report["image"]["tag"], ["sh", "-c", "stat -c '%U:%G %a %Y' /opt/harness/testbed "
                                                                  "/opt/harness/testbed/setup.py /opt/harness/testbed/tests; "
                                                                  "ls -A /mnt | wc -l"]).decode().split("\n")
    assert tree[:4] == ["root:root 755 " + tree[0].split()[-1], "harness:harness 644 946684800",
                        "harness:harness 755 946684800", "0"], tree
