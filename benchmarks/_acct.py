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
(``struct acct_v3`` of <linux/acct.h>), times in ``comp_t`` ticks of AHZ (100 per second)."""

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
        uid, etime, utime, stime = fields[4], fields[9], fields[10], fields[11]
        command = fields[-1].split(b"\0", 1)[0].decode(errors="replace")
        out.append(Process(command, uid, (comp_t(utime) + comp_t(stime)) / AHZ, etime / AHZ))
    return out


def summary(processes: list[Process], top: int = 40) -> dict:
    """CPU seconds in all, by user, and by (program, user) for the ``top`` programs."""
    cpu: Counter = Counter()
    count: Counter = Counter()
    users: Counter = Counter()
    for p in processes:
        user = USERS.get(p.uid, "other")
        cpu[(p.command, user)] += p.cpu
        count[(p.command, user)] += 1
        users[user] += p.cpu
    return {"processes": len(processes), "cpu": round(sum(cpu.values()), 2),
            "by_user": {u: round(s, 2) for u, s in users.most_common()},
            "programs": [[command, user, round(s, 2), count[(command, user)]]
                         for (command, user), s in cpu.most_common(top)]}


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

    def summary(self) -> dict | None:
        return summary(parse(self.path.read_bytes())) if self.path.exists() else None
