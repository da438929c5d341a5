"""The ``harness`` command line.

    harness run        grade predictions (default: the embedded demo set and its predictions)
    harness solve      run (or replay) a pinned agent scaffold on instances; its diffs are predictions
    harness audit      run the adversarial corpus against your instances and specs
    harness doctor     say what is missing (engine, mmdebstrap, disk); --start-engine starts dockerd
    harness compare    vendor claims vs a run, or run A vs run B (see harness.compare)
    harness view       serve a run directory's HTML report on 127.0.0.1
    harness specs      list the environment specs, show one resolved (where each field came from), infer one
    harness instances  make an instance set from fix commits; derive its test lists in the real environment

Exit codes: 0 the command did its job (whatever the verdicts), 2 bad input or missing
prerequisites (a sentence on stderr, no traceback), 3 the run ended early because its
infrastructure failed (an engine or every cluster node was lost: the summary covers what
was graded; re-running the same command finishes it), 130 interrupted (Ctrl-C: the run's
containers are removed, the run directory is resumable; SIGTERM and SIGHUP do the same and
exit 143 and 129), 1 an unexpected failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from harness.buildinfo import VersionAction
from harness.cliruns import evaluate_options
from harness.cliargs import Parser, bounded_float, bounded_int
from harness.clioutput import ProgressLine, render_pages, show_result
from harness.errors import EngineLost, EngineUnavailable, HarnessError, InputError, RunIncomplete
from harness.imagecache.commands import CACHE_LEVELS, size_argument
from harness.run.stopping import exit_code, signal_name, stopped_like_ctrl_c
from harness.swebench.options import (INSTANCES_HELP, SWEBENCH_EPILOG, add_dataset_options,
                                      add_swebench_output_options, resolve_instance_source,
                                      swebench_layout_request, write_swebench_layout)

DEFAULT_OUTPUT_DIR = "runs"
#: the ranges of the numeric options (a day of testing, a week per task, 1,024 workers)
MAX_TIMEOUT = 86_400
MAX_TASK_TIMEOUT = 7 * 86_400
MAX_WORKERS = 1024
MAX_REPEAT = 100
#: canary seeds are 63-bit (harness.evaluation.proving)
MAX_CANARY_SEED = 2 ** 63 - 1
#: the audit's test-run timeout without --timeout: an attack that stalls costs a minute, not the spec's
AUDIT_TIMEOUT = 60


def _repo_override(text: str) -> tuple[str, Path]:
    if "=" not in text or "/" not in text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME=PATH, got {text!r}")
    name, path = text.split("=", 1)
    return name, Path(path).expanduser().resolve()


def _cores(text: str) -> float:
    from harness.inputs.spec_fields import check_cap
    try:
        return check_cap(float(text), "--cpus")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of cores, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="harness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these instances")
    common.add_argument("--repos-dir", type=Path, help="directory holding OWNER__NAME git repositories")
    common.add_argument("--repo", action="append", type=_repo_override, default=[], metavar="OWNER/NAME=PATH",
                        help="a local git repository for one repository (repeatable)")
    common.add_argument("--specs", action="append", type=Path, default=[], metavar="DIR",
                        help="extra environment spec directory (repeatable), layered over images/specs per "
                             "version: its entries add versions or override fields (docs/SPECS.md)")
    common.add_argument("--timeout", type=bounded_int(1, MAX_TIMEOUT),
                        help="test-run timeout in seconds (default: the spec's)")
    common.add_argument("--perturbed-run", action="store_true",
                        help="run each FULL result again with one FAIL_TO_PASS test's expected value changed in "
                             "place (no original beside it); it must fail (docs/SECURITY.md)")
    common.add_argument("--canary-seed", type=bounded_int(0, MAX_CANARY_SEED), metavar="N",
                        help="plant the same canaries again: each instance's seed is derived from N (default: a "
                             "fresh seed per task, or the --control run's; recorded as integrity.canary_seed)")
    common.add_argument("--cpus", type=_cores, metavar="N",
                        help="cap the cores each sandbox may use (default: none, the engine host's cores, as "
                             "SWE-bench's containers; a spec's cpus: caps too, the smaller wins)")
    common.add_argument("--output-dir", type=Path, default=Path(DEFAULT_OUTPUT_DIR))
    common.add_argument("--cache-dir", type=Path,
                        help="cache directory (default: $HARNESS_CACHE_DIR or ~/.cache/harness)")
    common.add_argument("--max-workers", type=bounded_int(1, MAX_WORKERS), default=1,
                        help="evaluations in flight at once, whatever the executor (default 1)")
    common.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="where evaluations run: threads on this machine (default) or a Ray cluster")
    common.add_argument("--ray-address", metavar="ADDR",
                        help="the Ray cluster to use with --executor ray (HOST:PORT of its head; default: "
                             "$RAY_ADDRESS, else a one-node cluster on this machine)")
    common.add_argument("--registry", metavar="HOST:PORT",
                        help="a registry to share images through: pulled instead of built, pushed after a build")
    common.add_argument("--task-timeout", type=bounded_float(1, MAX_TASK_TIMEOUT), default=7200.0, metavar="SEC",
                        help="a task (image preparation + evaluation) running longer is killed with its "
                             "container and recorded as deadline_exceeded (default 7200)")
    common.add_argument("--no-clone", action="store_true", help="never clone a repository from its public URL")
    common.add_argument("--force", action="store_true",
                        help="re-evaluate every instance (default: reuse complete results for the same inputs)")
    common.add_argument("--cache-level", choices=CACHE_LEVELS, default="instance",
                        help="which of the run's images survive it (none < base < env < instance; default instance)")
    common.add_argument("--disk-budget", type=size_argument, metavar="SIZE",
                        help="before preparing images, remove the least recently used harness images until they "
                             "take at most SIZE (e.g. 200G); never what this run's instances need")
    common.add_argument("--quiet", action="store_true", help="no progress display and no table")
    common.add_argument("--verbose", action="store_true", help="log every event on stderr")

    run = sub.add_parser("run", help="grade predictions on an instance set", parents=[common],
                         epilog=SWEBENCH_EPILOG)
    run.add_argument("--instances", type=Path, help=INSTANCES_HELP)
    run.add_argument("--predictions", help="'gold', 'empty' or a predictions file; default: the demo predictions")
    run.add_argument("--run-id", help="name of the run directory (default: derived from the model and time)")
    run.add_argument("--manifest", type=Path, help="re-run under a pinned manifest.json; refuse if inputs differ")
    run.add_argument("--control", type=Path, metavar="RUN_DIR",
                     help="a reference-patch run of the same instances: plant its canaries and drop those it "
                          "disproved; flag runs that collect fewer graded tests or fail as it failed")
    add_dataset_options(run)
    add_swebench_output_options(run)
    run.set_defaults(func=cmd_run)

    from harness.solve_command import add_solve_parser
    add_solve_parser(sub, common)

    validate = sub.add_parser("validate", parents=[common],
                              help="reference patch N times and empty patch once: a validity report")
    validate.add_argument("--instances", type=Path, help=INSTANCES_HELP)
    validate.add_argument("--repeat", type=bounded_int(1, MAX_REPEAT), default=3,
                          help="reference-patch repeats (default 3)")
    validate.add_argument("--run-id", help="directory under --output-dir (default: validate-<instances file>)")
    add_dataset_options(validate)
    validate.set_defaults(func=cmd_validate)

    audit = sub.add_parser("audit", parents=[common],
                           help="run the adversarial corpus against instances: attack -> verdict -> flag")
    audit.add_argument("--instances", type=Path, help="instance set (default: the demo set)")
    audit.add_argument("--run-id", help="directory under --output-dir (default: audit-<instances file>)")
    audit.add_argument("--classes", nargs="+", metavar="CLASS",
                       help="only these attack classes (1-9, unread-code, size-cap, canary-pairing, code-loading, "
                       "compiled, runner-rebinding, reinstall, undeclared-outcome, or 'suite')")
    audit.set_defaults(func=cmd_audit, timeout=None)
    report = sub.add_parser("report", help="re-grade a run from its saved outputs (no containers) and write "
                                           "its report.html")
    report.add_argument("run_dir", type=Path)
    report.set_defaults(func=cmd_report)

    view = sub.add_parser("view", help="serve a run directory's HTML report on 127.0.0.1 and print the address")
    view.add_argument("run_dir", type=Path)
    view.add_argument("--port", type=bounded_int(0, 65535), default=0,
                      help="port on 127.0.0.1 (default: any free port)")
    view.add_argument("--verbose", action="store_true", help="log every request on stderr")
    view.set_defaults(func=cmd_view)

    from harness.imagecache.commands import add_images_parser
    add_images_parser(sub)

    doctor = sub.add_parser("doctor", help="check the engine, mmdebstrap, disk and data; say where things are")
    doctor.add_argument("--start-engine", action="store_true", help="start dockerd if nothing answers (root)")
    doctor.set_defaults(func=cmd_doctor)

    from harness.compare import add_compare_parser
    add_compare_parser(sub)
    from harness.resources import add_data_parser
    add_data_parser(sub)
    from harness.spec_commands import add_specs_parser
    add_specs_parser(sub)
    from harness.instance_commands import add_instances_parser
    add_instances_parser(sub, common)
    from harness.cluster import add_node_parser
    add_node_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``harness`` command; everything it prints escapes control characters
    (harness/clioutput.py)."""
    from harness.clioutput import escaped_output
    with escaped_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    from harness.swebench.flags import translate
    try:  # swebench's own option names, so that a copied run_evaluation command line works
        argv = translate(sys.argv[1:] if argv is None else list(argv))
    except InputError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        with stopped_like_ctrl_c():
            return args.func(args)
    except (InputError, EngineUnavailable) as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    except (RunIncomplete, EngineLost) as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 3
    except HarnessError as exc:
        print(f"harness: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print(f"harness: interrupted ({signal_name(interrupt)}); this run's containers were removed and the "
              "results so far are kept: re-run the same command to finish", file=sys.stderr)
        return exit_code(interrupt)


