"""benchmarks/_acct.py: the kernel's version-3 accounting records read back as CPU seconds by
program and user, and the whole-set report's table of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.test_benchmark_seams import _load


def _record(acct, command: bytes, uid: int, utime: int, stime: int, version: int = 3, etime: float = 50.0,
            pid: int = 4242, ppid: int = 1, started: int = 0) -> bytes:
    return acct.RECORD.pack(0, version, 0, 0, uid, uid, pid, ppid, started, etime, utime, stime, 0, 0, 0, 0, 0, 0,
                            command)


def test_comp_t_is_a_base_8_floating_point_count():
    acct = _load("_acct")
    assert acct.comp_t(5) == 5
    assert acct.comp_t(0x1FFF) == 8191
    assert acct.comp_t((1 << 13) | 100) == 800          # exponent 1: × 8
    assert acct.comp_t((2 << 13) | 3) == 192             # exponent 2: × 64


def test_records_are_summed_by_program_and_user():
    acct = _load("_acct")
    data = b"".join([
        _record(acct, b"cc1", 0, 150, 50),                 # 2.0 s
        _record(acct, b"cc1", 0, (1 << 13) | 100, 0),       # 8.0 s
        _record(acct, b"pytest", 1000, 300, 20),            # 3.2 s
        _record(acct, b"gunicorn", 1001, 10, 0),            # 0.1 s
        _record(acct, b"python", 42, 0, 7),                 # 0.07 s, another user
        _record(acct, b"ignored", 0, 999, 999, version=2),  # not a version-3 record
    ]) + b"\0" * 10                                          # a torn last record
    processes = acct.parse(data)
    assert [p.command for p in processes] == ["cc1", "cc1", "pytest", "gunicorn", "python"]
    assert processes[0].elapsed == pytest.approx(0.5)
    figures = acct.summary(processes)
    assert figures["processes"] == 5
    assert figures["cpu"] == pytest.approx(13.37)
    assert figures["programs"][0] == ["cc1", "root", "other", 10.0, 2]
    assert figures["programs"][1] == ["pytest", "test user", "other", 3.2, 1]
    assert figures["by_user"] == {"root": 10.0, "test user": 3.2, "service user": 0.1, "other": 0.07}


def test_a_process_is_placed_by_its_ancestors_whose_pids_are_reused():
    """The shim's descendants ran in a container, the harness's on the host, the daemon's in the
    engine; a reused pid is the record alive at the child's start, and a child's start may be
    a second before its parent's (whole seconds, rounded apart)."""
    acct = _load("_acct")
    rows = [
        (b"containerd-shim", 0, 10, 1, 100, 60),   # 0
        (b"bash", 0, 11, 10, 101, 30),              # 1: in the container
        (b"python", 0, 12, 11, 103, 5),             # 2: its child, started a second "before" ...
        (b"cc1", 0, 13, 12, 102, 1),                # 3: ... as rounding may have it
        (b"python", 0, 500, 1, 100, 200),           # 4: the harness (host root)
        (b"git", 0, 11, 500, 150, 1),               # 5: pid 11 again, later: the harness's child
        (b"tar", 0, 14, 11, 150, 1),                # 6: child of the second pid 11 (git)
        (b"dockerd", 0, 20, 1, 90, 300),            # 7
        (b"exe", 0, 21, 20, 120, 1),                # 8: the engine's helper
        (b"orphan", 0, 30, 29, 120, 1),             # 9: no parent on record
    ]
    data = b"".join(_record(acct, c, uid, 10, 0, pid=pid, ppid=ppid, started=t, etime=e * acct.AHZ)
                    for c, uid, pid, ppid, t, e in rows)
    places = acct.places(acct.parse(data), frozenset({500}))
    assert places == ["engine", "container", "container", "container", "harness", "harness", "harness", "engine",
                      "engine", "other"]
    chains = acct.container_chains(acct.parse(data))
    assert chains[3] == ("bash", "python") and chains[1] == () and chains[5] is None
    figures = acct.summary(acct.parse(data), host_roots=frozenset({500}))
    assert {(c, p) for c, p, _, _ in figures["root_in_containers"]} == {("", "bash"), ("bash", "python"),
                                                                         ("bash > python", "cc1")}
    assert figures["by_place"] == {"harness": 0.3, "container": 0.3, "engine": 0.3, "other": 0.1}


def test_the_report_shows_the_programs_beside_the_cgroups_total():
    report = _load("_wholeset_report")
    run = {"acct": {"processes": 3, "cpu": 12.0, "by_user": {"root": 10.0, "test user": 2.0},
                    "by_place": {"container": 12.0},
                    "programs": [["cc1", "root", "container", 10.0, 2], ["pytest", "test user", "container", 2.0, 1]]},
           "cpu": {"harness": {"user": 5.0, "system": 1.0}, "daemon": {"user": 2.0, "system": 2.0},
                   "containers": {"user": 4.0, "system": 1.0}}}
    table = report.acct_table(run)
    assert "| cc1 | root | container | 10.0 | 83.3 % | 2 |" in table
    assert "| pytest | test user | container | 2.0 | 16.7 % | 1 |" in table
    assert "12 CPU-s in all (by user: root 10 s, test user 2 s; by place: container 12 s)" in table
    assert "the cgroups counted 15 CPU-s" in table


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("accton") is None, reason="accounting needs root and accton")
def test_a_process_that_ends_while_accounting_is_on_is_recorded(tmp_path):
    """The real kernel: a child that burns some CPU leaves a record with its name. (Accounting
    is one switch for the whole host: this turns it off at the end, so it must not run beside
    a benchmark that accounts.)"""
    acct = _load("_acct")
    accounting = acct.Accounting(tmp_path / "pacct")
    accounting.start()
    try:
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass"], check=True)
    finally:
        accounting.stop()
    figures = accounting.summary()
    mine = [row for row in figures["programs"] if row[0].startswith("python")]
    assert mine and max(row[3] for row in mine) >= 0.25


def test_the_command_refuses_a_missing_file_and_one_without_records(tmp_path, capsys):
    acct = _load("_acct")
    with pytest.raises(SystemExit):
        acct.main([str(tmp_path / "absent")])
    assert "absent" in capsys.readouterr().err
    junk = tmp_path / "junk"
    junk.write_bytes(b"\xff" * 200)
    with pytest.raises(SystemExit):
        acct.main([str(junk)])
    assert "no version-3 accounting records" in capsys.readouterr().err
    good = tmp_path / "pacct"
    good.write_bytes(_record(acct, b"cc1", 0, 100, 0))
    assert acct.main([str(good)]) == 0
    assert '"cc1"' in capsys.readouterr().out
