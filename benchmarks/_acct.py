"""CPU time by program during a benchmark, from the kernel's process accounting (acct(5)).

Every process that ends while accounting is on leaves one record (its command name, user,
own user and system time); ``accton FILE`` turns it on, ``accton off`` off (Debian's
``acct`` package). Unlike the cgroup figures (harness, engine daemons, containers), this
says *which programs* used the CPU: the compiler, pip, the tests' interpreters, git, tar,
the engine's helper processes. The user tells the sandbox's processes apart: the test user
(uid 1000) runs the tests and the set-up step, the service user (1001) the local services,
root everything else (the harness and its tools, image builds, the engine).

Processes still running when accounting stops (the engine's daemons, which live longer than
the run) have no record: the cgroup figures count them. Records are version 3
(``struct acct_v3`` of <linux/acct.h>), times in ``comp_t`` ticks of AHZ (100 per second).

Where a process ran is found from its ancestors (:func:`places`): under a ``containerd-shim``
it ran in a container (an image build or a sandbox), under the harness's process on the
host (resolution, downloads, exports, base images), under the engine's daemons in the engine
(its helper processes that unpack and pack layers)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

#: struct acct_v3: flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float),
#: utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16]
RECORD = struct.Struct("<BBHIIIIIIfHHHHHHHH16s")
AHZ = 100
USERS = {0: "root", 1000: "test user", 1001: "service user"}


@dataclass(frozen=True)
class Process:
    command: str
    uid: int
    cpu: float        # user + system seconds
    elapsed: float    # seconds from start to exit
    pid: int = 0
    ppid: int = 0     # the parent when it ended (a reaper's, once its own parent had gone)
    started: int = 0  # seconds since the epoch


def comp_t(value: int) -> int:
    """A ``comp_t`` (13-bit mantissa, 3-bit base-8 exponent) as an integer."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 0x7))


def parse(data: bytes) -> list[Process]:
    """The version-3 records of an accounting file (others are skipped)."""
    out = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] & 0x7F != 3:
            continue
        uid, pid, ppid, btime, etime, utime, stime = fields[4], *fields[6:12]
        command = fields[-1].split(b"\0", 1)[0].decode(errors="replace")
        out.append(Process(command, uid, (comp_t(utime) + comp_t(stime)) / AHZ, etime / AHZ, pid, ppid, btime))
    return out


#: the process an ancestor's command says a process ran under (nearest first)
ANCESTORS = {"containerd-shim": "container", "dockerd": "engine", "containerd": "engine"}


def parents(processes: list[Process]) -> list[int | None]:
    """Each process's parent record (its index), or None: the record of the parent's pid alive
    when the child started (pids are reused; ``started`` is in whole seconds, and a child's may
    round below its parent's)."""
    by_pid: dict[int, list[int]] = {}
    for i, p in enumerate(processes):
        by_pid.setdefault(p.pid, []).append(i)
    out: list[int | None] = []
    for i, child in enumerate(processes):
        best = None
        for j in by_pid.get(child.ppid, ()):
            p = processes[j]
            if j != i and p.started - 1 <= child.started <= p.started + p.elapsed + 2 and \
                    (best is None or p.started > processes[best].started):
                best = j
        out.append(best)
    return out


def container_chains(processes: list[Process], depth: int = 2,
                     up: list[int | None] | None = None) -> list[tuple[str, ...] | None]:
    """For a process in a container, the commands of its first ``depth`` ancestors below the
    ``containerd-shim`` (the command the engine started, then its child), outermost first;
    None elsewhere. What work a build container's process did shows there: an environment's
    install runs under ``timeout`` then ``bash`` (which ends as its last command, ``chmod``).
    ``up``: :func:`parents`, when the caller has it."""
    up = parents(processes) if up is None else up
    out: list[tuple[str, ...] | None] = []
    for i in range(len(processes)):
        chain, current = [], up[i]
        while current is not None and len(chain) < 200 and processes[current].command != "containerd-shim":
            chain.append(processes[current].command)
            current = up[current]
        out.append(tuple(chain[::-1][:depth]) if current is not None else None)
    return out


