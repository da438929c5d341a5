"""FAIL_TO_PASS and PASS_TO_PASS derived in the real environment: :func:`derive`
(``harness instances derive``).

The records of the input whose two lists are absent or empty are run through
:func:`harness.run.session.evaluate`, the one evaluation path, at base + test patch: N
times with the reference patch (``with-1`` … ``with-N``, predictions ``gold``), then N
times without it (``without-1`` … ``without-N``, predictions ``empty``, with ``with-1``
as their control: its canaries planted, those it disproved dropped), exactly as
``harness validate`` runs them. Which tests run is the evaluation's rule: the test files the
test patch touches, with the spec's test command (SWE-bench's convention). Each run's
every test outcome is read back from its directory (harness/evaluation/outcomes.py) and
the lists are decided by :func:`harness.results.derivation.decide`. Grading itself is
untouched: the runs grade empty lists and nothing reads their verdicts.

Written, atomically, once every run is done::

    OUT                          the input's records in their order: derived ones with their
                                 lists, the others as given; refused records left out
    OUT.derivation.json          the table: one row per record (derived, refused with the
                                 evidence, unchanged), flaky tests, what was left out
    OUT.derivation.md            the same table in Markdown
    <output_dir>/<run_id>/with-N/, without-N/   the runs (resumable: the same call again
                                 reuses complete results)

OUT is not written when no record is left to write. A refused record is named on stderr
by the command and makes it exit 2 (the other records are still written).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from harness.atomic import write_json_atomic, write_text_atomic
from harness.errors import InputError
from harness.evaluation.outcomes import run_outcomes
from harness.inputs.instances import has_test_lists, read_located_records
from harness.paths import RunPaths, safe_run_id
from harness.results.derivation import XFAIL_RULES, Derived, decide, render_markdown
from harness.run.session import evaluate

TABLE_SUFFIX = ".derivation.json"
TABLE_MARKDOWN_SUFFIX = ".derivation.md"
WITH_FIX, WITHOUT_FIX = "with", "without"


@dataclass
class DeriveResult:
    """What a derivation wrote: the records (OUT's content), the table, and the refusals
    (``instance_id`` → the reason with its evidence)."""

    records: list[dict[str, Any]]
    table: dict[str, Any]
    refused: dict[str, str] = field(default_factory=dict)
    out: Path | None = None
    table_path: Path | None = None
    runs_dir: Path | None = None


def table_paths(out: Path) -> tuple[Path, Path]:
    """Where the table of a derivation writing ``out`` goes (JSON, Markdown)."""
    out = Path(out)
    return out.with_name(out.name + TABLE_SUFFIX), out.with_name(out.name + TABLE_MARKDOWN_SUFFIX)


def derive(instances: Path, out: Path, *, repeat: int = 2, output_dir: Path = Path("runs"),
           run_id: str | None = None, xfail: str = "pass", on_run: Callable[[str, int, int], None] | None = None,
           **evaluate_options: Any) -> DeriveResult:
    """Derive the lists of ``instances``' records that lack them and write ``out`` and its
    table. ``evaluate_options`` go to :func:`harness.run.session.evaluate` (``specs``,
    ``repositories``, ``max_workers``, ``limits``, ``cache_dir``, ``on_progress``, ...);
    ``on_run(name, n, of)`` is called as each of the 2N runs starts; ``xfail``: what an
    expected failure is (:data:`harness.results.derivation.XFAIL_RULES`).
    Raises InputError when the input cannot be read or ``out`` is the input."""
    instances, out = Path(instances).expanduser().resolve(), Path(out).expanduser().resolve()
    if out == instances:
        raise InputError("--out must not be the input file (it is rewritten whole)", field="--out")
    if xfail not in XFAIL_RULES:
        raise InputError(f"one of {', '.join(XFAIL_RULES)}, got {xfail!r}", field="--xfail")
    located = read_located_records(instances)
    to_derive = [raw for _, raw in located if isinstance(raw, dict) and not has_test_lists(raw)]
    root = Path(output_dir).expanduser().resolve() / safe_run_id(run_id or f"derive-{out.stem}")
    derived: dict[str, Derived] = {}
    refused: dict[str, str] = {}
    if to_derive:
        derived, refused = _run_and_decide(to_derive, root, repeat, evaluate_options, on_run, xfail)
    records: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for where, raw in located:
        if not isinstance(raw, dict):
            refused[where] = f"{where} is a {type(raw).__name__}, not a record"
            rows.append({"instance_id": where, "status": "refused", "reason": refused[where]})
            continue
        iid = str(raw.get("instance_id") or where)
        if has_test_lists(raw):
            records.append(raw)
            rows.append({"instance_id": iid, "status": "unchanged"})
        elif iid in derived and derived[iid].refused is None:
            result = derived[iid]
            records.append({**raw, "FAIL_TO_PASS": result.fail_to_pass, "PASS_TO_PASS": result.pass_to_pass})
            rows.append(result.row())
        else:
            reason = derived[iid].refused if iid in derived else refused.get(iid, "not evaluated")
            refused[iid] = str(reason)
            rows.append(derived[iid].row() if iid in derived else
                        {"instance_id": iid, "status": "refused", "reason": reason})
    table = {"input": str(instances), "output": str(out), "repeat": repeat, "xfail": xfail, "runs_dir": str(root),
             "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
             "derived": sum(r["status"] == "derived" for r in rows),
             "refused": sum(r["status"] == "refused" for r in rows), "instances": rows}
    json_path, markdown_path = table_paths(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(json_path, table)
    write_text_atomic(markdown_path, render_markdown(table))
    written = None
    if records:
        write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        written = out
    return DeriveResult(records, table, refused, written, json_path, root)


def _run_and_decide(records: list[dict[str, Any]], root: Path, repeat: int, options: Mapping[str, Any],
                    on_run: Callable[[str, int, int], None] | None,
                    xfail: str) -> tuple[dict[str, Derived], dict[str, str]]:
    """The 2N runs of ``records`` under ``root``, then each record's decision; records the
    runs refused before evaluating (malformed, unaddressable ids) with their messages."""
    refused: dict[str, str] = {}
    runs: dict[str, list[Path]] = {WITH_FIX: [], WITHOUT_FIX: []}
    for side, predictions in ((WITH_FIX, "gold"), (WITHOUT_FIX, "empty")):
        for n in range(1, repeat + 1):
            control = RunPaths(root / f"{WITH_FIX}-1").root if side == WITHOUT_FIX else None
            if on_run is not None:
                on_run(f"{side}-{n}", len(runs[WITH_FIX]) + len(runs[WITHOUT_FIX]) + 1, 2 * repeat)
            result = evaluate(records, predictions, run_id=f"{side}-{n}", output_dir=root, control=control,
                              label=f"{root.name}-{side}-{n}", derive_lists=True, **options)
            refused.update({k: str(v) for k, v in (result.summary.get("input_errors") or {}).items()})
            runs[side].append(result.run_dir)
    decided: dict[str, Derived] = {}
    for raw in records:
        iid = str(raw.get("instance_id"))
        if iid in refused:
            continue
        without = [run_outcomes(RunPaths(d).instance_dir(iid), without_fix=True) for d in runs[WITHOUT_FIX]]
        with_fix = [run_outcomes(RunPaths(d).instance_dir(iid), without_fix=False) for d in runs[WITH_FIX]]
        decided[iid] = decide(iid, without, with_fix, xfail)
    return decided, refused
