"""The working copy filled by the container's first process (harness/integrity/steps.py
``early_reset``, harness/engine/sandbox.py ``EarlyCommand``) and the set-up step's wait for
it (harness/incontainer/prepare.py ``early_reset_done``)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from harness.engine.layers import PRISTINE_TREE
from harness.engine.early import EarlyCommand
from harness.engine.early import first_process as _first_process
from harness.incontainer import prepare
from harness.integrity import steps


def test_the_early_reset_copies_the_pristine_trees_entries_as_the_test_user_with_nothing():
    early = steps.early_reset()
    argv = list(early.argv)
    drop, command = argv[:argv.index("--") + 1], argv[argv.index("--") + 1:]
    assert drop[0] == "setpriv" and f"--reuid={steps.TEST_UID}" in drop and "--bounding-set=-all" in drop
    assert command[:5] == ["find", PRISTINE_TREE, "-mindepth", "1", "-maxdepth"]
    assert command[command.index("-exec") + 1:] == ["cp", "-a", "-t", steps.TESTBED, "--", "{}", "+"]
    # on the root-owned /harness: the test user can never write the marker
    assert early.marker == steps.TESTBED_READY and early.marker.startswith(steps.IO_DIR + "/")


@pytest.mark.parametrize("work, status", [(("true",), "0"), (("sh", "-c", "exit 3"), "3")])
def test_the_first_process_writes_the_works_status_then_sleeps(tmp_path, work, status):
    marker = tmp_path / "ready"
    argv = _first_process(EarlyCommand(work, str(marker)))
    proc = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.read_text().strip() == status
        assert not (tmp_path / "ready.tmp").exists()        # renamed into place, never half-written
        assert proc.poll() is None                          # and the process lives on (sleep infinity)
    finally:
        proc.kill()
        proc.wait()
    assert _first_process(None) == ["sleep", "infinity"]


def test_the_set_up_step_reads_the_status_and_refuses_what_is_not_a_regular_file(tmp_path):
    marker = tmp_path / "ready"
    marker.write_text("0\n")
    assert prepare.early_reset_done(str(marker), 1) is True
    marker.write_text("1\n")
    assert prepare.early_reset_done(str(marker), 1) is False
    link = tmp_path / "link"
    os.symlink(marker, link)
    with pytest.raises(RuntimeError, match="root-owned file"):
        prepare.early_reset_done(str(link), 1)
    with pytest.raises(RuntimeError, match="not filled"):    # never a second copy beside a running one
        prepare.early_reset_done(str(tmp_path / "absent"), 0.05)
