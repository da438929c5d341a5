"""The command-line options a SWE-bench user reaches for, and what they resolve to.

``harness run`` and ``harness validate`` take ``--dataset``/``--split`` (a hub name, a
parquet file, a saved dataset directory: :mod:`harness.inputs.dataset_sources`) and
``--namespace``/``--prebuilt-env`` (SWE-bench's prebuilt images: :mod:`harness.engine.prebuilt`);
``harness run`` also ``--swebench-output``/``--report-dir`` (SWE-bench's layout:
:mod:`harness.swebench.layout`). swebench's own spellings reach these through
:mod:`harness.swebench.flags`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError

INSTANCES_HELP = ("instance set: JSON, JSONL, YAML, parquet, or a saved dataset directory (see --dataset); "
                  "default: the demo set")
SWEBENCH_EPILOG = ("swebench's run_evaluation names work too: --dataset_name, --split, --predictions_path, "
                   "--max_workers, --run_id, --instance_ids, --timeout, --cache_level, --report_dir (and -d -s -i "
                   "-p -t -id); names whose meaning differs here are refused with the reason.")


def add_dataset_options(parser: argparse.ArgumentParser) -> None:
    """Where instances and environments come from, SWE-bench's way (run, validate)."""
    parser.add_argument("--dataset", metavar="NAME|PATH",
                        help="instances from a dataset: a Hugging Face Hub name (e.g. SWE-bench/SWE-bench_Lite; "
                             "needs harness[hub]), a parquet file, or a directory (SPLIT.parquet, data/SPLIT-*.parquet "
                             "shards, or saved with save_to_disk); also JSON, JSONL or YAML like --instances")
    parser.add_argument("--split", default="test", help="the dataset's split (default test; a single file is read "
                                                        "whole)")
    parser.add_argument("--namespace", metavar="NS",
                        help="take each instance's environment from SWE-bench's prebuilt image "
                             "NS/sweb.eval.x86_64.<id>:latest, pulled by digest, instead of building it: NS is "
                             "swebench (Docker Hub), HOST:PORT/NS for another registry, or none for images "
                             "SWE-bench built on this engine")
    parser.add_argument("--prebuilt-env", metavar="DIR",
                        help="the environment's directory in the prebuilt images (default "
                             "/opt/miniconda3/envs/testbed)")


def add_swebench_output_options(parser: argparse.ArgumentParser) -> None:
    """SWE-bench's output layout beside ours (run)."""
    parser.add_argument("--swebench-output", action="store_true",
                        help="also write SWE-bench's layout: <model>.<run_id>.json and "
                             "logs/run_evaluation/<run_id>/<model>/<id>/ (report.json, test_output.txt, patch.diff) "
                             "in the run directory")
    parser.add_argument("--report-dir", type=Path, metavar="DIR",
                        help="where <model>.<run_id>.json goes (implies --swebench-output; default: the run "
                             "directory)")


def resolve_instance_source(args: argparse.Namespace) -> tuple[Path, dict | None]:
    """(the instance file to load, the dataset's provenance when it was read from one).

    JSON, JSONL and YAML files are loaded as they are; parquet files, dataset directories
    and hub names are read once into a JSONL file in the cache (harness.inputs.dataset_sources)."""
    from harness.inputs import demo
    from harness.inputs.dataset_sources import TEXT_SUFFIXES, materialise
    dataset = getattr(args, "dataset", None)
    if dataset is not None and args.instances is not None:
        raise InputError("give the instances once: --instances or --dataset", field="--dataset")
    source = dataset if dataset is not None else args.instances
    if source is None:
        return (demo.DEMO_DIR / "instances.jsonl").resolve(), None
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() in TEXT_SUFFIXES:
        return path.resolve(), None
    if dataset is None and not path.exists():
        raise InputError("no such file or directory", source=str(source), field="--instances")
    materialised = materialise(str(source), getattr(args, "split", "test"), cache_dir_of(args))
    return materialised.path, materialised.describe()


def cache_dir_of(args: argparse.Namespace) -> Path:
    from harness.paths import cache_root
    return args.cache_dir.expanduser().resolve() if getattr(args, "cache_dir", None) else cache_root()


def prebuilt_source(args: argparse.Namespace):
    """The prebuilt-image source ``--namespace`` names, or None (build environments here)."""
    namespace = getattr(args, "namespace", None)
    prefix = getattr(args, "prebuilt_env", None)
    if namespace is None:
        if prefix is not None:
            raise InputError("only means something with --namespace", field="--prebuilt-env")
        return None
    from harness.engine.prebuilt import DEFAULT_ENV_PREFIX, PrebuiltSource
    return PrebuiltSource(namespace, prefix or DEFAULT_ENV_PREFIX)


@dataclass(frozen=True)
class LayoutRequest:
    """What SWE-bench's layout is written from, checked before anything runs."""

    model: str
    instance_ids: tuple[str, ...]
    predictions: dict
    report_dir: Path | None


def swebench_layout_request(args: argparse.Namespace, instances_path: Path, predictions_arg: str,
                            ) -> LayoutRequest | None:
    """None without --swebench-output/--report-dir; else what the layout needs, read (and
    the model's directory name checked: refused before the run, not after it)."""
    if not (getattr(args, "swebench_output", False) or getattr(args, "report_dir", None)):
        return None
    from harness.inputs.instances import load_instances
    from harness.inputs.predictions import resolve_predictions
    from harness.swebench.layout import model_dirname
    loaded = load_instances(instances_path, args.instance_ids)
    predictions = resolve_predictions(predictions_arg, loaded.instances)
    model_dirname(predictions.model_name_or_path)
    patches: dict = {}
    for p in sorted(predictions.predictions, key=lambda p: p.attempt or 0):
        patches.setdefault(p.instance_id, p.model_patch)
    ids = [i.instance_id for i in loaded.instances]
    ids += [e.record for e in loaded.errors if e.record and not e.record.startswith("#") and e.record not in ids]
    report_dir = args.report_dir.expanduser().resolve() if getattr(args, "report_dir", None) else None
    return LayoutRequest(predictions.model_name_or_path, tuple(ids), patches, report_dir)


def write_swebench_layout(request: LayoutRequest, run_id: str, run_dir: Path) -> None:
    from harness.swebench.layout import write_layout
    written = write_layout(run_dir, run_id, request.model, request.instance_ids, request.predictions,
                           request.report_dir)
    print(f"SWE-bench layout: {written.run_report} and {written.logs} ({written.instances} instances)")
