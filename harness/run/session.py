"""One grading run as a library call: :func:`evaluate`.

``harness run``, ``harness validate`` and ``harness audit`` are thin mappings of their
flags onto this function; a notebook, an agent framework or a CI job calls it directly::

    import harness
    result = harness.evaluate("instances/demo/instances.jsonl", "gold",
                              on_progress=lambda e: print(e.done, e.total, e.instance_id, e.status.value))
    result.summary["resolved_ids"], result.run_dir

It loads and checks the inputs (a record the harness cannot grade is refused on stderr,
in the log and in the summary, never dropped), prepares images, evaluates every task on
the chosen executor, writes the run directory (reports, summary.json, manifest.json,
report.html) and returns a :class:`RunResult`. It prints no table: rendering is the
caller's (the CLI prints one from the result).

Exceptions are those of :mod:`harness.errors`: :class:`~harness.errors.InputError` for
input the harness refuses before running, :class:`~harness.errors.EngineUnavailable`
when no engine answers, :class:`~harness.errors.RunIncomplete` (carrying the written
:class:`RunResult`) when the run's infrastructure failed part-way.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence, Union

from harness.errors import InputError, RunIncomplete

if TYPE_CHECKING:
    from harness.run.batch import RunResults
    from harness.engine.prebuilt import PrebuiltSource
    from harness.grading.status import ErrorReason, InstanceStatus
    from harness.paths import RunPaths
    from harness.results.report import InstanceResult

#: a path to an instance file (JSON, JSONL or YAML), or the instance records themselves
InstancesInput = Union[str, "os.PathLike[str]", Iterable[Mapping[str, Any]]]
#: ``"gold"``, ``"empty"``, a path to a predictions file, or {instance_id: model_patch}
PredictionsInput = Union[str, "os.PathLike[str]", Mapping[str, Union[str, None]]]
PathLike = Union[str, "os.PathLike[str]"]
CacheLevel = Literal["none", "base", "env", "instance"]

#: the model name recorded for predictions given as a mapping without one
MAPPING_MODEL = "python-api"
#: what directory a run goes under when no output directory is given
DEFAULT_OUTPUT_DIR = Path("runs")


@dataclass(frozen=True)
class Repositories:
    """Where the instances' git repositories come from: ``repos_dir`` (OWNER__NAME
    directories), ``overrides`` (OWNER/NAME -> a local repository, winning over both),
    and whether a repository found in neither may be cloned from its public URL. The
    demo set's repositories are built from the package when no override or ``repos_dir``
    holds them (:class:`harness.inputs.repos.RepoResolver`)."""

    repos_dir: PathLike | None = None
    overrides: Mapping[str, PathLike] = field(default_factory=dict)
    clone: bool = True


@dataclass(frozen=True)
class RunLimits:
    """``timeout``: the test run's seconds (None: the spec's); ``task_timeout``: a whole
    task's (image preparation + evaluation), killed and recorded as deadline_exceeded past
    it; ``cpus``: a cap on each sandbox's cores (None: the engine host's)."""

    timeout: int | None = None
    task_timeout: float = 7200.0
    cpus: float | None = None


@dataclass(frozen=True)
class ProgressEvent:
    """One task finished (evaluated, or its earlier complete result reused): ``done`` of
    ``total`` so far. ``result`` is the instance's graded report as written."""

    instance_id: str
    attempt: int | None
    status: InstanceStatus
    resolved: bool
    error_reason: ErrorReason | None
    done: int
    total: int
    result: InstanceResult


