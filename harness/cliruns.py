"""The options of :func:`harness.run.session.evaluate` a command line gives: one mapping
for every command that runs evaluations (``run``, ``validate``, ``audit`` in cli.py,
``instances derive`` in instance_commands.py)."""

from __future__ import annotations

import argparse
from typing import Any

from harness.swebench.options import prebuilt_source


def evaluate_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of ``evaluate`` that the shared options (cli.py's ``common`` parent)
    set: where repositories and specs come from, the executor, the limits, the cache and
    image options, how much is printed. The commands add what they choose themselves
    (instances, predictions, run id, control, seed, progress hooks)."""
    from harness.run.session import Repositories, RunLimits
    return dict(specs=args.specs,
                repositories=Repositories(args.repos_dir, dict(args.repo), clone=not args.no_clone),
                executor=args.executor, max_workers=args.max_workers, ray_address=args.ray_address,
                limits=RunLimits(timeout=args.timeout, task_timeout=args.task_timeout, cpus=args.cpus),
                cache_dir=args.cache_dir, force=args.force, registry=args.registry, prebuilt=prebuilt_source(args),
                cache_level=args.cache_level, disk_budget=args.disk_budget, quiet=args.quiet, verbose=args.verbose)
