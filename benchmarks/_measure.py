"""Measuring a private engine and the processes around it (benchmarks only).

* :class:`LoopDisk` — a file system of its own for an engine's data root (a sparse ext4
  image, loop-mounted): what the engine holds on disk, images, build containers and
  leftovers included, is read exactly and at once with ``statvfs`` however many layers
  there are (``du`` over a data root of thousands of layers takes minutes on a slow disk).
  Its size caps what the engine may write, so the host keeps its free space.
* :class:`CpuGroup` — a cpuacct cgroup (v1, or the v2 hierarchy): CPU of everything in it
  and everything that ever was (the kernel charges each ancestor as it runs, so the
  seconds of a container removed long ago stay in its parent's count).
* :func:`du` — bytes a directory occupies (blocks, each hard-linked file once).
* :class:`Periodic` — a sampler thread.
* :class:`Results` — a benchmark's raw JSON, rewritten atomically as it grows.
* :func:`end_process_group` — SIGTERM, then SIGKILL, a measured process group.
* :class:`GroupRun` — a measured command in a process group of its own: sampled while
  it runs, stopped on a limit, ended whole (SIGTERM, then SIGKILL) when interrupted.
* :class:`StopSignals` — SIGTERM and SIGHUP raised as :class:`Stopped` in the main thread,
  so that a benchmark stopped from outside still runs its ``finally`` blocks (writes what
  it measured, stops its engine, unmounts its file system); Python's default would end
  the process at once and leave the private engine running in a session of its own.

Nothing here touches the shared engine.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import _common

CGROUP_ROOT = Path("/sys/fs/cgroup")


# ----------------------------------------------------------------------------- disk

def du(path: Path) -> int:
    """Bytes ``path`` occupies on disk (allocated blocks; a hard-linked file once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(path)]
    while stack:
        top = stack.pop()
        try:
            entries = os.scandir(top)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if st.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def filesystem_facts(path: Path) -> dict:
    st = os.statvfs(path)
    out = subprocess.run(["df", "-h", "--output=source,fstype,size,used,avail,pcent,target", str(path)],
                         capture_output=True, text=True).stdout.strip()
    return {"path": str(path), "size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize,
            "df": out}


class LoopDisk:
    """An ext4 file system in a sparse file, loop-mounted at ``mount``."""

    def __init__(self, image: Path, mount: Path, size_bytes: int) -> None:
        self.image, self.mount, self.size_bytes = Path(image), Path(mount), int(size_bytes)
        self.baseline = 0
        self.mounted = False

    def create(self) -> "LoopDisk":
        self.mount.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as handle:
            handle.truncate(self.size_bytes)
        # one inode per 8 KiB: layers of virtual environments and source trees are many small files
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-i", "8192", str(self.image)], check=True,
                       capture_output=True)
        # noinit_itable: the kernel would otherwise zero every inode table in the
        # background, writing hundreds of MB into the sparse file while the benchmark runs;
        # discard: blocks the engine frees (build containers, replaced layers) are punched out
        # of the sparse file, so the host's free space (--min-free) follows what the engine
        # holds; without it the file keeps every block ever written (41 GB on the host for a
        # file system with 28 GB in use, Verified's cold run)
        subprocess.run(["mount", "-o", "loop,noinit_itable,discard", str(self.image), str(self.mount)],
                       check=True, capture_output=True)
        self.mounted = True
        self.baseline = self._used()
        return self

    def _used(self) -> int:
        st = os.statvfs(self.mount)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def used(self) -> int:
        """Bytes written since the file system was made."""
        return max(0, self._used() - self.baseline)

    def host_bytes(self) -> int:
        """What the sparse file takes on the host's disk (its allocated blocks)."""
        return os.stat(self.image).st_blocks * 512

    def unmount(self) -> None:
        if not self.mounted:
            return
        # an engine that was killed leaves its layers' overlay mounts (and the bind mount
        # of its overlay directory) inside; the file system cannot be unmounted under them
        unmount_below(self.mount)
        for attempt in range(10):
            if subprocess.run(["umount", str(self.mount)], capture_output=True).returncode == 0:
                break
            time.sleep(1 + attempt)
        else:
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)
        self.mounted = False

    def remove(self) -> None:
        self.unmount()
        self.image.unlink(missing_ok=True)
        shutil.rmtree(self.mount, ignore_errors=True)