@dataclass(frozen=True)
class PagesWritten:
    """The HTML report written after the run: its page, or why it was not written, and
    the per-instance pages that failed to render."""

    page: Path | None
    error: str | None = None
    failed_pages: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What a run wrote: ``summary`` (as in summary.json), ``results`` (this invocation's
    per-instance reports, read back from the run directory on iteration), ``paths`` (the
    run directory's files) and the HTML report's outcome."""

    run_id: str
    summary: dict[str, Any]
    results: RunResults
    paths: RunPaths
    pages: PagesWritten

    @property
    def run_dir(self) -> Path:
        return self.paths.root


def evaluate(instances: InstancesInput, predictions: PredictionsInput, *,
             instance_ids: Sequence[str] | None = None,
             specs: Sequence[PathLike] = (),
             repositories: Repositories = Repositories(),
             executor: Literal["local", "ray"] = "local",
             max_workers: int = 1,
             ray_address: str | None = None,
             limits: RunLimits = RunLimits(),
             run_id: str | None = None,
             output_dir: PathLike = DEFAULT_OUTPUT_DIR,
             cache_dir: PathLike | None = None,
             model: str | None = None,
             force: bool = False,
             control: PathLike | None = None,
             canary_seed: int | None = None,
             perturbed_run: bool = False,
             registry: str | None = None,
             prebuilt: PrebuiltSource | None = None,
             cache_level: CacheLevel = "instance",
             disk_budget: int | None = None,
             manifest: PathLike | None = None,
             dataset: Mapping[str, Any] | None = None,
             label: str | None = None,
             on_start: Callable[[int], None] | None = None,
             on_progress: Callable[[ProgressEvent], None] | None = None,
             quiet: bool = False,
             verbose: bool = False,
             derive_lists: bool = False) -> RunResult:
    """Grade ``predictions`` on ``instances`` and write the run directory
    ``output_dir/run_id`` (default run id: the model's name and the time).

    ``instances``: a path, or records (SWE-bench's fields), kept in a content-addressed
    file in the cache so that the manifest pins them. ``predictions``: ``"gold"``,
    ``"empty"``, a predictions file, or a mapping {instance_id: model_patch} graded as
    ``model`` (default ``"python-api"``). ``instance_ids``: only these. ``specs``: extra
    spec directories layered over the built-in ones. ``control``: a reference-patch run of
    the same instances (its canaries planted, runs collecting less flagged);
    ``canary_seed``: plant reproducible canaries; ``perturbed_run``: re-run FULL results
    with one expected value changed. ``registry`` / ``prebuilt``: share or pull images.
    ``cache_level`` / ``disk_budget``: which images survive the run / prune before it.
    ``manifest``: refuse to run when any input differs from this pinned manifest.json.
    ``dataset``: where an instance file read from a dataset came from (recorded).
    ``label``: the images' run label (default: the run id). ``derive_lists``: records
    without FAIL_TO_PASS and PASS_TO_PASS are accepted (nothing is graded; the runs of
    ``harness instances derive``, which reads every test's outcome back from the run
    directory: harness/run/derive.py).

    ``on_start(total)`` is called once the tasks are known, before any runs;
    ``on_progress(event)`` once per task as it finishes, after its report is written; never
    concurrently with itself (events arrive in ``done`` order). An exception either raises
    stops the run as Ctrl-C does: its containers are removed, what was graded stays
    written and the same call resumes it.
    """
    from harness.inputs.instances import load_instances
    from harness.locks import run_directory_lock
    from harness.paths import RunPaths, cache_root
    from harness.inputs.predictions import resolve_predictions

    cache = Path(cache_dir).expanduser().resolve() if cache_dir is not None else cache_root()
    instances_path = _instances_file(instances, cache)
    predictions_arg = _predictions_arg(predictions, model, cache)
    loaded = load_instances(instances_path, instance_ids, source=(dataset or {}).get("source"),
                            lists_required=not derive_lists)
    resolved = resolve_predictions(predictions_arg, loaded.instances)
    model_name = resolved.model_name_or_path
    run_id = run_id or f"{_slug(model_name)}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    paths = RunPaths.create(Path(output_dir), run_id)
    repositories = Repositories(_path(repositories.repos_dir),
                                {name: Path(p) for name, p in repositories.overrides.items()}, repositories.clone)
    session = _Session(specs=tuple(Path(s) for s in specs), repositories=repositories, executor=executor,
                       max_workers=max_workers, ray_address=ray_address, limits=limits, cache_dir=cache,
                       force=force, control=_path(control), canary_seed=canary_seed, perturbed_run=perturbed_run,
                       registry=registry, prebuilt=prebuilt, cache_level=cache_level, disk_budget=disk_budget,
                       manifest=_path(manifest), dataset=dict(dataset) if dataset is not None else None,
                       label=label, on_start=on_start, on_progress=on_progress, quiet=quiet, verbose=verbose)
    with run_directory_lock(paths.root):
        return session.run(loaded, resolved, instances_path, predictions_arg, run_id, model_name, paths)


@dataclass(frozen=True)
class _Session:
    specs: tuple[Path, ...]
    repositories: Repositories
    executor: str
    max_workers: int
    ray_address: str | None
    limits: RunLimits
    cache_dir: Path
    force: bool
    control: Path | None
    canary_seed: int | None
    perturbed_run: bool
    registry: str | None
    prebuilt: Any
    cache_level: str
    disk_budget: int | None
    manifest: Path | None
    dataset: dict | None
    label: str | None
    on_start: Callable[[int], None] | None
    on_progress: Callable[[ProgressEvent], None] | None
    quiet: bool
    verbose: bool

    def run(self, loaded, predictions, instances_path: Path, predictions_arg: str, run_id: str, model: str,
            paths) -> RunResult:
        from harness import logs
        from harness.atomic import write_json_atomic
        from harness.run.batch import BatchRunner
        from harness.engine.client import connect
        from harness.engine.sandbox import Limits
        from harness.evaluation.setup import EvalConfig
        from harness.run.executors import make_executor
        from harness.results.report import summarise_run_directory
        from harness.inputs.repos import RepoResolver
        from harness.preparation.preparer import Preparer
        from harness.evaluation.tasks import RunConfig, iter_tasks
        from harness.inputs.instance_checks import refuse_unaddressable
        from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry

        logs.configure(paths.log, quiet=self.quiet, verbose=self.verbose)
        log = logs.get_logger(run_id=run_id)
        input_errors = named_errors([*loaded.errors, *predictions.errors])
        for message in input_errors.values():
            print(f"harness: skipped: {message}", file=sys.stderr)
            log.error("input.error", error=message)

        repos = self.repositories
        specs = SpecRegistry.load(DEFAULT_SPECS_DIR, *self.specs)
        loaded.instances, refused = refuse_unaddressable(loaded.instances, specs, str(instances_path))
        for error in refused:  # ids the spec's runner cannot address: loud, never graded NO
            input_errors.update(named_errors([error], input_errors))
            print(f"harness: refused: {error}", file=sys.stderr)
            log.error("input.unaddressable", error=str(error))
        resolver = RepoResolver(self.cache_dir, repos.repos_dir, repos.overrides, allow_clone=repos.clone)
        tasks, orphans = iter_tasks(loaded.instances, predictions.predictions)
        for orphan in orphans:
            print(f"harness: skipped prediction for {orphan}: not in the instance set", file=sys.stderr)
        with_prediction = {t.instance.instance_id for t in tasks}
        without = [i.instance_id for i in loaded.instances if i.instance_id not in with_prediction]

        config = RunConfig(run_id=run_id, output_dir=paths.root.parent, cache_dir=self.cache_dir,
                           eval=EvalConfig(timeout=self.limits.timeout, perturbed_run=self.perturbed_run),
                           max_workers=self.max_workers, force=self.force, control_dir=self.control,
                           task_timeout=self.limits.task_timeout, registry=self.registry, label=self.label,
                           prebuilt=self.prebuilt, canary_seed=self.canary_seed,
                           limits=Limits(cpus=self.limits.cpus))
        executor = make_executor(self.executor, self.max_workers, address=self.ray_address)
        # The driver's own engine: required to run locally; with a cluster the nodes have theirs.
        client = connect() if self.executor == "local" or self.cache_level != "instance" else _maybe_connect()
        preparer = None
        if client is not None:
            preparer = Preparer(client, specs, resolver, self.cache_dir)
            if self.registry:
                preparer.images.use_registry(self.registry)
            if config.prebuilt is not None:
                preparer.use_prebuilt(config.prebuilt)
        from harness.views.site import page_hook
        write_page = page_hook(paths.root, run_id)  # each instance's HTML page as soon as it is graded
        on_result = _Reporter(len(tasks), write_page, self.on_progress)

        run_instances = frozenset(i.instance_id for i in loaded.instances)
        if self.disk_budget is not None and client is not None:
            from harness.imagecache.commands import prune_for_run
            decided, outcomes = prune_for_run(client, budget=self.disk_budget, instance_ids=run_instances, log=log)
            if not self.quiet:
                print(f"harness: --disk-budget: removed {sum(o.removed for o in outcomes)} images "
                      f"({decided.freed / 1e9:.2f} GB planned); the harness's images took "
                      f"{decided.total_before / 1e9:.2f} GB, budget "
                      f"{'met' if decided.budget_met else 'NOT met (the rest is in use or needed)'}", file=sys.stderr)
        runner = BatchRunner(config, client, preparer, executor=executor, progress=on_result,
                             specs=specs, repos=resolver)
        if self.manifest is not None:
            from harness.results.manifest import differences, load_manifest
            pinned = load_manifest(self.manifest)
            diffs = differences(pinned, config.grading_key(), runner.preflight(tasks))
            if diffs:
                for line in diffs:
                    print(f"harness: pinned input changed: {line}", file=sys.stderr)
                raise InputError(f"{len(diffs)} input(s) differ from the pinned manifest; refusing to run",
                                 source=str(self.manifest), field="--manifest")
        if self.on_start is not None:
            self.on_start(len(tasks))
        try:
            results = runner.run(tasks)
        finally:
            if preparer is not None:
                preparer.images.tracker.release()  # the run uses no image any more: prune may take them
        from harness.hashing import file_sha256
        from harness.results.manifest import write_manifest
        inputs = {"instances_file": str(instances_path), "instances_sha256": file_sha256(instances_path),
                  "predictions": predictions_arg,
                  "predictions_sha256": file_sha256(Path(predictions_arg)) if Path(predictions_arg).is_file()
                  else None,
                  "specs_dirs": [str(DEFAULT_SPECS_DIR), *map(str, self.specs)], "dataset": self.dataset,
                  "prebuilt": config.prebuilt.__dict__ if config.prebuilt is not None else None}
        write_manifest(paths.manifest, run_id, {**config.eval.as_dict(), "limits": config.limits.__dict__,
                                                "retries": config.retries}, config.grading_key(), runner.pins(),
                       inputs)
        if self.cache_level != "instance" and client is not None:
            from harness.imagecache.commands import prune_for_run
            prune_for_run(client, level=self.cache_level, instance_ids=run_instances, log=log)
        # a refused record is named (input_errors). One that names its instance (a string id:
        # a malformed field, a runner that cannot address its tests) is that instance, counted
        # as an error, so the set's denominator keeps every instance asked for; a record with no
        # usable id (#N) names no instance and is never counted. A refused prediction of a good
        # record counts that instance as an error.
        good_ids = [i.instance_id for i in loaded.instances]
        refused_ids = {e.record for e in [*loaded.errors, *refused] if names_an_instance(e.record)}
        all_ids = good_ids + sorted(refused_ids - set(good_ids))
        summary = summarise_run_directory(run_id, model, paths.root, all_ids, results.keys(), input_errors, without)
        summary["instances_file"] = str(instances_path)
        if self.dataset is not None:
            summary["dataset"] = self.dataset
        summary["predictions"] = predictions_arg
        summary["executor"] = {"name": self.executor, "nodes": dict(sorted(runner.tally.nodes.items())),
                               "reused": runner.tally.reused, "evaluated": runner.tally.evaluated}
        write_json_atomic(paths.summary, summary)
        result = RunResult(run_id, summary, results, paths, write_pages(paths.root))
        tally = runner.tally
        if tally.aborted or tally.engine_lost:
            why = tally.aborted or (f"the Docker engine stopped answering: {tally.engine_lost} evaluation(s) "
                                    "recorded as engine_lost")
            raise RunIncomplete(f"{why}; summary written to {paths.summary}; re-run the same command to finish",
                                result=result)
        return result


def names_an_instance(record: str | None) -> bool:
    """Whether a refused instance record's name is its own id, not a stand-in for a record
    without a usable one (``#N`` by position, ``<no instance_id>``)."""
    return record is not None and record != "" and not record.startswith("#") and record != "<no instance_id>"


def named_errors(errors, taken=()) -> dict[str, str]:
    """Input errors by the record each names; two errors naming one record (an instance
    and a prediction, two records without an id) are both kept."""
    out: dict[str, str] = {}
    for error in errors:
        key = error.record or "?"
        number = 2
        while key in out or key in taken:
            key, number = f"{error.record or '?'} ({number})", number + 1
        out[key] = str(error)
    return out


class _Reporter:
    """The batch's per-result hook: the instance's HTML page, then the caller's event
    (serialised, so that ``done`` counts up one at a time whatever the executor's threads)."""

    def __init__(self, total: int, write_page: Callable[[Any], None],
                 on_progress: Callable[[ProgressEvent], None] | None) -> None:
        self.total = total
        self.done = 0
        self.write_page = write_page
        self.on_progress = on_progress
        self._lock = threading.Lock()

    def __call__(self, result: InstanceResult) -> None:
        self.write_page(result)
        with self._lock:
            self.done += 1
            if self.on_progress is not None:
                self.on_progress(ProgressEvent(result.instance_id, result.attempt, result.status, result.resolved,
                                               result.error_reason, self.done, self.total, result))


def write_pages(run_dir: Path) -> PagesWritten:
    """The run's HTML report; a failure to render is returned, never raised (the results
    are written)."""
    from harness.views.site import write_run_pages
    try:
        site = write_run_pages(run_dir)
    except (ValueError, OSError) as exc:
        return PagesWritten(None, error=str(exc))
    return PagesWritten(site.page, failed_pages=tuple(str(f) for f in site.failed_pages))


def _maybe_connect():
    from harness.engine.client import connect
    from harness.errors import EngineUnavailable
    try:
        return connect(timeout=30)
    except EngineUnavailable:
        return None


def _path(value: PathLike | None) -> Path | None:
    return None if value is None else Path(value).expanduser()


def _instances_file(instances: InstancesInput, cache: Path) -> Path:
    if isinstance(instances, (str, os.PathLike)):
        return Path(instances).expanduser().resolve()
    return _pinned_jsonl(cache, "instances", list(instances))


def _predictions_arg(predictions: PredictionsInput, model: str | None, cache: Path) -> str:
    """What the run records as its predictions: the word, the file, or the content-addressed
    file a mapping was written to."""
    from harness.inputs.predictions import EMPTY, GOLD
    if isinstance(predictions, os.PathLike):
        return str(Path(predictions).expanduser().resolve())
    if isinstance(predictions, str):
        return predictions if predictions in (GOLD, EMPTY) else str(Path(predictions).expanduser().resolve())
    if not isinstance(predictions, Mapping):
        raise InputError(f"expected 'gold', 'empty', a path or a mapping, got {type(predictions).__name__}",
                         field="predictions")
    name = model or MAPPING_MODEL
    records = [{"instance_id": iid, "model_name_or_path": name, "model_patch": patch}
               for iid, patch in predictions.items()]
    return str(_pinned_jsonl(cache, "predictions", records))


def _pinned_jsonl(cache: Path, kind: str, records: list) -> Path:
    """Records written once under the cache, named by their content (a re-run with the
    same records finds the same file, so a pinned manifest still matches)."""
    from harness.atomic import write_text_atomic
    try:
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    except (TypeError, ValueError) as exc:
        raise InputError(f"the {kind} records are not JSON data: {exc}", field=kind) from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = cache / "session-inputs" / f"{kind}-{digest}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "run"
