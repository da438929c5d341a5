"""benchmarks/_measure.py's LoopDisk, the private engine's file system in whole_set.py and
ci_sample_cost.py, with a real loop mount (root, as CI runs): what the engine frees must
leave the host's disk too, or the host's free-space floor (--min-free) stops a run early."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

MB = 1024 ** 2


@pytest.fixture
def disk(M, tmp_path):
    loop = M.LoopDisk(tmp_path / "engine.img", tmp_path / "mnt", 256 * MB).create()
    try:
        yield loop
    finally:
        loop.remove()


def _write(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        for _ in range(size // MB):
            handle.write(os.urandom(MB))
        handle.flush()
        os.fsync(handle.fileno())


def test_what_the_file_system_frees_is_given_back_to_the_host(disk):
    before = disk.host_bytes()
    _write(disk.mount / "layer.bin", 96 * MB)
    os.sync()
    written = disk.host_bytes()
    assert written - before >= 90 * MB, "the sparse file should have grown by what was written"
    assert disk.used() >= 90 * MB

    (disk.mount / "layer.bin").unlink()
    os.sync()
    # the discards go out once the journal commits the freeing transaction: soon, not at once
    deadline = time.monotonic() + 20
    while written - disk.host_bytes() < 80 * MB and time.monotonic() < deadline:
        time.sleep(0.2)
        os.sync()
    freed = written - disk.host_bytes()
    assert disk.used() < 10 * MB
    assert freed >= 80 * MB, f"only {freed / MB:.0f} MB of the 96 MB freed inside left the host's disk"


def test_a_removed_disk_leaves_no_mount_and_no_file(M, tmp_path):
    loop = M.LoopDisk(tmp_path / "engine.img", tmp_path / "mnt", 64 * MB).create()
    assert os.path.ismount(loop.mount)
    loop.remove()
    assert not os.path.ismount(tmp_path / "mnt")
    assert not (tmp_path / "engine.img").exists()