# ---------------------------------------------------------------------------- run

def cmd_run(args: argparse.Namespace) -> int:
    from harness.inputs import demo
    instances_path, dataset = resolve_instance_source(args)
    predictions_arg = args.predictions
    if predictions_arg is None:
        if dataset is not None or args.instances is not None:
            raise InputError("--predictions is required with --instances ('gold', 'empty' or a file)",
                             field="--predictions")
        predictions_arg = str(demo.DEMO_DIR / "predictions.jsonl")
    run_id = args.run_id
    if run_id is None and args.instances is None and dataset is None and args.predictions is None:
        run_id = "demo"
    layout = swebench_layout_request(args, instances_path, predictions_arg)
    result = execute_run(args, instances_path, predictions_arg, run_id, args.output_dir.expanduser().resolve(),
                         manifest=args.manifest, dataset=dataset)
    if layout is not None:
        write_swebench_layout(layout, result.run_id, result.run_dir)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.atomic import write_json_atomic, write_text_atomic
    from harness.inputs.instances import load_instances
    from harness.results.validity import instance_validity, render_markdown, validation_problem, validity_report
    from harness.paths import RunPaths, safe_run_id
    instances_path, dataset = resolve_instance_source(args)
    named = Path(dataset["source"]).name if dataset else instances_path.stem
    root = args.output_dir.expanduser().resolve() / safe_run_id(args.run_id or f"validate-{_slug(named)}")
    # every repeat and the empty run plant the same canaries, so that a canary that does not
    # always fail with the reference patch shows (canary instability); the seed survives a resume
    seed = _validation_seed(root, args.canary_seed)
    gold_runs = []
    for n in range(1, args.repeat + 1):
        gold = execute_run(args, instances_path, "gold", f"gold-{n}", root, show=False,
                           label=f"{root.name}-gold-{n}", dataset=dataset, canary_seed=seed)
        gold_runs.append({r.instance_id: r.to_report() for r in gold.results})
        refused = list(gold.summary.get("input_errors") or {})
    # the empty run drops what the reference disproved
    empty_run = execute_run(args, instances_path, "empty", "empty", root, show=False, label=f"{root.name}-empty",
                            dataset=dataset, canary_seed=seed, control=root / "gold-1")
    empty = {r.instance_id: r.to_report() for r in empty_run.results}
    rows = []
    for inst in load_instances(instances_path, args.instance_ids).instances:
        gold = [run[inst.instance_id] for run in gold_runs if inst.instance_id in run]
        if not gold:
            continue  # refused before it ran (named on stderr and under the report's "refused")
        rows.append(instance_validity(inst.instance_id, inst.fail_to_pass, inst.pass_to_pass, gold,
                                      empty.get(inst.instance_id)))
    report = validity_report(rows, args.repeat)
    report["canary_seed"] = seed
    report["refused"] = refused
    layout = RunPaths(root)
    write_json_atomic(layout.validity_json, report)
    write_text_atomic(layout.validity_markdown, render_markdown(report))
    print(render_markdown(report))
    print(f"validity report: {layout.validity_json}")
    problem = validation_problem(rows, {r["instance_id"]: [run[r["instance_id"]] for run in gold_runs
                                                           if r["instance_id"] in run] for r in rows}, refused)
    if problem is not None:
        print(f"harness: validate: {problem}", file=sys.stderr)
        return 2
    return 0