def mounts_below(path: Path) -> list[str]:
    """Mount points strictly below ``path`` (``/proc/mounts``), deepest first."""
    prefix = str(Path(path).resolve()).rstrip("/") + "/"
    with open("/proc/mounts") as handle:
        points = [line.split()[1].replace("\\040", " ") for line in handle]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def unmount_below(path: Path) -> None:
    """Lazily unmount every mount point below ``path``, deepest first."""
    for point in mounts_below(path):
        subprocess.run(["umount", "-l", point], capture_output=True)


# ----------------------------------------------------------------------------- CPU

def _cpuacct_v1() -> Path | None:
    """The mount point of the v1 hierarchy that has the cpuacct controller, if any."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) > 3 and parts[2] == "cgroup" and "cpuacct" in parts[3].split(","):
            return Path(parts[1])
    return None


def _cgroup_mounts() -> list[Path]:
    """Every cgroup hierarchy mounted: the v1 ones and the v2 one (on a hybrid system,
    ``/sys/fs/cgroup/unified``, where the engine also makes the groups it is given)."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] in ("cgroup", "cgroup2"):
            out.append(Path(parts[1]))
    return out


class CpuGroup:
    """One cgroup's CPU (user and system seconds of all it ever held). ``relative`` is its
    path below the hierarchy's root, e.g. ``hxb-1234/harness`` (what dockerd's
    ``--cgroup-parent`` takes, with a leading slash)."""

    def __init__(self, relative: str) -> None:
        self.relative = relative.strip("/")
        v1 = _cpuacct_v1()
        self.version = 1 if v1 is not None else 2
        self.path = (v1 if v1 is not None else CGROUP_ROOT) / self.relative

    def create(self) -> "CpuGroup":
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def join_self(self) -> None:
        """Move the calling process into the group (a ``preexec_fn``: runs in the child)."""
        with open(self.path / "cgroup.procs", "w") as handle:
            handle.write(str(os.getpid()))

    def seconds(self) -> tuple[float, float]:
        """(user, system) CPU seconds so far."""
        try:
            if self.version == 1:
                ticks = dict(line.split() for line in (self.path / "cpuacct.stat").read_text().splitlines())
                hz = os.sysconf("SC_CLK_TCK")
                return int(ticks["user"]) / hz, int(ticks["system"]) / hz
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
            return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return float("nan"), float("nan")


