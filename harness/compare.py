"""``harness compare``: a run against a vendor's claimed verdicts, or two runs against each other.

The command line only; the work is elsewhere (one result model, several views):

* loading — :mod:`harness.results.run_data` (run directories), :mod:`harness.results.claims`
  (vendor claim files in four formats, validity reports);
* analysis — :mod:`harness.results.claims_vs_run`, :mod:`harness.results.run_vs_run`, with
  the result types in :mod:`harness.results.comparison`;
* views — :mod:`harness.views.json_view`, :mod:`harness.views.markdown`,
  :mod:`harness.views.html`.

The names below are re-exported so ``from harness import compare`` keeps working.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from harness.atomic import write_text_atomic
from harness.cliargs import bounded_int
from harness.errors import InputError
from harness.results.claims import Claims, load_claims, load_validity
from harness.results.claims_vs_run import compare_with_claims
from harness.results.comparison import (BOOTSTRAP_ITERATIONS, CONFIDENCE, AgreementTable, BootstrapDifference,
                                        ClaimsComparison, DiscordantInstance, Flip, RateWithInterval,
                                        ReferenceControlFailure, RepoSlice, Result, RunRef, RunsComparison,
                                        SliceAverages)
from harness.results.run_data import (INFRA_ORIGINS, InstanceEvidence, InstanceOutcome, RunData, load_run,
                                      repo_of)
from harness.results.run_vs_run import compare_runs
from harness.results.vendor_tests import DEFAULT_DEFECTS
from harness.views.json_view import render_json, to_dict
from harness.views.markdown import render_markdown

__all__ = [
    "BOOTSTRAP_ITERATIONS", "CONFIDENCE", "INFRA_ORIGINS", "InstanceEvidence", "InstanceOutcome", "RunData",
    "Claims", "RateWithInterval", "AgreementTable", "DiscordantInstance", "ReferenceControlFailure",
    "ClaimsComparison", "BootstrapDifference", "Flip", "RepoSlice", "SliceAverages", "RunRef", "RunsComparison",
    "Result", "repo_of", "load_run", "load_claims", "load_validity", "compare_with_claims", "compare_runs",
    "to_dict", "render_markdown", "write_outputs", "add_compare_parser", "run_compare",
]


def write_outputs(result: Result, out_dir: str | os.PathLike[str], stem: str) -> tuple[Path, Path, Path]:
    """Write ``<stem>.json``, ``<stem>.md`` and ``<stem>.html`` into ``out_dir`` atomically.

    Returns the three paths.  The HTML page links to the instance pages of the run(s)
    by relative paths from ``out_dir``.

    Raises:
        InputError (ValueError): ``stem`` contains a path separator.
        OSError: the directory cannot be created or written.
    """
    from harness.views.html import render_comparison

    if not stem or "/" in stem or "\\" in stem or stem in (".", ".."):
        raise InputError(f"output stem {stem!r} must be a plain file name", field="stem")
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / f"{stem}.json", directory / f"{stem}.md", directory / f"{stem}.html"
    write_text_atomic(paths[0], render_json(result))
    write_text_atomic(paths[1], render_markdown(result))
    write_text_atomic(paths[2], render_comparison(result, directory))
    return paths


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "run"


def _claims_name(path: Path) -> str:
    """The output stem's part naming the claims: a file's name, or a reports directory's
    (its parent's when it is called ``reports``)."""
    if path.is_dir():
        path = path.resolve()
        return path.parent.name if path.name == "reports" else path.name
    return path.name.removesuffix(".json").removesuffix(".results")


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to an ``argparse`` subparsers object.

    Sets ``func=run_compare`` as the parser default, so a top-level CLI can dispatch with
    ``return args.func(args)``.
    """
    parser = subparsers.add_parser(
        "compare", help="compare a run with another run or with claimed verdicts",
        description="Compare saved run directories (no Docker needed). With RUN_B: paired comparison of B "
                    "against RUN. With --claimed: RUN against a vendor's claimed verdicts. Results are "
                    "written as <stem>.json, <stem>.md and <stem>.html into RUN (or --output-dir); the Markdown is "
                    "printed.")
    parser.add_argument("run", metavar="RUN", help="run directory (runs/<run_id>)")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?", help="second run directory to compare against RUN")
    parser.add_argument("--claimed", metavar="FILE|DIR", help="claimed verdicts: this project's claims file, SWE-bench's "
                        "run report (<model>.<run_id>.json), an experiments-repo results/results.json, a "
                        "per-instance {id: {resolved: bool}} map, or a directory of SWE-bench's per-instance "
                        "reports (<id>.report.json or <id>/report.json), compared test by test (see the README)")
    parser.add_argument("--validity", metavar="FILE",
                        help="validity report with instances.<id>.reference_full (needs --claimed)")
    parser.add_argument("--control", metavar="RUN_DIR",
                        help="a run of the reference patches on the same instances: each test that differs is also "
                             "looked up there (needs --claimed)")
    parser.add_argument("--defects", metavar="FILE",
                        help="dataset-defects file (instance id -> summary, evidence) whose entries explain a "
                             "disagreement (needs --claimed; default: this checkout's docs/notes/dataset-defects.yaml)")
    parser.add_argument("--seed", type=bounded_int(0, 2**32 - 1), default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--output-dir", metavar="DIR", help="where to write outputs (default: RUN)")
    parser.add_argument("--budget-attempts", type=bounded_int(1, 10**6), metavar="K",
                        help="repeated attempts: count successes only within the first K attempts")
    parser.add_argument("--budget-calls", type=bounded_int(0, 10**12), metavar="B",
                        help="repeated attempts: count successes only while cumulative calls stay <= B")
    parser.set_defaults(func=run_compare)
    return parser


def run_compare(args: argparse.Namespace) -> int:
    """Handler for ``harness compare``: returns 0 on success, 2 on bad input (message on stderr)."""
    try:
        if args.run_b is None and args.claimed is None:
            raise InputError("give RUN_B (run comparison) or --claimed FILE (claims comparison)", field="RUN_B/--claimed")
        for option in ("validity", "control", "defects"):
            if getattr(args, option, None) is not None and args.claimed is None:
                raise InputError(f"--{option} only applies together with --claimed", field=f"--{option}")
        defects = getattr(args, "defects", None) or (DEFAULT_DEFECTS if DEFAULT_DEFECTS.is_file() else None)
        budget = {"max_attempts": getattr(args, "budget_attempts", None),
                  "max_calls": getattr(args, "budget_calls", None)}
        out_dir = Path(args.output_dir) if args.output_dir else Path(args.run)
        outputs: list[tuple[Result, str]] = []
        if args.claimed is not None:
            result = compare_with_claims(args.run, args.claimed, args.validity, **budget,
                                         control_dir=getattr(args, "control", None), defects_path=defects)
            claims_name = _claims_name(Path(args.claimed))
            outputs.append((result, f"compare-claims-{_slug(claims_name)}"))
        if args.run_b is not None:
            result = compare_runs(args.run, args.run_b, seed=args.seed, **budget)
            outputs.append((result, f"compare-{_slug(result.run_a.run_id)}-vs-{_slug(result.run_b.run_id)}"))
        for result, stem in outputs:
            json_path, md_path, html_path = write_outputs(result, out_dir, stem)
            print(render_markdown(result))
            print(f"wrote {json_path}, {md_path} and {html_path}")
    except ValueError as exc:
        print(f"harness compare: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"harness compare: cannot write outputs: {exc}", file=sys.stderr)
        return 1
    return 0
