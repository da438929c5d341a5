"""The ``harness`` command line.

    harness run        grade predictions (default: the embedded demo set and its predictions)
    harness audit      run the adversarial corpus against your instances and specs
    harness doctor     say what is missing (engine, mmdebstrap, disk); --start-engine starts dockerd
    harness compare    vendor claims vs a run, or run A vs run B (see harness.compare)
    harness view       serve a run directory's HTML report on 127.0.0.1
    harness specs      list the environment specs, or show one resolved (where each field came from)

Exit codes: 0 the command did its job (whatever the verdicts), 2 bad input or missing
prerequisites (a sentence on stderr, no traceback), 3 the run ended early because its
infrastructure failed (an engine or every cluster node was lost: the summary covers what
was graded; re-running the same command finishes it), 130 interrupted (Ctrl-C: the run's
containers are removed, the run directory is resumable), 1 an unexpected failure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
from pathlib import Path

from harness.buildinfo import VersionAction
from harness.cliargs import Parser, bounded_float, bounded_int
from harness.errors import EngineLost, EngineUnavailable, HarnessError, InputError
from harness.imagecache.commands import CACHE_LEVELS, size_argument
from harness.swebench.options import (INSTANCES_HELP, SWEBENCH_EPILOG, add_dataset_options,
                                      add_swebench_output_options, prebuilt_source, resolve_instance_source,
                                      swebench_layout_request, write_swebench_layout)

DEFAULT_OUTPUT_DIR = "runs"
#: the ranges of the numeric options (a day of testing, a week per task, 1,024 workers)
MAX_TIMEOUT = 86_400
MAX_TASK_TIMEOUT = 7 * 86_400
MAX_WORKERS = 1024
MAX_REPEAT = 100
#: canary seeds are 63-bit (harness.proving)
MAX_CANARY_SEED = 2 ** 63 - 1


def _repo_override(text: str) -> tuple[str, Path]:
    if "=" not in text or "/" not in text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME=PATH, got {text!r}")
    name, path = text.split("=", 1)
    return name, Path(path).expanduser().resolve()


def _cores(text: str) -> float:
    from harness.engine.cpus import check_cap
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
                       "compiled, runner-rebinding, reinstall, or 'suite')")
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
    from harness.cluster import add_node_parser
    add_node_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    from harness.swebench.flags import translate
    try:  # swebench's own option names, so that a copied run_evaluation command line works
        argv = translate(sys.argv[1:] if argv is None else list(argv))
    except InputError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
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
    except KeyboardInterrupt:
        print("harness: interrupted; this run's containers were removed and the results so far are kept: "
              "re-run the same command to finish", file=sys.stderr)
        return 130


class RunIncomplete(HarnessError):
    """The run ended early because its infrastructure failed; the summary was written."""


# ---------------------------------------------------------------------------- run

def cmd_run(args: argparse.Namespace) -> int:
    from harness import demo
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
    summary, _, paths = execute_run(args, instances_path, predictions_arg, run_id,
                                    args.output_dir.expanduser().resolve(), manifest=args.manifest, dataset=dataset)
    if layout is not None:
        write_swebench_layout(layout, summary["run_id"], paths.root)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.instances import load_instances
    from harness.validity import instance_validity, render_markdown, validity_report
    from harness.report import write_json_atomic, write_text_atomic
    from harness.paths import safe_run_id
    instances_path, dataset = resolve_instance_source(args)
    named = Path(dataset["source"]).name if dataset else instances_path.stem
    root = args.output_dir.expanduser().resolve() / safe_run_id(args.run_id or f"validate-{_slug(named)}")
    # every repeat and the empty run plant the same canaries, so that a canary that does not
    # always fail with the reference patch shows (canary instability); the seed survives a resume
    args.canary_seed = _validation_seed(root, args.canary_seed)
    gold_runs = []
    for n in range(1, args.repeat + 1):
        _, results, _ = execute_run(args, instances_path, "gold", f"gold-{n}", root, show=False,
                                    label=f"{root.name}-gold-{n}", dataset=dataset)
        gold_runs.append({r.instance_id: r.to_report() for r in results})
    args.control = root / "gold-1"  # the empty run drops what the reference disproved
    _, empty_results, _ = execute_run(args, instances_path, "empty", "empty", root, show=False,
                                      label=f"{root.name}-empty", dataset=dataset)
    empty = {r.instance_id: r.to_report() for r in empty_results}
    rows = []
    for inst in load_instances(instances_path, args.instance_ids).instances:
        gold = [run[inst.instance_id] for run in gold_runs if inst.instance_id in run]
        rows.append(instance_validity(inst.instance_id, inst.fail_to_pass, inst.pass_to_pass, gold,
                                      empty.get(inst.instance_id)))
    report = validity_report(rows, args.repeat)
    report["canary_seed"] = args.canary_seed
    write_json_atomic(root / "validity.json", report)
    write_text_atomic(root / "validity.md", render_markdown(report))
    print(render_markdown(report))
    print(f"validity report: {root / 'validity.json'}")
    return 0


def _validation_seed(root: Path, given: int | None) -> int:
    """The canary seed of a validation directory: the one given, else the one it recorded
    when it started, else a fresh one (recorded)."""
    import json
    import secrets
    from harness.report import write_json_atomic
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
    from harness import demo
    from harness.instances import load_instances
    from harness.integrity import audit
    from harness.paths import cache_root, safe_run_id
    from harness.repos import GitDir, RepoResolver, read_blob
    instances_path = (args.instances or demo.DEMO_DIR / "instances.jsonl").expanduser().resolve()
    loaded = load_instances(instances_path, args.instance_ids)
    chosen = audit.choose(loaded.instances, args.instance_ids)
    if not chosen:
        raise InputError("no instance to audit", source=str(instances_path))
    cache_dir = args.cache_dir.expanduser().resolve() if args.cache_dir else cache_root()
    overrides = dict(args.repo)
    if args.repos_dir is None and any(i.repo.startswith(demo.DEMO_OWNER + "/") for i in chosen):
        overrides = {**demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos"), **overrides}
    resolver = RepoResolver(cache_dir, args.repos_dir, overrides, allow_clone=not args.no_clone)

    def reader_for(inst):
        repo = GitDir(resolver.path_for(inst.repo))
        commit = repo.resolve_commit(inst.base_commit, inst.instance_id)

        def read(path: str):
            data = read_blob(repo, commit, path)
            return None if data is None else data.decode("utf-8", "replace")
        read.paths = [e.path for e in repo.ls_tree(commit) if e.type == "blob"]
        return read

    attacks = audit.build(chosen, reader_for, set(args.classes) if args.classes else None)
    output_dir = args.output_dir.expanduser().resolve()
    run_id = safe_run_id(args.run_id or f"audit-{_slug(instances_path.stem)}")
    root = output_dir / run_id
    root.mkdir(parents=True, exist_ok=True)
    index = audit.write_predictions(root / "audit-predictions.jsonl", attacks)
    args.instance_ids = [i.instance_id for i in chosen]
    if args.timeout is None:
        args.timeout = 60
    # the reference patch first: the attacks plant its canaries, and a canary it disproved
    # accuses no attack (beside the audit's run directory, never inside it)
    execute_run(args, instances_path, "gold", f"{run_id}.control", output_dir, show=False)
    args.control = output_dir / f"{run_id}.control"
    _, _, paths = execute_run(args, instances_path, str(root / "audit-predictions.jsonl"), run_id, output_dir,
                              show=False)
    summary = audit.summarise(paths.root, index)
    audit.write(paths.root, summary)
    print(audit.render(summary))
    print(f"audit: {summary['attacks']} attacks, {summary['resolved']} resolved; {paths.root / 'audit.md'}")
    return 1 if summary["resolved"] else 0


def execute_run(args: argparse.Namespace, instances_path: Path, predictions_arg: str, run_id: str | None,
                output_dir: Path, manifest: Path | None = None, show: bool = True, label: str | None = None,
                dataset: dict | None = None):
    """Load, prepare, evaluate and write one run. Returns (summary, results, paths);
    ``results`` reads this invocation's reports back from the run directory. ``dataset``:
    where the instance file came from when it was read from a dataset (recorded in the
    summary and the manifest)."""
    from harness import demo
    from harness.instances import load_instances
    from harness.paths import RunPaths, cache_root
    from harness.predictions import resolve_predictions
    from harness.locks import run_directory_lock

    loaded = load_instances(instances_path, args.instance_ids, source=(dataset or {}).get("source"))
    predictions = resolve_predictions(predictions_arg, loaded.instances)
    model = predictions.model_name_or_path
    run_id = run_id or f"{_slug(model)}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    cache_dir = (args.cache_dir.expanduser().resolve() if args.cache_dir else cache_root())
    paths = RunPaths.create(output_dir, run_id)
    with run_directory_lock(paths.root):
        return _execute_locked(args, loaded, predictions, instances_path, predictions_arg, run_id, model,
                               cache_dir, paths, manifest, show, demo, label, dataset)


def _execute_locked(args, loaded, predictions, instances_path, predictions_arg, run_id, model, cache_dir, paths,
                    manifest, show, demo, label, dataset=None):
    from harness import logs
    from harness.batch import BatchRunner
    from harness.engine.client import connect
    from harness.evaluation import EvalConfig
    from harness.executors import make_executor
    from harness.report import summarise_run_directory, write_json_atomic
    from harness.repos import RepoResolver
    from harness.engine.sandbox import Limits
    from harness.runner import Preparer, RunConfig, iter_tasks
    from harness.specs import DEFAULT_SPECS_DIR, SpecRegistry

    logs.configure(paths.log, quiet=args.quiet, verbose=args.verbose)
    log = logs.get_logger(run_id=run_id)
    input_errors = {e.record or "?": str(e) for e in [*loaded.errors, *predictions.errors]}
    for message in input_errors.values():
        print(f"harness: skipped: {message}", file=sys.stderr)
        log.error("input.error", error=message)

    overrides = dict(args.repo)
    demo_repos = sorted({i.repo for i in loaded.instances if i.repo.startswith(demo.DEMO_OWNER + "/")}
                        - set(overrides))
    if demo_repos and args.repos_dir is None:
        built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
        overrides.update({name: path for name, path in built.items() if name in demo_repos})

    specs = SpecRegistry.load(DEFAULT_SPECS_DIR, *args.specs)
    from harness.runners.checks import refuse_unaddressable
    loaded.instances, refused = refuse_unaddressable(loaded.instances, specs, str(instances_path))
    for error in refused:  # ids the spec's runner cannot address: loud, never graded NO
        input_errors[error.record or "?"] = str(error)
        print(f"harness: refused: {error}", file=sys.stderr)
        log.error("input.unaddressable", error=str(error))
    resolver = RepoResolver(cache_dir, args.repos_dir, overrides, allow_clone=not args.no_clone)
    tasks, orphans = iter_tasks(loaded.instances, predictions.predictions)
    for orphan in orphans:
        print(f"harness: skipped prediction for {orphan}: not in the instance set", file=sys.stderr)
    with_prediction = {t.instance.instance_id for t in tasks}
    without = [i.instance_id for i in loaded.instances if i.instance_id not in with_prediction]

    config = RunConfig(run_id=run_id, output_dir=paths.root.parent, cache_dir=cache_dir,
                       eval=EvalConfig(timeout=args.timeout, perturbed_run=getattr(args, "perturbed_run", False)),
                       max_workers=args.max_workers, force=args.force,
                       control_dir=getattr(args, "control", None), task_timeout=args.task_timeout,
                       registry=args.registry, label=label, prebuilt=prebuilt_source(args),
                       canary_seed=getattr(args, "canary_seed", None), limits=Limits(cpus=args.cpus))
    executor = make_executor(args.executor, args.max_workers, address=args.ray_address)
    # The driver's own engine: required to run locally; with a cluster the nodes have theirs.
    client = connect() if args.executor == "local" or args.cache_level != "instance" else _maybe_connect()
    preparer = None
    if client is not None:
        preparer = Preparer(client, specs, resolver, cache_dir)
        if args.registry:
            preparer.images.use_registry(args.registry)
        if config.prebuilt is not None:
            preparer.use_prebuilt(config.prebuilt)
    progress = _Progress(len(tasks), enabled=not args.quiet and sys.stderr.isatty())
    from harness.views.site import page_hook
    write_page = page_hook(paths.root, run_id)  # each instance's HTML page as soon as it is graded

    def on_result(result) -> None:
        progress.update(result)
        write_page(result)

    run_instances = frozenset(i.instance_id for i in loaded.instances)
    if args.disk_budget is not None and client is not None:
        from harness.imagecache.commands import prune_for_run
        decided, outcomes = prune_for_run(client, budget=args.disk_budget, instance_ids=run_instances, log=log)
        if not args.quiet:
            print(f"harness: --disk-budget: removed {sum(o.removed for o in outcomes)} images "
                  f"({decided.freed / 1e9:.2f} GB planned); the harness's images took {decided.total_before / 1e9:.2f}"
                  f" GB, budget {'met' if decided.budget_met else 'NOT met (the rest is in use or needed)'}",
                  file=sys.stderr)
    runner = BatchRunner(config, client, preparer, executor=executor, progress=on_result,
                         specs=specs, repos=resolver)
    if manifest is not None:
        from harness.manifest import differences, load_manifest
        pinned = load_manifest(manifest)
        diffs = differences(pinned, config.grading_key(), runner.preflight(tasks))
        if diffs:
            for line in diffs:
                print(f"harness: pinned input changed: {line}", file=sys.stderr)
            raise InputError(f"{len(diffs)} input(s) differ from the pinned manifest; refusing to run",
                             source=str(manifest), field="--manifest")
    try:
        with progress:
            results = runner.run(tasks)
    finally:
        if preparer is not None:
            preparer.images.tracker.release()  # the run uses no image any more: prune may take them
    from harness.manifest import write_manifest
    from harness.hashing import file_sha256
    inputs = {"instances_file": str(instances_path), "instances_sha256": file_sha256(instances_path),
              "predictions": predictions_arg,
              "predictions_sha256": file_sha256(Path(predictions_arg)) if Path(predictions_arg).is_file() else None,
              "specs_dirs": [str(DEFAULT_SPECS_DIR), *map(str, args.specs)], "dataset": dataset,
              "prebuilt": config.prebuilt.__dict__ if config.prebuilt is not None else None}
    write_manifest(paths.manifest, run_id, {**config.eval.as_dict(), "limits": config.limits.__dict__,
                                            "retries": config.retries}, config.grading_key(), runner.pins(), inputs)
    if args.cache_level != "instance" and client is not None:
        from harness.imagecache.commands import prune_for_run
        prune_for_run(client, level=args.cache_level, instance_ids=run_instances, log=log)
    all_ids = [i.instance_id for i in loaded.instances] + list(input_errors)
    summary = summarise_run_directory(run_id, model, paths.root, all_ids, results.keys(), input_errors, without)
    summary["instances_file"] = str(instances_path)
    if dataset is not None:
        summary["dataset"] = dataset
    summary["predictions"] = predictions_arg
    summary["executor"] = {"name": args.executor, "nodes": dict(sorted(runner.tally.nodes.items())),
                           "reused": runner.tally.reused, "evaluated": runner.tally.evaluated}
    write_json_atomic(paths.summary, summary)
    if show and not args.quiet:
        _print_table(results, summary)
    print(f"run directory: {paths.root}")
    _write_pages(paths.root)
    tally = runner.tally
    if tally.aborted or tally.engine_lost:
        why = tally.aborted or (f"the Docker engine stopped answering: {tally.engine_lost} evaluation(s) "
                                "recorded as engine_lost")
        raise RunIncomplete(f"{why}; summary written to {paths.summary}; re-run the same command to finish")
    return summary, results, paths


def _maybe_connect():
    from harness.engine.client import connect
    try:
        return connect(timeout=30)
    except EngineUnavailable:
        return None


def _write_pages(run_dir: Path) -> None:
    """The run's HTML report; a failure to render is said, never fatal (the results are written)."""
    from harness.views.site import write_run_pages
    try:
        site = write_run_pages(run_dir)
    except (ValueError, OSError) as exc:
        print(f"harness: report.html not written: {exc}", file=sys.stderr)
        return
    for failure in site.failed_pages:
        print(f"harness: {failure}", file=sys.stderr)
    print(f"report: {site.page}")


