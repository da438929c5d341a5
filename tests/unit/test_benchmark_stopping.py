"""The benchmarks that start a private engine (benchmarks/whole_set.py, ci_sample_cost.py):
stopped from outside, they still run their clean-up and keep what they measured; and what
they read back from pytest is what pytest printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"


def _python(code: str, tmp_path: Path) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(BENCHMARKS)!r})\n" + textwrap.dedent(code))
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sigterm_runs_the_clean_up_and_a_second_one_does_not_cut_it_short(tmp_path):
    child = _python("""
        import time
        from pathlib import Path
        import _measure as M
        import _common as C
        data = {"measured": [1, 2]}
        with M.StopSignals():
            try:
                try:
                    Path("running").touch()
                    time.sleep(60)
                finally:
                    Path("cleaning").touch()
                    time.sleep(1.0)          # a second SIGTERM arrives here
                    Path("cleaned").touch()
            except M.Stopped as exc:
                data["stopped_by"] = str(exc)
                C.write_results("x", data, Path("out.json"))
                sys.exit(128 + exc.signum)
        """, tmp_path)
    _wait_for(tmp_path / "running")
    child.send_signal(signal.SIGTERM)
    _wait_for(tmp_path / "cleaning")
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert (tmp_path / "cleaned").exists()
    assert json.loads((tmp_path / "out.json").read_text()) == {"measured": [1, 2], "stopped_by": "SIGTERM"}


def test_without_stop_signals_sigterm_ends_the_process_before_its_clean_up(tmp_path):
    """What StopSignals is for: Python's default leaves the finally block unrun."""
    child = _python("""
        import time
        from pathlib import Path
        try:
            Path("running").touch()
            time.sleep(60)
        finally:
            Path("cleaned").touch()
        """, tmp_path)
    _wait_for(tmp_path / "running")
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGTERM and not (tmp_path / "cleaned").exists()


def test_results_are_replaced_whole(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _common as C
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = tmp_path / "r.json"
    C.write_results("x", {"n": 1}, out)
    C.write_results("x", {"n": 2, "more": list(range(1000))}, out)
    assert json.loads(out.read_text())["n"] == 2
    assert os.listdir(tmp_path) == ["r.json"]   # no temporary file left beside it


def test_durations_and_outcomes_are_read_as_pytest_wrote_them(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import ci_sample_cost as S
    finally:
        sys.path.remove(str(BENCHMARKS))
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import time, pytest

        @pytest.fixture(scope="module")
        def slow():
            time.sleep(0.3)

        def test_uses_it(slow):
            time.sleep(0.2)

        def test_fails():
            assert 1 == 2, "one is not two"

        @pytest.mark.skip(reason="not here")
        def test_skipped():
            pass
        """))
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_sample.py",
                           "--durations=0", "--durations-min=0", "-rA", f"--junitxml={junit}"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout
    rows = {(d["test"], d["phase"]): d["seconds"] for d in S.durations(proc.stdout)}
    assert rows[("test_sample.py::test_uses_it", "setup")] >= 0.3
    assert rows[("test_sample.py::test_uses_it", "call")] >= 0.2
    assert ("test_sample.py::test_fails", "call") in rows
    outcomes = {t["test"].rsplit("::", 1)[-1]: t for t in S.junit_outcomes(junit)}
    assert {k: v["outcome"] for k, v in outcomes.items()} == {"test_uses_it": "passed", "test_fails": "failed",
                                                              "test_skipped": "skipped"}
    assert "one is not two" in outcomes["test_fails"]["detail"]
