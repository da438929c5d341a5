"""The canaries of one run, staged into its test files (the evaluation's planting step)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from harness.integrity.canaries.planting import Perturb, Planter
from harness.integrity.canaries.record import Canary, CanaryPlan, instance_seed

#: the bytes and mode of a base-commit file, or None
Pristine = Callable[[str], "tuple[bytes, int] | None"]


class NothingToChange(Exception):
    """A perturbed run found no FAIL_TO_PASS test to change: it would prove nothing, so it
    does not run (raised before its sandbox is used)."""


@dataclass
class Staged:
    """The test files with the canaries (and a perturbed run's change) in them, and what
    report.json records of them."""

    files: dict[str, tuple[bytes, int]]
    canaries: list[Canary] = field(default_factory=list)
    perturbations: list[Canary] = field(default_factory=list)
    #: canary test id -> PROVEN/DISPROVED, from the control
    proof: dict[str, str] = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def stage(plan: CanaryPlan, files: dict[str, tuple[bytes, int]], test_files: list[str], pristine: Pristine,
          runner, fail_to_pass: tuple[str, ...], convention) -> Staged:
    """Plant ``plan``'s canaries in ``files`` (path -> (bytes, mode) after the test patch)
    with the runner's spelling and collection; a perturbed plan also changes one of the
    FAIL_TO_PASS tests (under the id ``convention``) in place."""
    out = Staged(dict(files), details={"canary_seed": plan.seed, "canary_count": plan.count,
                                       "canary_count_source": plan.source})
    if plan.count <= 0:
        out.flags.append("canaries_off")
        if not plan.perturbed:
            return out
    previous = {p: (pristine(p) or (None,))[0] for p in test_files}
    planter = Planter({p: d for p, (d, _) in files.items()}, test_files, previous, runner.spell_id,
                      runner.canary_styles, runner.collects_class)
    perturb = None
    if plan.perturbed:
        wanted = {t.split("[", 1)[0] for t in fail_to_pass}
        natives = {runner.spell_id(t.path, t.cls, t.fn.name) for t in planter.perturbable}
        targets = frozenset(n for n in natives
                            if wanted & {d.split("[", 1)[0] for d in convention.to_dataset(n, None)})
        perturb = Perturb(targets, random.Random(instance_seed(plan.seed, "perturbed run")))
    changed, planted = planter.draw(max(plan.count, 0), random.Random(plan.seed), perturb)
    out.canaries = [c for c in planted if c.tier != "perturbed"]
    out.perturbations = [c for c in planted if c.tier == "perturbed"]
    if plan.perturbed and not out.perturbations:
        raise NothingToChange(f"no FAIL_TO_PASS test has an exact check on a line the test patch added "
                              f"({len(perturb.targets)} of the test files' tests are graded FAIL_TO_PASS)")
    for path, data in changed.items():
        out.files[path] = (data, files[path][1])
    if not out.canaries and plan.count > 0:
        out.flags.append("canary_unavailable")
    out.details["canaries"] = [c.to_dict() for c in out.canaries]
    if plan.perturbed:
        out.details["perturbations"] = [c.to_dict() for c in out.perturbations]
    # what the control proved counts for the canaries it planted too (same seed, same files)
    out.proof = {c.test_id: plan.control[c.test_id]["standing"] for c in out.canaries
                 if (plan.control.get(c.test_id) or {}).get("mutation") == c.mutation}
    out.details["canary_proof"] = dict(out.proof)
    if plan.control_dir is not None:
        out.details["canary_control"] = {"run_dir": plan.control_dir, "planted": len(out.canaries),
                                         "matched": len(out.proof)}
    return out
