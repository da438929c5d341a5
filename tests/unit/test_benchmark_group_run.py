"""benchmarks/_measure.py's GroupRun, the measured command of whole_set.py and
ci_sample_cost.py, with real processes: its exit status, its elapsed time, and the whole
process group ended (the command and what it started) on a limit or an interrupt."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest



#: a command that starts a grandchild (``sleep 60``), writes its pid to ``grandchild.pid``, then sleeps
PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    if len(sys.argv) > 1:
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # the grandchild inherits it
    child = subprocess.Popen(["sleep", "60"])
    Path("grandchild.pid").write_text(str(child.pid))
    time.sleep(60)
    """)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _run(M, tmp_path: Path, argv: list[str], **kw):
    return M.GroupRun(argv, out=tmp_path / "out.log", err=tmp_path / "err.log", every=kw.pop("every", 0.05),
                      cwd=tmp_path, **kw)


def test_a_normal_command_gives_its_exit_status_output_and_samples(M, tmp_path):
    run = _run(M, tmp_path, [sys.executable, "-c", "import sys, time; time.sleep(0.3); print('out');"
                             " print('err', file=sys.stderr); sys.exit(3)"])
    status, usage = run.wait(lambda: {"t": run.elapsed()})
    assert os.waitstatus_to_exitcode(status) == 3
    assert usage.ru_utime + usage.ru_stime > 0
    assert run.stopped == ""
    assert (tmp_path / "out.log").read_text() == "out\n" and (tmp_path / "err.log").read_text() == "err\n"
    assert run.samples and all("t" in s for s in run.samples)


def test_it_records_the_elapsed_time(M, tmp_path):
    before = time.monotonic()
    run = _run(M, tmp_path, ["sleep", "0.5"])
    status, _ = run.wait(lambda: {})
    after = time.monotonic()
    assert os.waitstatus_to_exitcode(status) == 0
    assert 0.5 <= run.elapsed() <= after - before + 0.01
    assert before <= run.started <= after and abs(run.started_at - time.time()) < 60


def test_a_limit_stops_the_whole_group(M, tmp_path):
    """The probe finds a limit reached (here: the grandchild has started): the command and
    its grandchild both get SIGTERM; the first reason given is the one kept."""
    run = _run(M, tmp_path, [sys.executable, "-c", PARENT])

    def probe() -> dict:
        if (tmp_path / "grandchild.pid").exists():
            run.stop("limit reached")
            run.stop("a second reason")
        return {"t": run.elapsed()}

    status, _ = run.wait(probe)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM
    assert run.stopped == "limit reached"
    assert _gone(int((tmp_path / "grandchild.pid").read_text()))
    assert run.elapsed() < 30


def test_an_interrupt_ends_the_whole_group_with_sigkill_and_is_raised_again(M, tmp_path):
    """The wait is interrupted (a signal handler raising, as StopSignals does); the group
    ignores SIGTERM, so after ``grace`` s it is killed; ``on_interrupt`` sees how it ended."""

    class Interrupt(Exception):
        pass

    def handler(signum, frame):
        raise Interrupt()

    seen: list = []
    run = _run(M, tmp_path, [sys.executable, "-c", PARENT, "ignore-sigterm"], grace=0.5)

    def probe() -> dict:
        if (tmp_path / "grandchild.pid").exists() and not seen:
            seen.append("armed")
            signal.setitimer(signal.ITIMER_REAL, 0.2)
        return {}

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        with pytest.raises(Interrupt):
            run.wait(probe, on_interrupt=lambda status, usage: seen.append((status, usage)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    (status, usage), = seen[1:]
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL and usage is not None
    assert run.stopped == "interrupted (Interrupt())"
    assert _gone(int((tmp_path / "grandchild.pid").read_text()))


def test_a_command_that_cannot_start_is_an_interrupt_with_no_status(M, tmp_path):
    seen: list = []
    run = _run(M, tmp_path, [str(tmp_path / "no-such-command")])
    with pytest.raises(FileNotFoundError):
        run.wait(lambda: {}, on_interrupt=lambda status, usage: seen.append((status, usage)),
                 interrupted=lambda exc: f"stopped: {type(exc).__name__}")
    assert seen == [(None, None)] and run.stopped == "stopped: FileNotFoundError" and run.samples == []
