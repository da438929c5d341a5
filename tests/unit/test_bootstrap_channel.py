"""The bootstrap and its evidence channel, run for real on this interpreter (tests/bootstrap_host.py):
what it sends from nested pytest sessions and child processes, how the collector tells
senders apart, and when the bootstrap stays out of the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.incontainer import evidence_channel
from harness.integrity.evidence import parse_evidence
from tests.bootstrap_host import bootstrapped

LIBRARY = "import sys\n\ndef outer():\n    return sys._getframe(0)\n\ndef inner():\n    return sys._getframe(0)\n"
INNER = "from lib import core\n\ndef test_inner():\n    assert core.inner()\n"
TESTS = textwrap.dedent('''\
    import os, subprocess, sys
    import pytest
    from lib import core

    pytest_plugins = ["pytester"]
    INNER = {inner!r}


    def test_outer():
        assert core.outer()


    def test_subprocess(tmp_path):
        (tmp_path / "test_sub.py").write_text(INNER)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]])),
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


    def test_pytester(pytester):
        pytester.makepyfile(test_inline=INNER)
        pytester.inline_run("-p", "no:cacheprovider").assertoutcome(passed=1)
''').format(inner=INNER)


def _repo(root):
    testbed = root / "tb"
    (testbed / "lib").mkdir(parents=True)
    (testbed / "lib" / "__init__.py").write_text("")
    (testbed / "lib" / "core.py").write_text(LIBRARY)
    (testbed / "test_nested.py").write_text(TESTS)
    # a repository module named like the harness's: pytest finds the harness's all the same
    (testbed / "_harness_outcomes.py").write_text("raise SystemExit('the repository shadowed the plugin')\n")
    (testbed / "_harness_monitor.py").write_text("raise SystemExit('the repository shadowed the monitor')\n")
    return testbed


def test_nested_sessions_and_child_processes_report_and_only_the_graded_session_counts(tmp_path):
    testbed = _repo(tmp_path)
    results = tmp_path / "results.xml"
    with bootstrapped(tmp_path / "channel", testbed, results) as channel:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_harness_outcomes",
                               f"--junitxml={results}", "test_nested.py"], cwd=testbed, capture_output=True, text=True,
                              env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    raw = channel.events()
    ev = parse_evidence(b"{}", raw)
    records = [(int(line.split(b"\t", 1)[0]), json.loads(line.split(b"\t", 1)[1]))
               for line in raw.splitlines() if not line.startswith(b"h")]
    # two processes: the outer pytest and the one a test started
    assert len(ev.processes) == 2 and {r["k"] for _, r in records} >= {"boot", "start", "report", "event"}
    starts = {(c, r["s"]): r["graded"] for c, r in records if r["k"] == "start"}
    assert sorted(starts.values()) == [False, False, True]      # outer (graded), its pytester run, the child's
    assert ev.graded_sessions == [c for c, g in starts.items() if g]
    # every session's reports arrive; the host grades with the graded session's only
    reported = {r["id"] for _, r in records if r["k"] == "report"}
    assert {"test_nested.py::test_outer", "test_inline.py::test_inner"} <= reported
    assert any(r.endswith("test_sub.py::test_inner") for r in reported), reported   # relative to the child's rootdir
    assert set(ev.reports) == {"test_nested.py::test_outer", "test_nested.py::test_subprocess",
                               "test_nested.py::test_pytester"}
    # the monitor's events from the outer run, its in-process inner run and the child process
    lines = {(c, r["line"]) for c, r in records if r["k"] == "event" and r["event"] == "sys._getframe"
             and r["file"] == "/testbed/lib/core.py"}
    (outer, _), = ev.graded_sessions
    child = next(c for c in ev.processes if c != outer)
    assert lines == {(outer, 4), (outer, 7), (child, 7)}
    assert ev.results_file is not None and ev.results_file["s"] == 1


def test_a_forked_child_reports_under_its_own_connection(tmp_path):
    testbed = tmp_path / "tb"
    testbed.mkdir()
    script = "import os, _harness_monitor as m\npid = os.fork()\nm.emit({'k': 'hello', 'child': pid == 0})\n" \
             "os._exit(0) if pid == 0 else os.waitpid(pid, 0)\n"
    with bootstrapped(tmp_path / "channel", testbed) as channel:
        subprocess.run([sys.executable, "-c", script], env=channel.env, check=True, timeout=60)
    ev = parse_evidence(b"{}", channel.events())
    lines = [line.split(b"\t", 1) for line in channel.events().splitlines() if not line.startswith(b"h")]
    hello = {json.loads(body)["child"]: int(c) for c, body in lines if b'"hello"' in body}
    assert hello[True] != hello[False]
    assert ev.processes[hello[True]]["pid"] != ev.processes[hello[False]]["pid"]


def test_the_bootstrap_does_nothing_without_activation_or_for_another_user(tmp_path):
    testbed = tmp_path / "tb"
    testbed.mkdir()
    probe = "import sys; print('_harness_monitor' in sys.modules, '_harness_outcomes' in sys.modules)"
    with bootstrapped(tmp_path / "channel", testbed) as channel:
        active = subprocess.run([sys.executable, "-c", probe], env=channel.env, capture_output=True, text=True)
        activation = tmp_path / "channel" / "activation.json"
        record = json.loads(activation.read_text())
        evidence_channel.activate(str(activation), dict(record, uid=record["uid"] + 1))
        other = subprocess.run([sys.executable, "-c", probe], env=channel.env, capture_output=True, text=True)
        evidence_channel.deactivate(str(activation))
        off = subprocess.run([sys.executable, "-c", probe], env=channel.env, capture_output=True, text=True)
    assert (active.stdout.split(), other.stdout.split(), off.stdout.split()) == \
        (["True", "True"], ["False", "False"], ["False", "False"])
    # nothing of the harness on sys.path, nothing in the environment of the bootstrapped process
    path = subprocess.run([sys.executable, "-c", "import os, sys, json; print(json.dumps([sys.path, dict(os.environ)]))"],
                          env=channel.env, capture_output=True, text=True)
    assert "harness/incontainer" not in path.stdout and "PYTEST_PLUGINS" not in path.stdout


def test_a_bootstrapped_process_says_nothing_of_its_own_even_in_development_mode(tmp_path):
    # sphinx runs its tests under ``python -X dev``; tests compare what subprocesses print
    testbed = tmp_path / "tb"
    testbed.mkdir()
    with bootstrapped(tmp_path / "channel", testbed) as channel:
        proc = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", "import sys; print(sorted("
                               "m for m in sys.modules if m.startswith('_harness')))"],
                              env=channel.env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "['_harness_genuine', '_harness_identity', '_harness_monitor', '_harness_outcomes']", "")


def test_the_bootstrap_imports_nothing_but_its_own_modules(tmp_path):
    # every Python process of the tests pays for it, and tests look at sys.modules
    testbed = tmp_path / "tb"
    testbed.mkdir()
    probe = ["-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"]
    bare = subprocess.run([sys.executable, *probe], env={}, capture_output=True, text=True, check=True)
    with bootstrapped(tmp_path / "channel", testbed) as channel:
        booted = subprocess.run([sys.executable, *probe], env=channel.env, capture_output=True, text=True, check=True)
    added = set(json.loads(booted.stdout)) - set(json.loads(bare.stdout))
    assert added - {"sitecustomize"} <= {"_harness_genuine", "_harness_monitor", "_harness_identity", "_harness_outcomes",
                                          "_socket"}, added


def test_the_collector_names_each_connection_and_takes_no_other_users(tmp_path, monkeypatch):
    import socket
    import stat
    import tempfile
    short = Path(tempfile.mkdtemp(prefix="hb-"))
    path, out = str(short / "s.sock"), str(tmp_path / "events")
    monkeypatch.setattr(evidence_channel, "MAX_CONNECTIONS", 2)
    collector = evidence_channel.Collector(path, out, os.getuid(), os.getgid(), 1 << 20)
    collector.start()
    st = os.stat(path)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o620, 0, os.getgid())
    for n in range(3):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(path)
            try:
                conn.sendall(b'{"k": "hello", "n": %d}\n{"k": "partial' % n)
            except (BrokenPipeError, ConnectionResetError):
                assert n == 2   # past the cap: the collector may close it before anything is sent
    if os.getuid() == 0:   # another user (the service user in the sandbox) cannot connect at all
        pid = os.fork()
        if pid == 0:
            os.setgid(65534), os.setuid(65534)
            try:
                socket.socket(socket.AF_UNIX).connect(path)
                os._exit(0)
            except PermissionError:
                os._exit(13)
        assert os.waitpid(pid, 0)[1] >> 8 == 13
    stats = collector.stop()
    ev_lines = Path(out).read_bytes().splitlines()
    prefixes = [line.split(b"\t")[0] for line in ev_lines]
    assert sorted(prefixes) == [b"1", b"2", b"h1", b"h2"]
    assert prefixes.index(b"h1") < prefixes.index(b"1") and prefixes.index(b"h2") < prefixes.index(b"2")
    assert json.loads(ev_lines[0].split(b"\t")[1])["pid"] == os.getpid()
    # the third connection was past the cap: refused, and the stream marked incomplete
    assert (stats["connections"], stats["refused"], stats["truncated"], stats["partial_lines"]) == (2, 1, True, 2)
    assert not os.path.exists(path)
