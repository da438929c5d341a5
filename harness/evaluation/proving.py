"""What proves a run's canaries, and the perturbed run: the runs a task adds to its own.

A task (harness/evaluation/node.py) evaluates its prediction once. Then:

* :func:`canary_plan` decides beforehand which canaries it plants: the reference control's
  seed and proofs when there is one (``--control``), else a seed derived from the run's
  (``--canary-seed``), else a fresh one; as many as the run says, fewer if the spec says so;
* :func:`prove_canaries`, when a canary nothing proved accuses the run: the instance's
  reference patch runs once with the same canaries and the run is judged again with what
  that proved (harness/integrity/canaries/judge.py);
* :func:`perturbed_run` (``--perturbed-run``), when the run is FULL: it runs again with one
  FAIL_TO_PASS test changed in place and is settled by that run
  (harness/integrity/perturbed.py).

``evaluate(prediction, plan)`` is the task's own evaluation with retries: the added runs use
the task's image, pristine tree and control facts.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from harness.errors import InfrastructureError
from harness.evaluation.evaluator import Evaluator
from harness.evaluation.setup import Evaluation
from harness.grading.verdict import settle_origin
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.inputs.specs import EnvSpec
from harness.integrity.canaries import CanaryPlan, NothingToChange, instance_seed, proof_from
from harness.integrity.perturbed import apply_perturbed

#: the task's evaluation of a prediction with a canary plan (retried on infrastructure errors)
Evaluate = Callable[[Prediction, CanaryPlan], "tuple[Evaluator, Evaluation]"]


def prove_canaries(evaluator: Evaluator, evaluate: Evaluate, instance: Instance, plan: CanaryPlan, log) -> None:
    """A canary with no proof, or a graded test's outcome its pristine source does not
    declare with no reference run known, accused the run (harness/integrity/canaries/judge.py,
    harness/integrity/judge.py): run the instance's reference patch once with the same
    canaries and judge the run again with what that proved and showed. A proof that cannot
    be had (the engine failed) leaves the run INVALID ``canary_unproven``."""
    started = time.monotonic()
    reference = Prediction(instance.instance_id, "reference patch (canary proof)", instance.patch)
    try:
        _, proved = evaluate(reference, CanaryPlan(plan.seed, plan.count, plan.source))
    except InfrastructureError as exc:
        log.warning("instance.canary_proof_failed", error=str(exc)[:200])
        return
    proven = proof_from(proved.result.integrity_details.get("canaries") or [])
    proof = {c.test_id: proven[c.test_id]["standing"] for c in evaluator.canaries
             if (proven.get(c.test_id) or {}).get("mutation") == c.mutation}
    # what the reference showed undeclared settles the run's own undeclared outcomes (a
    # reference run that did not finish cleanly shows nothing either way)
    shown = proved.result.integrity_details.get("outcome_undeclared") or {}
    undeclared = {str(k): str(v) for k, v in shown.items()} if (
        proved.result.error_reason is None and isinstance(shown, dict)) else None
    evaluator.reprove(proof, {"run_dir": None, "on_demand": True, "planted": len(evaluator.canaries),
                              "matched": len(proof), "reference_status": proved.result.status.value,
                              "reference_error_reason": proved.result.error_reason.value
                              if proved.result.error_reason else None}, undeclared)
    evaluator.result.timings["canary_proof"] = round(time.monotonic() - started, 4)


def perturbed_run(evaluator: Evaluator, evaluate: Evaluate, instance: Instance, prediction: Prediction,
                  plan: CanaryPlan, control: dict, log) -> None:
    """Run a FULL result again with one FAIL_TO_PASS test changed in place and settle it by
    what that run shows (harness/integrity/perturbed.py). The change is proven by the
    control's own perturbed run (the same seed changes the same test), else by a run of
    the reference patch with the same change, on demand."""
    started = time.monotonic()
    again = replace(plan, perturbed=True)
    try:
        _, second = evaluate(prediction, again)
    except NothingToChange as nothing:
        apply_perturbed(evaluator.result, {"perturbations": [], "not_run": str(nothing)}, {}, evaluator.is_reference)
        return
    except InfrastructureError as exc:
        log.warning("instance.perturbed_run_failed", error=str(exc)[:200])
        evaluator.result.integrity_details["perturbed_run"] = {"error": str(exc)[:500]}
        evaluator.result.integrity_flags.append("perturbed_run_failed")
        return
    details = second.result.integrity_details
    record = {"perturbations": details.get("perturbations") or [], "status": second.result.status.value,
              "error_reason": second.result.error_reason.value if second.result.error_reason else None,
              # the runs must look alike but for the change: the same canaries in both
              "same_canaries": _planted(details) == _planted(evaluator.result.integrity_details)}
    known = control.get("perturbations") or {}
    proof = {e["test_id"]: known[e["test_id"]]["standing"] for e in record["perturbations"]
             if (known.get(e["test_id"]) or {}).get("mutation") == e.get("mutation")}
    unproven = [e for e in record["perturbations"] if e.get("observed") != "ok" and e["test_id"] not in proof]
    if unproven and not evaluator.is_reference:
        reference = Prediction(instance.instance_id, "reference patch (perturbation proof)", instance.patch)
        try:
            _, proved = evaluate(reference, again)
            proven = proof_from(proved.result.integrity_details.get("perturbations") or [])
            proof.update({e["test_id"]: proven[e["test_id"]]["standing"] for e in unproven
                          if (proven.get(e["test_id"]) or {}).get("mutation") == e.get("mutation")})
            record["proof_run"] = {"on_demand": True, "reference_status": proved.result.status.value}
        except InfrastructureError as exc:
            log.warning("instance.perturbation_proof_failed", error=str(exc)[:200])
    apply_perturbed(evaluator.result, record, proof, evaluator.is_reference)
    settle_origin(evaluator.result, evaluator.is_reference)
    evaluator.result.timings["perturbed_run"] = round(time.monotonic() - started, 4)


def canary_plan(count: int, run_seed: int | None, control_dir: Path | None, instance: Instance, spec: EnvSpec,
                facts: dict | None) -> CanaryPlan:
    """The task's canaries: as many as the run says, or fewer when the spec says so; the
    seed of the reference control when it ran this instance, else one derived from the
    run's seed, else a fresh one (fixed for every retry of the task)."""
    source = "harness"
    if spec.canaries is not None and spec.canaries < count:
        count, source = spec.canaries, "spec"
    control = (facts or {}).get("canaries")
    if control:
        return CanaryPlan(control["seed"], count, source, control["proof"], str(control_dir))
    if run_seed is not None:
        return CanaryPlan(instance_seed(run_seed, instance.instance_id), count, source)
    return CanaryPlan(secrets.randbits(63), count, source)


def _planted(details: dict) -> list[tuple]:
    return [(c.get("test_id"), c.get("mutation")) for c in details.get("canaries") or [] if isinstance(c, dict)]
