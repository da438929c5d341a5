"""SIGTERM and SIGHUP inside the command line's scope raise a KeyboardInterrupt that names the
signal; outside it, and once the command returned, the previous handlers are back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from harness.run.stopping import Terminated, exit_code, signal_name, stopped_like_ctrl_c


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopping_signal_raises_a_keyboard_interrupt_naming_it(sig):
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt) as caught:
        with stopped_like_ctrl_c():
            os.kill(os.getpid(), sig)  # the handler runs in this thread as soon as kill returns
            pytest.fail("the signal did not interrupt")
    assert isinstance(caught.value, Terminated) and caught.value.signum == sig
    assert exit_code(caught.value) == 128 + sig
    assert signal_name(caught.value) == signal.Signals(sig).name
    assert signal.getsignal(sig) is before


def test_ctrl_c_keeps_130():
    assert exit_code(KeyboardInterrupt()) == 130
    assert signal_name(KeyboardInterrupt()) == "Ctrl-C"


def test_outside_the_main_thread_nothing_is_installed():
    seen = {}

    def worker():
        with stopped_like_ctrl_c():
            seen["handler"] = signal.getsignal(signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["handler"] is before


def test_the_command_line_exits_143_on_sigterm_without_a_traceback(tmp_path):
    """A real ``harness view`` process (it blocks serving) stopped by SIGTERM: exit 143, no traceback."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text("{}")
    (run_dir / "report.html").write_text("<html></html>")
    proc = subprocess.Popen([sys.executable, "-m", "harness", "view", str(run_dir), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0  # harness view treats a stop as the end of serving, as for Ctrl-C
