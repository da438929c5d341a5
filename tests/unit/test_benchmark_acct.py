"""benchmarks/_acct.py: the kernel's version-3 accounting records read back as CPU seconds by
program and user, and the whole-set report's table of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.test_benchmark_seams import _load


def _record(acct, command: bytes, uid: int, utime: int, stime: int, version: int = 3, etime: float = 50.0) -> bytes:
    return acct.RECORD.pack(0, version, 0, 0, uid, uid, 4242, 1, 0, etime, utime, stime, 0, 0, 0, 0, 0, 0, command)


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
    assert figures["programs"][0] == ["cc1", "root", 10.0, 2]
    assert figures["programs"][1] == ["pytest", "test user", 3.2, 1]
    assert figures["by_user"] == {"root": 10.0, "test user": 3.2, "service user": 0.1, "other": 0.07}


def test_the_report_shows_the_programs_beside_the_cgroups_total():
    report = _load("_wholeset_report")
    run = {"acct": {"processes": 3, "cpu": 12.0, "by_user": {"root": 10.0, "test user": 2.0},
                    "programs": [["cc1", "root", 10.0, 2], ["pytest", "test user", 2.0, 1]]},
           "cpu": {"harness": {"user": 5.0, "system": 1.0}, "daemon": {"user": 2.0, "system": 2.0},
                   "containers": {"user": 4.0, "system": 1.0}}}
    table = report.acct_table(run)
    assert "| cc1 | root | 10.0 | 83.3 % | 2 |" in table
    assert "| pytest | test user | 2.0 | 16.7 % | 1 |" in table
    assert "12 CPU-s in all (root 10 s, test user 2 s)" in table
    assert "the cgroups counted 15 CPU-s" in table


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("accton") is None, reason="accounting needs root and accton")
def test_a_process_that_ends_while_accounting_is_on_is_recorded(tmp_path):
    """The real kernel: a child that burns some CPU leaves a record with its name."""
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
    assert mine and max(row[2] for row in mine) >= 0.25