def places(processes: list[Process], host_roots: frozenset[int] = frozenset(),
           up: list[int | None] | None = None) -> list[str]:
    """Where each process ran: "container", "harness" (a descendant of a process whose pid
    is in ``host_roots``, or that process), "engine" (its daemons, their shims and helpers),
    or "other" where its ancestry ends without telling (parents as :func:`parents` finds them;
    ``up`` when the caller has them)."""
    up = parents(processes) if up is None else up
    memo: dict[int, str] = {}   # what a process implies for its descendants

    def place(i: int) -> str:
        # walk up to a process that says where its descendants run, or to one already known
        if processes[i].command in ANCESTORS:   # the engine's own processes
            return "engine"
        chain, found, current = [], "other", i
        while len(chain) < 200:
            p = processes[current]
            if current != i and current in memo:
                found = memo[current]
                break
            if current != i:
                chain.append(current)
            if p.pid in host_roots or (current != i and p.command in ANCESTORS):
                found = "harness" if p.pid in host_roots else ANCESTORS[p.command]
                break
            if p.ppid in host_roots:
                found = "harness"
                break
            if up[current] is None:
                break
            current = up[current]
        for j in chain:
            if j not in memo:
                p = processes[j]
                memo[j] = "harness" if p.pid in host_roots else ANCESTORS.get(p.command, found)
        return found

    return [place(i) for i in range(len(processes))]


def summary(processes: list[Process], top: int = 40, host_roots: frozenset[int] = frozenset()) -> dict:
    """CPU seconds in all, by user, by place (:func:`places`), by (program, user, place) for
    the ``top`` programs, and root's processes in containers by :func:`container_chains`."""
    cpu: Counter = Counter()
    count: Counter = Counter()
    users: Counter = Counter()
    where: Counter = Counter()
    up = parents(processes)   # one pass for both walks
    for p, place in zip(processes, places(processes, host_roots, up)):
        user = USERS.get(p.uid, "other")
        cpu[(p.command, user, place)] += p.cpu
        count[(p.command, user, place)] += 1
        users[user] += p.cpu
        where[place] += p.cpu
    chains: Counter = Counter()
    chain_count: Counter = Counter()
    for p, chain in zip(processes, container_chains(processes, up=up)):
        if chain is not None and p.uid == 0:
            chains[(" > ".join(chain), p.command)] += p.cpu
            chain_count[(" > ".join(chain), p.command)] += 1
    return {"processes": len(processes), "cpu": round(sum(cpu.values()), 2),
            "by_user": {u: round(s, 2) for u, s in users.most_common()},
            "by_place": {w: round(s, 2) for w, s in where.most_common()},
            "root_in_containers": [[chain, command, round(s, 2), chain_count[(chain, command)]]
                                   for (chain, command), s in chains.most_common(top)],
            "programs": [[command, user, place, round(s, 2), count[(command, user, place)]]
                         for (command, user, place), s in cpu.most_common(top)]}


class Accounting:
    """Process accounting into ``path`` between :meth:`start` and :meth:`stop` (root only)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.on = False

    @staticmethod
    def available() -> bool:
        return shutil.which("accton") is not None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(b"")
        subprocess.run(["accton", str(self.path)], check=True, capture_output=True)
        self.on = True

    def stop(self) -> None:
        if self.on:
            subprocess.run(["accton", "off"], check=False, capture_output=True)
            self.on = False

    def summary(self, host_roots: frozenset[int] = frozenset()) -> dict | None:
        return summary(parse(self.path.read_bytes()), host_roots=host_roots) if self.path.exists() else None


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/_acct.py FILE [--host-root PID ...] [--top N]``: an accounting file's
    table (e.g. one kept from a benchmark's run)."""
    import argparse
    import json
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("file", type=Path)
    p.add_argument("--host-root", type=int, nargs="*", default=[], help="the harness's pid: its descendants ran on the host")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args(argv)
    try:
        data = args.file.read_bytes()
    except OSError as exc:
        p.error(f"{args.file}: {exc.strerror or exc}")
    processes = parse(data)
    if data and not processes:
        p.error(f"{args.file}: no version-3 accounting records in its {len(data)} bytes (is it an acct(5) file?)")
    print(json.dumps(summary(processes, args.top, frozenset(args.host_root)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
