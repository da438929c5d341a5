"""Validity of an instance set's environments, from reference-patch and empty-patch
control runs (``harness validate``). Pure: reports in, a validity report out.

For each instance:

* ``reference_full`` — the reference patch is FULL in every repeat;
* ``flaky_tests`` — graded tests whose outcome differs between reference repeats;
* ``f2p_pass_without_fix`` — FAIL_TO_PASS tests that already pass with the empty patch
  (the dataset claims they need the fix; they do not);
* ``p2p_fail_with_reference`` — PASS_TO_PASS tests that fail in a reference repeat;
* ``empty_resolved`` — the empty patch resolves the instance (a control failure);
* ``ignored_test_ids`` — listed ids that name no test (left out of grading);
* ``canaries`` — the canaries planted in each repeat (every repeat plants the same ones);
  ``canaries_disproved`` those that did not fail in any repeat they were judged in,
  ``canaries_unstable`` those that failed in some repeats only (each is dropped for the
  repeats it did not fail in, and for runs graded against such a repeat: never charged);
  a perturbed run's changed tests (``--perturbed-run``) count among them;
* ``reasons`` — one sentence per finding.

Later scoring uses it to state denominators honestly: ``compare --validity``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def _outcomes(report: Mapping[str, Any]) -> dict[str, bool]:
    ts = report.get("tests_status") or {}
    out: dict[str, bool] = {}
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        for test in (ts.get(group) or {}).get("success", []):
            out[test] = True
        for test in (ts.get(group) or {}).get("failure", []):
            out[test] = False
    return out


def canary_stability(gold: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str], list[str]]:
    """(canaries planted per repeat, disproved in every repeat that judged them, failed in
    some repeats only) from the reference repeats' reports."""
    planted, judged, failed, mutation = [], {}, {}, {}
    for report in gold:
        integrity = report.get("integrity") or {}
        entries = [e for e in (integrity.get("canaries") or []) if isinstance(e, dict) and isinstance(e.get("test_id"), str)]
        planted.append(len(entries))
        perturbed = integrity.get("perturbed_run")
        # the perturbed run's changes (--perturbed-run) are canaries in place: judged alike
        entries += [e for e in ((perturbed or {}).get("perturbations") or [] if isinstance(perturbed, dict) else [])
                    if isinstance(e, dict) and isinstance(e.get("test_id"), str)]
        for entry in entries:
            seen = entry.get("observed", entry.get("verdict"))
            if seen is None:
                continue
            test_id = entry["test_id"]
            mutation[test_id] = entry.get("mutation")
            judged[test_id] = judged.get(test_id, 0) + 1
            failed[test_id] = failed.get(test_id, 0) + (seen == "ok")
    disproved = sorted(t for t in judged if failed[t] == 0)
    unstable = sorted(t for t in judged if 0 < failed[t] < judged[t])
    return planted, disproved, unstable


