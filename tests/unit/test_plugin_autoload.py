"""Issue 36, class 2: what a pytest process can autoload is what the built environment
held, whatever the spelling of the metadata that declares it.

A real pytest process under the harness's bootstrap (on the host: tests/bootstrap_host.py),
its working copy holding two distributions' metadata with a ``pytest11`` entry point each:
``good.egg-info`` (the pristine tree has it too: the repository's own, as an editable
install leaves it) and ``Evil.EGG-INFO`` (only in the working copy; importlib.metadata
finds it all the same, the suffix is matched lower-cased). Autoloading loads the first and
refuses the second, naming it in a ``plugin_refused`` record; the host flags it. At
6eb3dd5 both plugins load (the demo specs set ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, no other
spec does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.integrity.evidence import judge_evidence, parse_evidence
from tests.bootstrap_host import bootstrapped

ENTRY = "[pytest11]\n{name} = {module}\n"
PLUGIN = "import pathlib\npathlib.Path({marker!r}).write_text('loaded')\n"


def _dist(root: Path, directory: str, name: str, module: str) -> None:
    meta = root / directory
    meta.mkdir(parents=True)
    (meta / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text(ENTRY.format(name=name, module=module))


def _tree(root: Path, markers: Path, evil: bool) -> None:
    root.mkdir(parents=True)
    _dist(root, "good.egg-info", "goodplug", "goodplugin")
    (root / "goodplugin.py").write_text(PLUGIN.format(marker=str(markers / "good")))
    (root / "test_x.py").write_text("def test_x():\n    assert True\n")
    if evil:
        _dist(root, "Evil.EGG-INFO", "evilplug", "evilplugin")
        (root / "evilplugin.py").write_text(PLUGIN.format(marker=str(markers / "evil")))


def _pytest_under_bootstrap(testbed: Path, channel, test_file: str) -> subprocess.CompletedProcess:
    """A real pytest process on ``test_file`` in ``testbed`` under the harness's bootstrap."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
                          cwd=testbed, env={"PATH": "/usr/bin:/bin", **channel.env}, capture_output=True,
                          text=True, timeout=120)


def test_autoload_admits_only_the_built_environments_entry_points(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    testbed, pristine = tmp_path / "testbed", tmp_path / "pristine"
    _tree(testbed, markers, evil=True)
    _tree(pristine, markers, evil=False)
    with bootstrapped(tmp_path / "boot", testbed, pristine=pristine) as channel:
        proc = _pytest_under_bootstrap(testbed, channel, "test_x.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (markers / "good").exists(), "a plugin the built environment has is loaded"
    assert not (markers / "evil").exists(), "a plugin only the working copy declares is not"
    records = [json.loads(line.split("\t", 1)[1]) for line in channel.events().decode().splitlines()
               if line and not line.startswith("h")]
    # (the host's own virtual environment is writable here, unlike the sandbox's: its
    # plugins are refused too, which the run does not need)
    refused = {(r["name"], r["value"]) for r in records if r.get("k") == "plugin_refused"}
    assert ("evilplug", "evilplugin") in refused and ("goodplug", "goodplugin") not in refused
    verdict = judge_evidence(parse_evidence(b"{}", channel.events()), {}, (), frozenset(), True, False, True)
    assert "plugin_refused" in verdict.flags
    assert "evilplug = evilplugin" in verdict.details["plugin_refused"]


OLD_PLUGGY = '''
import sys
sys.path.insert(0, {source!r})
import _harness_outcomes


class OldPluginManager:
    """pluggy before 0.6: load_setuptools_entrypoints takes the group alone (pytest 3)."""
    def load_setuptools_entrypoints(self, entrypoint_name):
        print("loaded", entrypoint_name)


manager = OldPluginManager()
_harness_outcomes.guard_autoload(manager)
manager.load_setuptools_entrypoints("pytest11")
manager.load_setuptools_entrypoints("other")
'''


def test_the_guard_keeps_the_signature_of_old_pluggy(tmp_path):
    """astropy-6938's pytest 3.3 calls ``load_setuptools_entrypoints('pytest11')`` on a pluggy
    whose method takes no ``name``: the guard passes on exactly what it was given."""
    from harness.runners import INCONTAINER_SOURCE
    script = tmp_path / "old.py"
    script.write_text(OLD_PLUGGY.format(source=str(INCONTAINER_SOURCE)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["loaded pytest11", "loaded other"]


NESTED_TEST = '''
import importlib.metadata
import pytest


class EntryPoint:
    name, group, value = "nestedplug", "pytest11", "nestedplugin"

    def load(self):
        import nestedplugin
        return nestedplugin


class Dist:
    metadata = {"name": "nestedplug"}
    name = "nestedplug"
    version = "1.0"
    entry_points = (EntryPoint(),)
    files = ()


def test_a_nested_run_loads_the_entry_points_it_makes(monkeypatch, tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text("def test_inner():\\n    assert True\\n")
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter([Dist()]))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert pytest.main([str(inner), "-q", "-p", "no:cacheprovider"]) == 0
'''


def test_a_nested_in_process_run_is_not_guarded(tmp_path):
    """pytest-11148's reference patch: pytest's own test monkeypatches
    ``importlib.metadata.distributions`` (a function taking no ``path``) and runs pytest in
    process to see its fabricated entry points load. The guard is the graded session's, the
    process's first config; at 05f6f0f it guarded the nested run too and the test failed."""
    markers = tmp_path / "markers"
    markers.mkdir()
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "nestedplugin.py").write_text(PLUGIN.format(marker=str(markers / "nested")))
    (testbed / "test_nested.py").write_text(NESTED_TEST)
    with bootstrapped(tmp_path / "boot", testbed, pristine=testbed) as channel:
        proc = _pytest_under_bootstrap(testbed, channel, "test_nested.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (markers / "nested").exists(), "the nested run loaded the entry point its test made"
