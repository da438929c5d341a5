"""benchmarks/_wholeset_report.py's wheel figures: a wheel hard-linked into several
wheelhouses (the harness links a downloaded wheel another wheelhouse of the target holds)
is one file on disk, and the disk figure must say so."""

from __future__ import annotations

import os

from tests.unit.test_benchmark_seams import _load


def test_hard_linked_wheels_are_counted_once_on_disk(tmp_path):
    report = _load("_wholeset_report")
    for house in ("a", "b", "c"):
        (tmp_path / house / "wheels").mkdir(parents=True)
    shared = tmp_path / "a" / "wheels" / "six-1.16.0-py2.py3-none-any.whl"
    shared.write_bytes(b"x" * 1000)
    os.link(shared, tmp_path / "b" / "wheels" / shared.name)
    (tmp_path / "c" / "wheels" / shared.name).write_bytes(b"x" * 1000)   # the same wheel, downloaded again
    (tmp_path / "c" / "wheels" / "attrs-23.1.0-py3-none-any.whl").write_bytes(b"y" * 500)
    figures = report.wheel_sharing(tmp_path)
    assert (figures["wheelhouses"], figures["files"], figures["bytes"]) == (3, 4, 3500)
    assert (figures["distinct_files"], figures["distinct_bytes"]) == (2, 1500)
    assert (figures["disk_files"], figures["disk_bytes"]) == (3, 2500)
    assert "on disk 3 files" in report.wheel_line(figures)


def test_the_overhead_benchmark_counts_one_session_as_one_exec():
    """benchmarks/overhead.py's *docker execs*: issue 38's session carries the set-up and the
    test step's records in one exec (its bootstrap in argv), the launcher before it in two."""
    overhead = _load("overhead")
    timings = {"start": 0.2, "setup": 0.3, "tests": 3.0, "cleanup": 0.1, "total": 3.7, "wall": 3.8}

    def report(launch_argv):
        return {"timings": timings, "commands": [
            {"phase": "prepare", "argv": ["/usr/bin/python3", "-I", "-S", "/harness/trusted/prepare.py"], "duration": 0.2},
            {"phase": "apply:git_apply", "argv": ["git", "apply"], "duration": 0.02},
            {"phase": "launch", "argv": launch_argv, "duration": 3.2},
            {"phase": "tests", "argv": ["/bin/bash", "-c", "pytest"], "duration": 3.0}]}

    session = overhead.decompose(report(["/usr/bin/python3", "-I", "-S", "-c", "\nimport io, json"]))
    two = overhead.decompose(report(["/usr/bin/python3", "-I", "-S", "/harness/trusted/launcher.py", "--plan"]))
    assert (session["execs"], two["execs"]) == (1, 2)
    assert session["setup_execs"] == two["setup_execs"] == 0.2 + 3.2 - 3.0