def _validation_seed(root: Path, given: int | None) -> int:
    """The canary seed of a validation directory: the one given, else the one it recorded
    when it started, else a fresh one (recorded)."""
    import json
    import secrets
    from harness.atomic import write_json_atomic
    path = root / "canary-seed.json"
    try:
        recorded = json.loads(path.read_text()).get("canary_seed")
    except (OSError, ValueError, AttributeError):
        recorded = None
    seed = given if given is not None else recorded if isinstance(recorded, int) else secrets.randbits(63)
    if seed != recorded:
        root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"canary_seed": seed})
    return seed


def cmd_audit(args: argparse.Namespace) -> int:
    """Generate the corpus for the chosen instances, run it as one batch, print the table."""
    from harness.inputs import demo
    from harness.inputs.instances import load_instances
    from harness.integrity import audit
    from harness.paths import RunPaths, cache_root, safe_run_id
    from harness.inputs.repos import GitDir, RepoResolver, read_blob
    instances_path = (args.instances or demo.DEMO_DIR / "instances.jsonl").expanduser().resolve()
    loaded = load_instances(instances_path, args.instance_ids)
    chosen = audit.choose(loaded.instances, args.instance_ids)
    if not chosen:
        raise InputError("no instance to audit", source=str(instances_path))
    cache_dir = args.cache_dir.expanduser().resolve() if args.cache_dir else cache_root()
    resolver = RepoResolver(cache_dir, args.repos_dir, dict(args.repo), allow_clone=not args.no_clone)

    def reader_for(inst):
        repo = GitDir(resolver.path_for(inst.repo))
        commit = repo.resolve_commit(inst.base_commit, inst.instance_id)

        def read(path: str):
            data = read_blob(repo, commit, path)
            return None if data is None else data.decode("utf-8", "replace")
        read.paths = [e.path for e in repo.ls_tree(commit) if e.type == "blob"]
        return read

    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR, *args.specs)

    def runner_for(inst) -> str:
        return specs.get(inst.repo, inst.version).runner
    attacks = audit.build(chosen, reader_for, set(args.classes) if args.classes else None, runner_for)
    output_dir = args.output_dir.expanduser().resolve()
    run_id = safe_run_id(args.run_id or f"audit-{_slug(instances_path.stem)}")
    root = output_dir / run_id
    root.mkdir(parents=True, exist_ok=True)
    index = audit.write_predictions(RunPaths(root).audit_predictions, attacks)
    ids = [i.instance_id for i in chosen]
    timeout = args.timeout if args.timeout is not None else AUDIT_TIMEOUT
    # the reference patch first: the attacks plant its canaries, and a canary it disproved
    # accuses no attack (beside the audit's run directory, never inside it)
    execute_run(args, instances_path, "gold", f"{run_id}.control", output_dir, show=False,
                instance_ids=ids, timeout=timeout)
    attacked = execute_run(args, instances_path, str(RunPaths(root).audit_predictions), run_id, output_dir,
                           show=False, instance_ids=ids, timeout=timeout, control=output_dir / f"{run_id}.control")
    summary = audit.summarise(attacked.run_dir, index)
    audit.write(attacked.run_dir, summary)
    print(audit.render(summary))
    print(f"audit: {summary['attacks']} attacks, {summary['resolved']} resolved; {RunPaths(attacked.run_dir).audit_markdown}")
    return 1 if summary["resolved"] else 0


