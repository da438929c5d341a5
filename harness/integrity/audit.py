"""``harness audit``: run the adversarial corpus against your own instances and specs.

For each chosen instance (``--instance-ids``, or the first instance of every repository
in the set) the corpus (:mod:`harness.integrity.corpus`) is generated from the
repository at the base commit; every attack becomes one attempt of one prediction for
that instance (so they all share the instance's image) and the whole lot runs as one
batch through the normal ``harness run`` machinery. The table says, per attack, the
verdict and the flags that matter; the exit status is 1 when any attack is resolved.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from harness.atomic import write_json_atomic, write_text_atomic
from harness.integrity.corpus import STOPPED, CorpusAttack, build_corpus
from harness.integrity.corpus.target import make_target
from harness.paths import InstanceFiles, RunPaths

MODEL = "harness-audit"


def choose(instances: list, wanted: list[str] | None) -> list:
    if wanted:
        return [i for i in instances if i.instance_id in set(wanted)]
    seen, out = set(), []
    for inst in instances:
        if inst.repo not in seen:
            seen.add(inst.repo)
            out.append(inst)
    return out


def write_predictions(path: Path, attacks_by_instance: dict[str, list[CorpusAttack]]) -> dict[tuple[str, int], CorpusAttack]:
    index, lines = {}, []
    for instance_id, attacks in attacks_by_instance.items():
        for n, attack in enumerate(attacks, 1):
            index[(instance_id, n)] = attack
            lines.append(json.dumps({"instance_id": instance_id, "model_name_or_path": MODEL, "attempt": n,
                                     "model_patch": attack.patch, "audit_attack": attack.slug}))
    write_text_atomic(path, "\n".join(lines) + "\n")
    return index


def check(attack: CorpusAttack, report: dict | None, output: str) -> tuple[bool, str]:
    """(resolved, what is off with respect to the attack's expectations: '' if nothing)."""
    if report is None:
        return False, "no report"
    resolved = bool(report.get("resolved"))
    flags = set(report.get("integrity", {}).get("flags", []))
    problems = []
    if resolved:
        problems.append("RESOLVED")
    reason = report.get("error_reason")
    if attack.reasons is not None and reason not in attack.reasons:
        problems.append(f"reason {reason}, expected one of {sorted(attack.reasons)}")
    if attack.flags and not (flags & set(attack.flags)) and reason not in STOPPED:
        problems.append(f"none of the flags {list(attack.flags)}")
    origin = report.get("error_origin")
    if attack.origin is not None and reason is not None and origin != attack.origin:
        problems.append(f"error origin {origin}, expected {attack.origin}")
    for text in attack.evidence:
        if text not in output:
            problems.append(f"no {text!r} in the output")
    for text in attack.absent:
        if text in output:
            problems.append(f"{text!r} in the output")
    return resolved, "; ".join(problems)


def build(instances: list, reader_for: Callable[[object], Callable[[str], str | None]],
          classes: set[str] | None = None,
          runner_for: Callable[[object], str] | None = None) -> dict[str, list[CorpusAttack]]:
    """``runner_for``: the test runner an instance's spec names (pytest when not given)."""
    out = {}
    for inst in instances:
        read = reader_for(inst)
        target = make_target(inst.to_record(), read, getattr(read, "paths", None),
                             runner_for(inst) if runner_for is not None else "pytest")
        attacks = [a for a in build_corpus(target) if classes is None or a.klass in classes]
        out[inst.instance_id] = attacks
    return out


def summarise(run_root: Path, index: dict[tuple[str, int], CorpusAttack]) -> dict:
    rows = []
    for (instance_id, n), attack in sorted(index.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        files = InstanceFiles(run_root / instance_id).attempt(n)
        report = None
        if files.report.exists():
            report = json.loads(files.report.read_text())
        output = files.test_output.read_text(errors="replace") if files.test_output.exists() else ""
        resolved, problems = check(attack, report, output)
        flags = (report or {}).get("integrity", {}).get("flags", [])
        rows.append({"instance_id": instance_id, "attempt": n, "class": attack.klass, "attack": attack.slug,
                     "what": attack.what, "status": (report or {}).get("status"),
                     "error_reason": (report or {}).get("error_reason"), "resolved": resolved,
                     "flags": [f for f in flags if f not in ("dataset_ids_ignored",)], "problems": problems})
    resolved = [r for r in rows if r["resolved"]]
    return {"attacks": len(rows), "resolved": len(resolved), "resolved_attacks": [r["attack"] for r in resolved],
            "unexpected": [f"{r['attack']}: {r['problems']}" for r in rows if r["problems"] and not r["resolved"]],
            "rows": rows, "corpus": {f"{k[0]}#{k[1]}": {**asdict(v), "patch": None} for k, v in index.items()}}


def render(summary: dict) -> str:
    lines = ["| class | attack | instance | verdict | flags | check |", "|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        verdict = r["status"] + (f" ({r['error_reason']})" if r["error_reason"] else "") if r["status"] else "-"
        lines.append(f"| {r['class']} | {r['attack']} | {r['instance_id']} | {verdict} | "
                     f"{', '.join(r['flags'][:4]) or '-'} | {r['problems'] or 'ok'} |")
    lines.append(f"\n{summary['attacks']} attacks, {summary['resolved']} resolved.")
    return "\n".join(lines)


def write(run_root: Path, summary: dict) -> None:
    write_json_atomic(RunPaths(run_root).audit_json, summary)
    write_text_atomic(RunPaths(run_root).audit_markdown, render(summary) + "\n")
