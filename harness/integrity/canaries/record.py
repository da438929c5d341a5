"""A planted canary, as report.json records it."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Canary:
    path: str
    cls: str | None
    name: str
    original: str
    mutation: str                 # what was changed, e.g. "int 3 -> 7; name test_a_b -> test_a_c"
    test_id: str
    original_id: str
    tier: str = ""                # "added", "changed" or "unchanged" (harness/integrity/canaries/planting.py)
    placement: str = ""           # "before" or "after" its original

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "Canary":
        return cls(**{k: data.get(k, "" if k in ("tier", "placement") else None) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class CanaryPlan:
    """How one run plants its canaries: the seed (recorded in report.json as
    ``integrity.canary_seed``), how many, who said so (``harness``: the run's setting,
    ``spec``: the repository's spec lowered it), and what the reference control proved
    (canary test id -> {"mutation", "standing"}; empty without a control)."""

    seed: int
    count: int = 3
    source: str = "harness"
    control: Mapping[str, Mapping] = field(default_factory=dict)
    control_dir: str | None = None
    #: change one FAIL_TO_PASS test in place too (the perturbed run: harness/integrity/perturbed.py)
    perturbed: bool = False


def instance_seed(run_seed: int, instance_id: str) -> int:
    """The canary seed of one instance in a run seeded with ``run_seed`` (63 bits)."""
    digest = hashlib.sha256(f"{run_seed}:{instance_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
