"""How many cores a sandbox gets (pure).

SWE-bench starts its containers without a CPU quota: a test process there sees the
engine host's cores (``os.cpu_count()``, an unlimited cgroup quota), and test suites act
on what they see: pylint's ``test_jobs_score`` is skipped below two cores, pytest-xdist
sizes its workers by them. The harness does the same by default. A cap, the run's
(``--cpus``) or the spec's (``cpus:``), sets a CFS quota of that many cores, the smaller
cap winning; a cap at or above the engine host's cores sets none (the engine refuses a
quota above them, and it would change nothing).

The CPU weight (``cpu.shares``) says the same number of cores, 1024 a core: on a cgroup v1
engine host, code that counts cores from the cgroup reads the shares when there is no
quota (pylint's ``_query_cpu``: ``shares // 1024``), and the engine's default of 1024
would tell it one core where SWE-bench's validation machines told it all of them (its
published PASS_TO_PASS lists hold ``test_jobs_score`` as passed, not skipped). Between
sandboxes the weights stay proportional to their cores.

What a sandbox had is recorded in report.json (``resources.cpus``, :meth:`CpuLimit.as_dict`),
and graded tests that were skipped under a quota are named (:func:`skipped_under_cap`):
a test skipped here that a machine with more cores would have run is never a silent
difference in what was graded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

#: Where a cap came from.
RUN, SPEC = "run", "spec"
#: The kernel's largest ``cpu.shares``.
MAX_SHARES = 262144


@dataclass(frozen=True)
class CpuLimit:
    """``cpus``: the quota in cores, None for none (the sandbox sees ``engine_cores``);
    ``cap`` and ``cap_source`` (:data:`RUN` or :data:`SPEC`): the cap asked for, if any."""

    cpus: float | None
    engine_cores: int | None
    cap: float | None = None
    cap_source: str | None = None

    @property
    def nano_cpus(self) -> int:
        """Docker's ``NanoCpus`` (0: no quota)."""
        return 0 if self.cpus is None else int(round(self.cpus * 1e9))

    @property
    def shares(self) -> int | None:
        """Docker's ``CpuShares``: 1024 a core the sandbox may use (None: the engine's default)."""
        cores = self.cpus if self.cpus is not None else self.engine_cores
        return None if cores is None else min(MAX_SHARES, max(2, int(round(cores * 1024))))

    def as_dict(self) -> dict:
        return {"cpus": self.cpus, "engine_cores": self.engine_cores, "cap": self.cap, "cap_source": self.cap_source,
                "shares": self.shares}

    @classmethod
    def from_dict(cls, data: object) -> "CpuLimit | None":
        """The limit a report recorded (None when it recorded none, or not in this shape)."""
        if not isinstance(data, dict):
            return None
        cpus, cores, cap = data.get("cpus"), data.get("engine_cores"), data.get("cap")
        number = (int, float)
        if not (cpus is None or isinstance(cpus, number)) or not (cores is None or isinstance(cores, int)):
            return None
        source = data.get("cap_source")
        return cls(None if cpus is None else float(cpus), cores,
                   float(cap) if isinstance(cap, number) else None, source if isinstance(source, str) else None)


def cpu_limit(run_cap: float | None, spec_cap: float | None, engine_cores: int | None) -> CpuLimit:
    """The limit of one sandbox: the smaller of the caps asked for, as a quota only where
    it is below the engine host's cores (unknown cores: the cap is kept)."""
    asked = [(cap, source) for cap, source in ((run_cap, RUN), (spec_cap, SPEC)) if cap is not None]
    if not asked:
        return CpuLimit(None, engine_cores)
    cap, source = min(asked)
    quota = None if engine_cores is not None and cap >= engine_cores else cap
    return CpuLimit(quota, engine_cores, cap, source)


def skipped_under_cap(limit: CpuLimit | None, skipped: Iterable[str]) -> dict | None:
    """The report's record of graded tests skipped while a quota held the sandbox below
    the engine host's cores (None: no quota, or none skipped)."""
    if limit is None or limit.cpus is None:
        return None
    tests = sorted(set(skipped))
    if not tests:
        return None
    return {"cpus": limit.cpus, "engine_cores": limit.engine_cores, "cap_source": limit.cap_source,
            "tests": tests[:200]}
