"""Synthetic run directories in the harness's own format, for tests and benchmarks of the
result views (no engine needed).

Reports are built as :class:`harness.results.report.InstanceResult` values and written with
``to_report()`` and ``summarise()``, exactly as a real run writes them, so the layout can
never drift from the harness's.  ``hostile=True`` puts markup and script into every field
that comes from a patch, a test run or an instance record.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.grading.status import ErrorReason, InstanceStatus
from harness.results.report import CommandRecord, InstanceResult, summarise

#: Markup that must end up as text: it closes a script block, opens one, and tries an
#: event handler, an attribute break-out, a javascript: URL and template syntax.
HOSTILE = ('</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           '"><svg onload="window.__pwned=3"> javascript:window.__pwned=4 {{ 7*7 }} \u2028 <b>bold</b>')

REPOS = (("django/django", 38), ("sympy/sympy", 26), ("scikit-learn/scikit-learn", 8), ("matplotlib/matplotlib", 8),
         ("pytest-dev/pytest", 6), ("sphinx-doc/sphinx", 5), ("astropy/astropy", 2), ("psf/requests", 2),
         ("pylint-dev/pylint", 2), ("pydata/xarray", 2), ("mwaskom/seaborn", 1), ("pallets/flask", 1))
PHASES = (("validate", 0.001), ("start", 0.45), ("prepare", 0.3), ("history_check", 0.09), ("apply_patch", 0.08),
          ("restore_tests", 0.16), ("apply_test_patch", 0.18), ("tests", 12.0), ("copy_out", 0.12),
          ("grade", 0.002), ("cleanup", 0.2))
INVALID_REASONS = (ErrorReason.PATCH_APPLY_FAILED, ErrorReason.TIMEOUT, ErrorReason.CONTAINER_DIED,
                   ErrorReason.TEST_PATCH_APPLY_FAILED, ErrorReason.SUITE_DID_NOT_RUN)


def _patch(path: str, rng: random.Random, lines: int, text: str = "") -> str:
    body = [f" context line {i}" for i in range(3)]
    removed = [f"-    old_value_{i} = compute({i})" for i in range(lines // 2)]
    added = [f"+    new_value_{i} = compute({i}) + {rng.randint(0, 9)}" for i in range(lines - lines // 2)]
    if text:
        added.append(f"+    note = {json.dumps(text)}")
    hunk = body + removed + added + body
    old = len(body) * 2 + len(removed)
    new = len(body) * 2 + len(added)
    return "\n".join([f"diff --git a/{path} b/{path}", "index 1111111..2222222 100644", f"--- a/{path}",
                      f"+++ b/{path}", f"@@ -10,{old} +10,{new} @@ def function():", *hunk]) + "\n"


def _output(tests: list[str], passed: set[str], size: int, text: str) -> str:
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-8.1.1", f"collected {len(tests)} items", ""]
    if text:
        lines += ["----------------------------- Captured stdout call -----------------------------", text]
    filler = "x" * 70
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"tests/test_module.py:{len(lines)}: in test_function\n    assert value == expected  # {filler}")
    lines += ["=========================== short test summary info ============================"]
    lines += [f"{'PASSED' if t in passed else 'FAILED'} {t}" for t in tests]
    return "\n".join(lines) + "\n"


def write_synthetic_run(root: Path, run_id: str, n: int, *, seed: int = 0, hostile: bool = False,
                        output_bytes: int = 20_000, patch_lines: int = 40, no_prediction: int = 0) -> Path:
    """Write ``root/run_id`` with ``n`` graded instances (and ``no_prediction`` more without one)."""
    rng = random.Random(seed)
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    text = HOSTILE if hostile else ""
    weights = [w for _, w in REPOS]
    results, ids = [], []
    for index in range(n):
        repo = rng.choices([r for r, _ in REPOS], weights)[0]
        instance_id = f"{repo.replace('/', '__')}-{1000 + index}"
        ids.append(instance_id)
        f2p = [f"tests/test_{index}.py::test_fix_{k}" + (f"[{text}]" if text and k == 0 else "") for k in range(3)]
        p2p = [f"tests/test_{index}.py::test_keep_{k}[a|b]" for k in range(20)]
        roll = rng.random()
        status = (InstanceStatus.FULL if roll < 0.40 else InstanceStatus.PARTIAL if roll < 0.50
                  else InstanceStatus.NO if roll < 0.85 else InstanceStatus.INVALID)
        reason = rng.choice(INVALID_REASONS) if status is InstanceStatus.INVALID else None
        passed = set(p2p) | set(f2p) if status is InstanceStatus.FULL else (
            set(p2p[:-1]) | set(f2p[:1]) if status is InstanceStatus.PARTIAL else set(p2p[:-2]))
        if status is InstanceStatus.PARTIAL:
            passed.add(p2p[-1])
        missing = [t for t in (f2p + p2p) if t not in passed][:1] if status is InstanceStatus.NO else []
        timings = {phase: round(base * rng.uniform(0.6, 1.8), 4) for phase, base in PHASES}
        timings["total"] = round(sum(timings.values()), 4)
        flags = ["patch_touched_tests"] if rng.random() < 0.05 else []
        result = InstanceResult(
            instance_id=instance_id, repo=repo, model_name_or_path=f"synthetic-model{text}", status=status,
            resolved=status is InstanceStatus.FULL, error_reason=reason,
            error_detail=f"detail {text}" if reason else "",
            patch_exists=True, patch_successfully_applied=reason is not ErrorReason.PATCH_APPLY_FAILED,
            apply_strategy="git_apply",
            f2p_success=[t for t in f2p if t in passed], f2p_failure=[t for t in f2p if t not in passed],
            p2p_success=[t for t in p2p if t in passed], p2p_failure=[t for t in p2p if t not in passed],
            missing=missing, integrity_flags=flags,
            integrity_details={"history_commits": 1, **({"patch_touched_tests": [f"tests/x.py{text}"]} if flags else {})},
            parser="pytest", parse_source="junit", test_exit_code=0 if status is InstanceStatus.FULL else 1,
            timings=timings, image={"tag": f"harness-inst:{instance_id}-0123456789abcdef", "id": "sha256:" + "ab" * 32},
            checksums={"patch": "cd" * 32},
            commands=[CommandRecord(phase, ["/bin/sh", "-c", f"step {phase} {text}"], 0, timings[phase],
                                    output_tail=f"ok {text}" * 3) for phase, _ in PHASES[1:8]],
        )
        results.append(result)
        directory = run_dir / instance_id
        directory.mkdir(exist_ok=True)
        (directory / "report.json").write_text(json.dumps(result.to_report(), indent=2))
        (directory / "patch.diff").write_text(_patch(f"{repo.split('/')[1]}/module_{index}.py", rng, patch_lines, text))
        (directory / "test_output.txt").write_text(_output(f2p + p2p, passed, output_bytes, text))
        (directory / "instance.json").write_text(json.dumps({
            "instance_id": instance_id, "repo": repo, "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p,
            "problem_statement": f"Something is broken {text}\n" * 20}))
    without = [f"synthetic__nopred-{k}" for k in range(no_prediction)]
    summary = summarise(run_id, f"synthetic-model{text}", ids + without, results, {})
    summary["no_prediction_ids"] = without
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return run_dir
