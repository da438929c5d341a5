"""Root's bytecode of the bootstrap's modules (harness/incontainer/bytecode_cache.py): a test
process loads it only when it was made from the very files it runs, by an interpreter of its
own magic number, and nobody but the owner could have written it; otherwise it compiles the
sources as before, and the monitor sees the same either way (issue 38).

The launcher's own use of it in a real sandbox: tests/integration/test_bootstrap_reach.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.incontainer import bytecode_cache
from harness.integrity.evidence import parse_evidence
from harness.runners import INCONTAINER_SOURCE
from tests.bootstrap_host import bootstrapped
from tests.unit.test_monitor_attribution import INTERPRETERS

FORGED = "import csv\nexec(compile('import gc; gc.get_objects()', csv.__file__, 'exec'))\n"


def boot_record(tmp_path, *, python=sys.executable, bytecode=None, source=INCONTAINER_SOURCE, before=None,
                flags=()):
    """Run a working copy that forges a library's file name under the bootstrap; (the boot
    record, the events sent)."""
    testbed = tmp_path / "tb"
    (testbed / "lib").mkdir(parents=True)
    (testbed / "lib" / "__init__.py").write_text("")
    (testbed / "lib" / "core.py").write_text(FORGED)
    with bootstrapped(tmp_path / "channel", testbed, source=source, bytecode=bytecode) as channel:
        if before is not None:
            before(channel)
        proc = subprocess.run([python, *flags, "-c", "import lib.core"], cwd=testbed, capture_output=True,
                              text=True, env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env},
                              timeout=120)
    assert proc.returncode == 0, proc.stderr
    ev = parse_evidence(b"{}", channel.events())
    return ev.boot, ev.events


def test_a_process_loads_the_bytecode_made_for_its_interpreter_and_the_monitor_sees_the_same(tmp_path):
    boot, events = boot_record(tmp_path / "cached", bytecode=sys.executable)
    assert boot["monitor"] is True and boot["bytecode"] == 4
    compiled, events_compiled = boot_record(tmp_path / "compiled")
    assert compiled["monitor"] is True and compiled["bytecode"] == 0
    forged = [(e["event"], e["chain"][0][0].rsplit("/", 1)[-1], e["chain"][0][2]) for e in events
              if e["event"] == "gc.get_objects"]
    assert forged == [("gc.get_objects", "csv.py", "c")]
    assert forged == [(e["event"], e["chain"][0][0].rsplit("/", 1)[-1], e["chain"][0][2]) for e in events_compiled
                      if e["event"] == "gc.get_objects"]


def test_bytecode_someone_else_could_have_written_is_not_used(tmp_path):
    def loosen(channel):
        for path in channel.bytecode.iterdir():
            os.chmod(path, 0o666)
    boot, _ = boot_record(tmp_path, bytecode=sys.executable, before=loosen)
    assert boot["monitor"] is True and boot["bytecode"] == 0


def test_a_directory_someone_else_could_write_is_not_used(tmp_path):
    boot, _ = boot_record(tmp_path, bytecode=sys.executable, before=lambda c: os.chmod(c.bytecode, 0o777))
    assert boot["monitor"] is True and boot["bytecode"] == 0


def test_bytecode_of_another_version_of_the_modules_is_not_used(tmp_path):
    source = tmp_path / "modules"
    shutil.copytree(INCONTAINER_SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))

    def edit(channel):   # the module changes after its bytecode was made: size and mtime differ
        path = source / "_harness_identity.py"
        path.write_text(path.read_text() + "\n# changed\n")
    boot, _ = boot_record(tmp_path, bytecode=sys.executable, source=source, before=edit)
    assert boot["monitor"] is True and boot["bytecode"] == 3


def test_bytecode_naming_another_file_is_not_used(tmp_path):
    def swap(channel):   # the monitor's cache file holds the outcome plugin's code
        magic = bytecode_cache.interpreter_magic()
        monitor = channel.bytecode / bytecode_cache.file_name("_harness_monitor", magic)
        outcomes = channel.bytecode / bytecode_cache.file_name("_harness_outcomes", magic)
        st = os.stat(INCONTAINER_SOURCE / "_harness_monitor.py")
        body = outcomes.read_bytes()[len(bytecode_cache.header(magic, os.stat(INCONTAINER_SOURCE
                                                                               / "_harness_outcomes.py"))):]
        os.chmod(monitor, 0o644)
        monitor.write_bytes(bytecode_cache.header(magic, st) + body)
        os.chmod(monitor, 0o444)
    boot, events = boot_record(tmp_path, bytecode=sys.executable, before=swap)
    assert boot["monitor"] is True and boot["bytecode"] == 3
    assert [e for e in events if e["event"] == "gc.get_objects"]


def test_a_process_started_with_O_compiles(tmp_path):
    boot, _ = boot_record(tmp_path, bytecode=sys.executable, flags=("-O",))
    assert boot["monitor"] is True and boot["bytecode"] == 0


def test_another_interpreters_bytecode_is_not_used(tmp_path):
    # (the host holds pyenv's Pythons: test_the_monitor_is_checked_on_a_python_before_3_10)
    other = next(python for version, python in sorted(INTERPRETERS.items())
                 if version != "%d.%d" % sys.version_info[:2])
    boot, _ = boot_record(tmp_path, bytecode=other)
    assert boot["monitor"] is True and boot["bytecode"] == 0


def test_the_launcher_runs_only_an_interpreter_nobody_else_can_replace(tmp_path):
    # a python3 first on the PATH in a directory others can write (or reached through one) is
    # never run as root; the resolved file is what runs
    writable = tmp_path / "bin"
    writable.mkdir()
    os.chmod(writable, 0o777)
    (writable / "python3").symlink_to(Path(sys.executable).resolve())
    fake = tmp_path / "fake"
    fake.mkdir()
    os.chmod(fake, 0o777)
    (fake / "python3").write_text("#!/bin/sh\ntouch " + str(tmp_path / "ran") + "\n")
    os.chmod(fake / "python3", 0o755)
    out = tmp_path / "cache"
    assert bytecode_cache.start({"path": str(fake)}, str(INCONTAINER_SOURCE), str(out)) is None
    assert not (tmp_path / "ran").exists() and not out.exists()
    if os.getuid() == 0 and bytecode_cache._root_only(str(Path(sys.executable).resolve())):
        # a symlink in a writable directory to root's interpreter: root's interpreter runs
        process = bytecode_cache.start({"path": str(writable)}, str(INCONTAINER_SOURCE), str(out))
        assert process is not None and process.args[0] == str(Path(sys.executable).resolve())
        assert bytecode_cache.finish(process, str(out)) == str(out)
        assert sorted(p.name.split(".")[0] for p in out.iterdir()) == sorted(bytecode_cache.NAMES)
    assert bytecode_cache.start({}, str(INCONTAINER_SOURCE), str(out)) is None
    assert bytecode_cache.finish(None, str(out)) is None


def test_the_source_of_the_cache_is_the_boot_modules_only():
    # the bootstrap loads exactly these modules: a name missing here would always compile
    boot = (INCONTAINER_SOURCE / "_harness_boot.py").read_text()
    assert all(f'_load("{name}", directory, cache)' in boot for name in bytecode_cache.NAMES)