def remove_cgroup_tree(top: str) -> None:
    """Remove ``top`` (relative) and what is below it in every hierarchy (empty groups
    only: a group with a process in it stays, and says so by staying)."""
    roots = _cgroup_mounts() or [CGROUP_ROOT]
    for root in roots:
        base = root / top.strip("/")
        if not base.is_dir():
            continue
        for dirpath, _, _ in sorted(os.walk(base), key=lambda item: -len(item[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


# ----------------------------------------------------------------------------- sampling

class Periodic:
    """Calls ``probe()`` every ``every`` seconds in a thread and keeps what it returns."""

    def __init__(self, probe: Callable[[], dict], every: float) -> None:
        self.probe, self.every = probe, every
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="bench-sampler")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.probe())
            except Exception as exc:  # noqa: BLE001 — a failed sample is recorded, the run goes on
                self.samples.append({"error": repr(exc)})
            self._stop.wait(self.every)

    def __enter__(self) -> "Periodic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)


# ----------------------------------------------------------------------------- stopping

class Stopped(BaseException):
    """A stop signal arrived (a BaseException, like KeyboardInterrupt: no ``except
    Exception`` on the way up swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """While active, the first SIGTERM or SIGHUP raises :class:`Stopped` in the main
    thread; later ones are ignored, so that the clean-up the first one started (stopping
    the engine, unmounting) is not itself cut short. SIGKILL still ends everything."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, _frame) -> None:
        if self.received is not None:
            return
        self.received = signum
        raise Stopped(signum)

    def __enter__(self) -> "StopSignals":
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def end_process_group(proc: subprocess.Popen, grace: float = 60.0):
    """SIGTERM the process group ``proc`` leads, SIGKILL it after ``grace`` s; its (status,
    rusage), or (None, None) if it never ended."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                return status, usage
            time.sleep(0.5)
    return None, None


def _interrupted(exc: BaseException) -> str:
    return f"interrupted ({exc!r})"


class GroupRun:
    """One measured command, run in a process group of its own (``start_new_session``),
    its output to the files ``out`` and ``err``; ``popen`` goes to :class:`subprocess.Popen`
    as it is (``cwd``, ``env``, ``preexec_fn``: a cgroup to join, say).

    :meth:`wait` starts it and waits for it while a :class:`Periodic` calls ``probe`` every
    ``every`` seconds (what it returns is kept in :attr:`samples`); it returns the
    command's (wait status, rusage). Two ways to stop it early:

    * a limit: ``probe`` (or anything else) calls :meth:`stop` with the reason: the
      group gets SIGTERM, and :meth:`wait` goes on until the command has exited;
    * an interrupt: whatever the wait raises (:class:`Stopped`, ``KeyboardInterrupt``, an
      error) ends the whole group with :func:`end_process_group` (SIGTERM, SIGKILL after
      ``grace`` s), :attr:`stopped` says ``interrupted(exc)`` unless a limit said why
      first, ``on_interrupt(status, usage)`` records what was measured (both ``None`` if
      the group never ended or never started), and the exception goes on up.

    :attr:`started` (monotonic) and :attr:`started_at` (epoch) are taken when the run is
    made, :meth:`elapsed` counts from there; :attr:`stopped` is ``""`` unless stopped.
    """

    def __init__(self, argv: list[str], *, out: Path, err: Path, every: float, grace: float = 60.0,
                 **popen) -> None:
        self.argv, self.out, self.err, self.every, self.grace, self.popen = argv, out, err, every, grace, popen
        self.started, self.started_at = time.monotonic(), time.time()
        self.stopped = ""
        self.proc: subprocess.Popen | None = None
        self.sampler: Periodic | None = None

    @property
    def samples(self) -> list[dict]:
        """What ``probe`` returned so far (a failed probe: ``{"error": ...}``)."""
        return self.sampler.samples if self.sampler is not None else []

    def elapsed(self) -> float:
        """Seconds since the run was made."""
        return time.monotonic() - self.started

    def stop(self, why: str) -> None:
        """A limit is reached: SIGTERM the group (once; the first reason is kept)."""
        if self.stopped:
            return
        self.stopped = why
        assert self.proc is not None, "stop() before the command started"
        os.killpg(self.proc.pid, signal.SIGTERM)

    def wait(self, probe: Callable[[], dict], *,
             on_interrupt: Callable[[int | None, resource.struct_rusage | None], None] = lambda status, usage: None,
             interrupted: Callable[[BaseException], str] = _interrupted) -> tuple[int, resource.struct_rusage]:
        """Start the command, sample it until it exits; its (wait status, rusage)."""
        self.sampler = Periodic(probe, self.every)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            try:
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, start_new_session=True,
                                             **self.popen)
                with self.sampler:
                    _, status, usage = os.wait4(self.proc.pid, 0)
            except BaseException as exc:
                self.stopped = self.stopped or interrupted(exc)
                ended = end_process_group(self.proc, self.grace) if self.proc is not None else (None, None)
                on_interrupt(*ended)
                raise
        return status, usage


class Results:
    """A benchmark's raw JSON (``_common.write_results``), rewritten atomically whenever it
    grows (from a sampler thread as instances finish, and from the main thread), so that a
    run stopped at any point leaves what it measured up to then."""

    def __init__(self, name: str, data: dict, out: Path | None) -> None:
        self.name, self.data, self.out = name, data, out
        self.path: Path | None = None
        self._lock = threading.Lock()

    def save(self) -> Path:
        with self._lock:
            self.path = _common.write_results(self.name, self.data, self.out)
            return self.path