def execute_run(args: argparse.Namespace, instances_path: Path, predictions_arg: str, run_id: str | None,
                output_dir: Path, manifest: Path | None = None, show: bool = True, label: str | None = None,
                dataset: dict | None = None, *, control: Path | None = None, canary_seed: int | None = None,
                instance_ids: list[str] | None = None, timeout: int | None = None):
    """One run through :func:`harness.run.session.evaluate`, its options read from the command
    line (``control``, ``canary_seed``, ``instance_ids`` and ``timeout`` win over the
    flags: the commands that run several times choose them). Shows the progress line,
    the table (``show``) and where the run went. Returns the session's RunResult."""
    from harness.run.session import RunLimits, evaluate
    progress = ProgressLine(enabled=not args.quiet and sys.stderr.isatty())
    options = evaluate_options(args)
    if timeout is not None:
        options["limits"] = RunLimits(timeout=timeout, task_timeout=args.task_timeout, cpus=args.cpus)
    try:
        with progress:
            result = evaluate(
                instances_path, predictions_arg,
                instance_ids=instance_ids if instance_ids is not None else args.instance_ids,
                run_id=run_id, output_dir=output_dir,
                control=control if control is not None else getattr(args, "control", None),
                canary_seed=canary_seed if canary_seed is not None else getattr(args, "canary_seed", None),
                perturbed_run=getattr(args, "perturbed_run", False),
                manifest=manifest, dataset=dataset, label=label,
                on_start=progress.start, on_progress=progress.update, **options)
    except RunIncomplete as exc:
        if exc.result is not None:
            show_result(exc.result, show and not args.quiet)
        raise
    show_result(result, show and not args.quiet)
    return result


