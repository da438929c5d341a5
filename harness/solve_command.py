"""``harness solve``: a thin mapping of flags onto :func:`harness.run.solve.solve`.

    harness solve --instances FILE --model NAME [--config FILE.yaml] [--scaffold mini-swe-agent==1.15.0]
                  [--step-limit N] [--cost-limit USD] [--wall-time-limit SEC] [--run-cost-limit USD]
                  [--attempts K] [--give hints|reference-files ...] [--grade] --run-id ID [--output-dir DIR]
    harness solve --instances FILE --replay TRAJ_DIR --run-id ID [--output-dir DIR] [--repos-dir DIR --no-clone]

Exit codes as ``harness run``'s; 3 when an attempt could not run (its sandbox could not be
had): the rest is written, and the same command finishes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cliargs import bounded_float, bounded_int

MAX_ATTEMPTS = 100


def add_solve_parser(sub, common: argparse.ArgumentParser) -> None:
    from harness.agents.pins import DEFAULT_PIN
    solve = sub.add_parser("solve", parents=[common],
                           help="run (or replay) a pinned agent scaffold on instances: its diffs as predictions",
                           epilog="--timeout, --perturbed-run, --canary-seed, --cache-level and --disk-budget apply "
                                  "to the grading of --grade; --cpus to the working sandboxes and the grading. API "
                                  "keys come from the environment (litellm's variables, MSWEA_MODEL_API_KEY) and "
                                  "are written nowhere. docs/AGENTS.md")
    what = solve.add_mutually_exclusive_group()
    what.add_argument("--model", metavar="NAME",
                      help="the model (litellm's name, e.g. openai/gpt-4o-mini); its API key from the environment")
    what.add_argument("--replay", type=Path, metavar="TRAJ_DIR",
                      help="re-execute recorded trajectories offline (<instance_id>.traj.json[.gz]): their scaffold "
                           "version, config and model outputs")
    solve.add_argument("--instances", type=Path, help="instance set (default: the demo set)")
    solve.add_argument("--config", type=Path, metavar="FILE.yaml",
                       help="the scaffold's own config, as it is (default: the one the pinned version ships for "
                            "SWE-bench)")
    solve.add_argument("--scaffold", default=DEFAULT_PIN, metavar="NAME==VERSION",
                       help=f"the scaffold pin, an exact version (default {DEFAULT_PIN})")
    solve.add_argument("--scaffold-with", action="append", default=[], metavar="NAME==VERSION",
                       help="an exact version the scaffold is installed with (repeatable; e.g. litellm==1.80.0)")
    solve.add_argument("--step-limit", type=bounded_int(1, 100_000), metavar="N",
                       help="model calls per attempt (default: the config's)")
    solve.add_argument("--cost-limit", type=bounded_float(0.0001, 100_000), metavar="USD",
                       help="model cost per attempt (default: the config's)")
    solve.add_argument("--wall-time-limit", type=bounded_float(1, 7 * 86_400), metavar="SEC",
                       help="seconds per attempt (default: none)")
    solve.add_argument("--run-cost-limit", type=bounded_float(0.0001, 10_000_000), metavar="USD",
                       help="model cost of the whole run; attempts past it stop, later ones do not start")
    solve.add_argument("--attempts", type=bounded_int(1, MAX_ATTEMPTS), default=1, metavar="K",
                       help="independent attempts per instance (default 1)")
    solve.add_argument("--give", nargs="+", default=[], choices=("hints", "reference-files"),
                       help="give the agent more than the problem statement (recorded)")
    solve.add_argument("--grade", action="store_true",
                       help="grade the predictions into the same run directory (report.json beside agent.json)")
    solve.add_argument("--run-id", help="name of the run directory (default: solve-<model>-<time>)")
    solve.set_defaults(func=cmd_solve)


def cmd_solve(args: argparse.Namespace) -> int:
    from harness.inputs import demo
    from harness.run.session import Repositories
    from harness.run.solve import Budgets, solve
    instances = (args.instances or demo.DEMO_DIR / "instances.jsonl").expanduser().resolve()
    result = solve(
        instances, model=args.model, config=args.config, replay=args.replay, scaffold=args.scaffold,
        scaffold_with=args.scaffold_with, attempts=args.attempts,
        budgets=Budgets(step_limit=args.step_limit, cost_limit=args.cost_limit,
                        wall_seconds_limit=args.wall_time_limit, run_cost_limit=args.run_cost_limit),
        give=args.give, instance_ids=args.instance_ids, specs=args.specs,
        repositories=Repositories(args.repos_dir, dict(args.repo), clone=not args.no_clone),
        executor=args.executor, max_workers=args.max_workers, ray_address=args.ray_address,
        task_timeout=args.task_timeout, cpus=args.cpus, run_id=args.run_id,
        output_dir=args.output_dir.expanduser().resolve(), cache_dir=args.cache_dir, force=args.force,
        grade=args.grade, grade_timeout=args.timeout, registry=args.registry, quiet=args.quiet, verbose=args.verbose,
        grading={"perturbed_run": args.perturbed_run, "canary_seed": args.canary_seed,
                 "cache_level": args.cache_level, "disk_budget": args.disk_budget},
        on_progress=None if args.quiet else _progress)
    if not args.quiet:
        print(render(result))
    if result.graded is not None and not args.quiet:
        from harness.clioutput import show_result
        show_result(result.graded, True)
    if result.incomplete:
        print(f"harness: {len(result.incomplete)} attempt(s) could not run ({', '.join(result.incomplete[:5])}); "
              "re-run the same command to finish", file=sys.stderr)
        return 3
    return 0


def _progress(event) -> None:
    """One line on stderr per attempt as it ends."""
    attempt = "" if event.attempt is None else f" attempt {event.attempt}"
    limit = f" ({event.limit} limit)" if event.limit else ""
    print(f"harness: [{event.done}/{event.total}] {event.instance_id}{attempt}: {event.exit_status}{limit}, "
          f"{event.record.steps} steps, ${float(event.record.usage.get('cost') or 0):.4f}", file=sys.stderr)


def render(result) -> str:
    """The attempts as a table, then where things went."""
    rows = [("instance", "attempt", "exit status", "limit", "steps", "cost", "seconds")]
    for r in result.records:
        rows.append((r.instance_id, "-" if r.attempt is None else str(r.attempt), r.exit_status, r.limit or "-",
                     str(r.steps), f"{float(r.usage.get('cost') or 0):.4f}", f"{r.wall_seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    totals = result.solve["totals"]
    lines.append(f"{totals['attempts']} attempts, {totals['calls']} model calls, ${totals['cost']:.4f}; "
                 f"predictions: {result.solve['predictions']['file']} ({result.solve['predictions']['count']})")
    lines.append(f"run directory: {result.run_dir}")
    return "\n".join(lines)