def instance_validity(instance_id: str, f2p: Sequence[str], p2p: Sequence[str],
                      gold: Sequence[Mapping[str, Any]], empty: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validity of one instance from its reference repeats (``gold``, report.json
    dicts, at least one) and its empty-patch report (or None when it was not run)."""
    statuses = [g.get("status") for g in gold]
    reference_full = bool(gold) and all(s == "FULL" for s in statuses)
    per_repeat = [_outcomes(g) for g in gold if g.get("status") != "INVALID"]
    flaky = sorted(t for t in {*f2p, *p2p}
                   if len({r.get(t) for r in per_repeat if t in r}) > 1)
    p2p_bad = sorted({t for r in per_repeat for t in p2p if r.get(t) is False})
    empty_outcomes = _outcomes(empty) if empty and empty.get("status") != "INVALID" else {}
    f2p_free = sorted(t for t in f2p if empty_outcomes.get(t) is True)
    empty_resolved = bool(empty and empty.get("resolved"))
    reasons = []
    for i, g in enumerate(gold, 1):
        if g.get("status") != "FULL":
            why = g.get("error_reason") or ", ".join(
                (g.get("tests_status") or {}).get("FAIL_TO_PASS", {}).get("failure", [])[:3]
                + (g.get("tests_status") or {}).get("PASS_TO_PASS", {}).get("failure", [])[:3])
            reasons.append(f"reference repeat {i} is {g.get('status')}: {why}")
    for t in flaky:
        reasons.append(f"{t} flips between reference repeats")
    for t in f2p_free:
        reasons.append(f"{t} is in FAIL_TO_PASS but passes without the fix (empty patch)")
    for t in p2p_bad:
        reasons.append(f"{t} is in PASS_TO_PASS but fails with the reference patch")
    if empty_resolved:
        reasons.append("the empty patch resolves this instance: its tests do not detect the bug")
    ignored = sorted({t for g in gold for t in (g.get("integrity") or {}).get("ignored_test_ids", [])})
    for t in ignored:
        reasons.append(f"{t!r} names no test (a fragment of a log line in the published list); not graded")
    if empty is not None and empty.get("status") == "INVALID":
        reasons.append(f"the empty-patch run is INVALID: {empty.get('error_reason')}")
    planted, disproved, unstable = canary_stability(gold)
    for t in disproved:
        reasons.append(f"canary {t} never failed with the reference patch: disproved, dropped for this instance")
    for t in unstable:
        reasons.append(f"canary {t} failed in some reference repeats only (canary instability): dropped where "
                       f"it did not fail")
    return {
        "instance_id": instance_id,
        "reference_full": reference_full,
        "reference_statuses": statuses,
        "empty_status": empty.get("status") if empty else None,
        "empty_resolved": empty_resolved,
        "flaky_tests": flaky,
        "f2p_pass_without_fix": f2p_free,
        "p2p_fail_with_reference": p2p_bad,
        "ignored_test_ids": ignored,
        "canaries": planted,
        "canaries_disproved": disproved,
        "canaries_unstable": unstable,
        "valid": reference_full and not flaky and not empty_resolved,
        "reasons": reasons,
    }


def validity_report(rows: Sequence[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """The whole set. Denominator of every count: the instances validated."""
    return {
        "repeats": repeats,
        "instances_validated": len(rows),
        "reference_full_in_every_repeat": sum(r["reference_full"] for r in rows),
        "valid_instances": sum(r["valid"] for r in rows),
        "empty_resolved_ids": sorted(r["instance_id"] for r in rows if r["empty_resolved"]),
        "instances": {r["instance_id"]: r for r in rows},
    }


#: reasons that say the environment, not the instance's tests, is what failed
UNBUILT_REASONS = frozenset({"environment_build_failed"})


def validation_problem(rows: Sequence[Mapping[str, Any]], gold: Mapping[str, Sequence[Mapping[str, Any]]],
                       refused: Sequence[str]) -> str | None:
    """Why a validation did not validate its set (``harness validate`` then exits 2), or
    None: no record was validated (``refused``: the ids refused before running), or an
    environment failed to build for an instance (``gold``: its reference reports)."""
    if not rows:
        named = f" ({', '.join(sorted(refused)[:5])}{' ...' if len(refused) > 5 else ''})" if refused else ""
        return f"no instance was validated: every record was refused{named}"
    unbuilt = sorted(iid for iid, reports in gold.items()
                     if any(r.get("error_reason") in UNBUILT_REASONS for r in reports))
    if unbuilt:
        return (f"the environment of {len(unbuilt)} of {len(rows)} instance(s) failed to build: "
                f"{', '.join(unbuilt[:5])}{' ...' if len(unbuilt) > 5 else ''} (build.log beside each report)")
    return None


def render_markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# Validity report ({report['repeats']} reference repeats + 1 empty run per instance)", "",
             f"- instances validated: {report['instances_validated']}",
             f"- reference patch FULL in every repeat: {report['reference_full_in_every_repeat']} "
             f"of {report['instances_validated']}",
             f"- valid (reference FULL every time, no flaky graded test, empty patch not resolved): "
             f"{report['valid_instances']} of {report['instances_validated']}", "",
             "| instance | reference | empty | flaky | canaries | canaries disproved | canaries unstable "
             "| F2P passing without fix | P2P failing with reference |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in report["instances"].values():
        planted = row.get("canaries") or []
        lines.append(f"| {row['instance_id']} | {' '.join(row['reference_statuses'])} | {row['empty_status']} | "
                     f"{len(row['flaky_tests'])} | {max(planted, default=0)} | "
                     f"{len(row.get('canaries_disproved') or [])} | {len(row.get('canaries_unstable') or [])} | "
                     f"{len(row['f2p_pass_without_fix'])} | {len(row['p2p_fail_with_reference'])} |")
    lines.append("")
    for row in report["instances"].values():
        if row["reasons"]:
            lines.append(f"## {row['instance_id']}")
            lines += [f"- {reason}" for reason in row["reasons"]]
            lines.append("")
    return "\n".join(lines) + "\n"