def _slug(text: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "run"


# ---------------------------------------------------------------------------- report, view

def cmd_report(args: argparse.Namespace) -> int:
    from harness.evaluation.regrade import regrade_run
    summary = regrade_run(args.run_dir)
    print(f"re-graded {args.run_dir}: resolved {summary['resolved_instances']} of {summary['total_instances']}; "
          f"changed: {', '.join(summary['regraded_changed_ids']) or 'none'}")
    render_pages(args.run_dir.expanduser().resolve())
    from harness.swebench.layout import refresh_layout
    refreshed = refresh_layout(args.run_dir.expanduser().resolve())
    if refreshed is not None:
        print(f"SWE-bench layout rewritten: {refreshed.run_report}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from harness.views.serve import make_server
    from harness.paths import PAGE, SUMMARY, RunPaths
    run_dir = args.run_dir.expanduser().resolve()
    if not RunPaths(run_dir).summary.is_file():
        raise InputError(f"not a run directory (no {SUMMARY})", source=str(run_dir))
    if not RunPaths(run_dir).page.is_file():
        render_pages(run_dir)
    try:
        server = make_server(run_dir, args.port, quiet=not args.verbose)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{args.port}: {exc}", field="--port") from exc
    host, port = server.server_address[:2]
    try:
        # inside: a stop that arrives while the line is still being written (the reader
        # has it and signals at once) ends serving like one that arrives later
        print(f"serving {run_dir} at http://{host}:{port}/{PAGE} (Ctrl-C to stop)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


# ---------------------------------------------------------------------------- doctor

def cmd_doctor(args: argparse.Namespace) -> int:
    from harness.engine.client import connect, start_engine
    from harness.paths import cache_root
    problems = []
    if args.start_engine:
        try:
            start_engine()
        except EngineUnavailable as exc:
            problems.append(str(exc))
    engine_ok = False
    try:
        client = connect(timeout=10)
        info = client.version()
        engine_ok = True
        print(f"engine: Docker {info.get('Version')} (API {info.get('ApiVersion')})")
    except EngineUnavailable as exc:
        problems.append(str(exc))
    for tool, package, needed in (("mmdebstrap", "mmdebstrap", "to bootstrap base images"),
                                  ("git", "git", "to export repositories"),
                                  ("dockerd", "docker.io", "to start an engine")):
        found = shutil.which(tool)
        print(f"{tool}: {found or 'missing'}")
        if not found and not (tool == "dockerd" and engine_ok):
            problems.append(f"{tool} is missing ({needed}): apt-get install {package}")
    from harness import resources
    from harness.buildinfo import build_info
    print(f"version: {build_info().describe()}")
    try:
        print(f"data: {resources.images_dir()}, {resources.instances_dir()} ({resources.data_source()})")
    except resources.ResourceError as exc:
        problems.append(str(exc))
    problems += resources.problems()
    print(f"cache: {cache_root()} ($HARNESS_CACHE_DIR, default ~/.cache/harness; --cache-dir overrides)")
    from harness.paths import state_root
    print(f"image state: {state_root()} ($HARNESS_STATE_DIR: last uses and the leases of live runs, per engine)")
    print(f"runs: {Path(DEFAULT_OUTPUT_DIR).resolve()} (--output-dir, default ./{DEFAULT_OUTPUT_DIR} "
          "of the working directory)")
    for label, path in (("cache", cache_root()), ("docker data", Path("/var/lib/docker"))):
        probe = path if path.exists() else Path(os.path.expanduser("~"))
        free = shutil.disk_usage(probe).free / 1024**3
        print(f"disk free at {label} ({probe}): {free:.1f} GiB")
        if free < 5:
            problems.append(f"less than 5 GiB free at {probe}")
    for problem in dict.fromkeys(problems):
        print(f"problem: {problem}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
