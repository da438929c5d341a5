"""Leases and the last-use index (harness.bookkeeping.leases, .usage), with real processes:
a lease is alive exactly while its holder lives, a killed holder's lease is recognised as
dead, and the gate keeps a lease from appearing while prune holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from harness.bookkeeping.leases import Lease, gate, live_leases, read_leases, remove_stale
from harness.bookkeeping.usage import UseIndex

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.bookkeeping.leases import Lease
    lease = Lease(Path(sys.argv[1]))
    for tag in sys.argv[2:]:
        lease.hold(tag)
    print("held", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def holder(tmp_path):
    """Start a process holding a lease on the given tags; yields (process, lease dir)."""
    started = []

    def start(*tags: str):
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "leases"), *tags],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        started.append(proc)
        return proc

    yield start, tmp_path / "leases"
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_live_holders_lease_protects_its_tags_and_a_killed_ones_does_not(holder):
    start, lease_dir = holder
    proc = start("harness-inst:a-1", "harness-env:py3.9-2")
    leases = live_leases(lease_dir)
    assert set(leases) == {"harness-inst:a-1", "harness-env:py3.9-2"}
    assert leases["harness-inst:a-1"].pid == proc.pid
    assert f"pid {proc.pid}" in leases["harness-inst:a-1"].describe()
    os.kill(proc.pid, signal.SIGKILL)  # no clean-up code runs: the kernel drops the flock
    proc.wait()
    assert live_leases(lease_dir) == {}
    [record] = read_leases(lease_dir)
    assert not record.alive and record.tags == {"harness-inst:a-1", "harness-env:py3.9-2"}
    with gate(lease_dir, exclusive=True):
        assert [r.pid for r in remove_stale(lease_dir)] == [proc.pid]
    assert read_leases(lease_dir) == []


def test_released_lease_protects_nothing_and_leaves_no_file(tmp_path):
    lease = Lease(tmp_path / "leases")
    lease.hold("harness-inst:x-1")
    assert set(live_leases(tmp_path / "leases")) == {"harness-inst:x-1"}  # seen alive, even from this process
    lease.release()
    assert read_leases(tmp_path / "leases") == [] and lease.tags() == frozenset()


def test_leasing_waits_while_prune_holds_the_gate(tmp_path):
    lease_dir = tmp_path / "leases"
    lease = Lease(lease_dir)
    done = threading.Event()
    with gate(lease_dir, exclusive=True):
        worker = threading.Thread(target=lambda: (lease.hold("harness-inst:y-1"), done.set()))
        worker.start()
        time.sleep(0.3)
        assert not done.is_set()           # blocked: prune's view of the leases cannot change under it
        assert live_leases(lease_dir) == {}
    worker.join(10)
    assert done.is_set() and set(live_leases(lease_dir)) == {"harness-inst:y-1"}
    lease.release()


def test_use_index_keeps_the_latest_use_per_tag_and_image(tmp_path):
    index = UseIndex(tmp_path)
    index.record_image("harness-inst:a-1", "sha256:1", at=100.0)
    index.record_image("harness-inst:a-1", "sha256:1", at=50.0)     # an older record never dates it back
    index.record_image("harness-inst:a-1", "sha256:2", at=10.0)     # the tag re-pointed: a separate key
    assert index.last_uses() == {("harness-inst:a-1", "sha256:1"): 100.0, ("harness-inst:a-1", "sha256:2"): 10.0}
    index.record_instance("a__a-1", "harness-inst:a-1")
    index.record_instance("a__a-2", "harness-inst:a-1")
    assert index.instances_by_tag() == {"harness-inst:a-1": {"a__a-1", "a__a-2"}}
    index.save_layer_sizes({"sha256:1": [10, 20]})
    assert index.layer_sizes(["sha256:1", "sha256:9"]) == {"sha256:1": [10, 20]}