def _slug(text: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "run"


class _Progress:
    """A live progress line (done / resolved / errors / ETA) for interactive batches."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.enabled = enabled and total > 1
        self.total = total
        self.resolved = 0
        self.errors = 0
        self._progress = None
        self._task = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            self._progress = Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}"),
                                      TimeRemainingColumn(), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("grading", total=self.total, resolved=0, errors=0)
        return self

    def update(self, result) -> None:
        self.resolved += int(result.resolved)
        self.errors += int(bool(result.error_reason and result.error_origin != "model"))
        if self._progress is not None:
            self._progress.update(self._task, advance=1, resolved=self.resolved, errors=self.errors)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()


#: More rows than this are not printed (summary.json and report.html have them all).
TABLE_ROWS = 200


def _print_table(results, summary) -> None:
    from itertools import islice
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"run {summary['run_id']} ({summary['model_name_or_path']})")
    for column in ("instance", "status", "resolved", "F2P", "P2P", "reason"):
        table.add_column(column)
    shown = sorted(islice(results, TABLE_ROWS + 1), key=lambda r: (r.instance_id, r.attempt or 0))
    for r in shown[:TABLE_ROWS]:
        f2p = f"{len(r.f2p_success)}/{len(r.f2p_success) + len(r.f2p_failure)}"
        p2p = f"{len(r.p2p_success)}/{len(r.p2p_success) + len(r.p2p_failure)}"
        name = r.instance_id if r.attempt is None else f"{r.instance_id}#{r.attempt}"
        table.add_row(name, r.status.value, "yes" if r.resolved else "no", f2p, p2p,
                      r.error_reason.value if r.error_reason else "")
    console = Console(stderr=False)
    console.print(table)
    if len(shown) > TABLE_ROWS:
        console.print(f"(first {TABLE_ROWS} rows; every instance is in summary.json)")
    console.print(f"resolved {summary['resolved_instances']} of {summary['total_instances']}"
                  f" (errors {summary['error_instances']}, invalid {len(summary['invalid_ids'])})")


# ---------------------------------------------------------------------------- report, view

def cmd_report(args: argparse.Namespace) -> int:
    from harness.regrade import regrade_run
    summary = regrade_run(args.run_dir)
    print(f"re-graded {args.run_dir}: resolved {summary['resolved_instances']} of {summary['total_instances']}; "
          f"changed: {', '.join(summary['regraded_changed_ids']) or 'none'}")
    _write_pages(args.run_dir.expanduser().resolve())
    from harness.swebench.layout import refresh_layout
    refreshed = refresh_layout(args.run_dir.expanduser().resolve())
    if refreshed is not None:
        print(f"SWE-bench layout rewritten: {refreshed.run_report}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from harness.views.serve import make_server
    run_dir = args.run_dir.expanduser().resolve()
    if not (run_dir / "summary.json").is_file():
        raise InputError("not a run directory (no summary.json)", source=str(run_dir))
    if not (run_dir / "report.html").is_file():
        _write_pages(run_dir)
    try:
        server = make_server(run_dir, args.port, quiet=not args.verbose)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{args.port}: {exc}", field="--port") from exc
    host, port = server.server_address[:2]
    print(f"serving {run_dir} at http://{host}:{port}/report.html (Ctrl-C to stop)", flush=True)
    try:
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
