"""``harness images list|prune``, and the pruning a run does (``--cache-level``, ``--disk-budget``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from harness.errors import InputError

# The CLI builds its parser from this module on every invocation: what only a command
# needs (humanfriendly, the selection) is imported when that command runs.
#: ``--cache-level`` values, lowest first (harness.imagecache.selection.LEVEL_RANK)
CACHE_LEVELS = ("none", "base", "env", "instance")


# ---------------------------------------------------------------------------- arguments

def size_argument(text: str) -> int:
    """``200G``, ``1.5T``, ``500MB`` (powers of 1000, as the engine reports) or ``200GiB``."""
    from humanfriendly import InvalidSize, parse_size
    try:
        return int(parse_size(text))
    except InvalidSize:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 200G, 1.5T, 500MB, 200GiB)") from None


def age_argument(text: str) -> float:
    """``7d``, ``12h``, ``90m``, ``2w``."""
    from humanfriendly import InvalidTimespan, parse_timespan
    try:
        return float(parse_timespan(text))
    except InvalidTimespan:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, 90m, 2w)") from None


def read_set(path: Path, option: str) -> frozenset[str]:
    """The instance ids of a set file (JSON, JSONL or YAML records with ``instance_id``)."""
    from harness.inputs.instances import read_records
    ids = set()
    for position, record in enumerate(read_records(path), 1):
        if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str):
            raise InputError(f"record {position} has no instance_id", source=str(path), field=option)
        ids.add(record["instance_id"])
    return frozenset(ids)


def add_images_parser(sub) -> None:
    images = sub.add_parser("images", help="list or prune the harness's images")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    confine = argparse.ArgumentParser(add_help=False)
    confine.add_argument("--only-label", metavar="KEY[=VALUE]",
                         help="consider only images carrying this label (the rest is described, never removed)")
    confine.add_argument("--json", action="store_true", help="print the result as JSON")
    listing = images_sub.add_parser("list", parents=[confine],
                                    help="the harness's images: sizes, shared bytes, last use, instances")
    listing.add_argument("--set", type=Path, metavar="X.jsonl", help="mark the images this set's instances use")
    listing.set_defaults(func=cmd_images_list)
    prune = images_sub.add_parser(
        "prune", parents=[confine],
        help="remove harness images by age, code version, set, level or to a size budget",
        description="Remove harness images. Criteria combine (an image goes when it matches all given); with "
                    "--budget, matching images go least recently used first until the harness's images fit. "
                    "Never removed: images a container uses, images a live harness process leases, images an "
                    "image that stays needs. With no criterion: --level env (instance images go). Sandboxes a "
                    "killed run left stopped for over 10 minutes are removed first (nothing reuses a sandbox; "
                    "each pins its image).")
    prune.add_argument("--older-than", type=age_argument, metavar="AGE",
                       help="not used for AGE (e.g. 7d, 12h): the last use the harness recorded, else creation")
    prune.add_argument("--stale", action="store_true",
                       help="images this harness would never reuse (another image format or layout, built on an "
                            "image that is gone, untagged leftovers of failed builds)")
    prune.add_argument("--level", choices=CACHE_LEVELS, help="images above this cache level")
    prune.add_argument("--set", type=Path, metavar="X.jsonl", help="only images this set's instances use")
    prune.add_argument("--keep-set", type=Path, metavar="X.jsonl", help="never images this set's instances need")
    prune.add_argument("--budget", type=size_argument, metavar="SIZE",
                       help="remove least recently used first until the harness's images take at most SIZE "
                            "(e.g. 200G), shared layers counted once")
    prune.add_argument("--dry-run", action="store_true", help="say what would go and what it frees; remove nothing")
    prune.set_defaults(func=cmd_images_prune)


# ---------------------------------------------------------------------------- reading

def current_formats() -> tuple[int, int, int]:
    """The image format, instance layout and environment layout this harness builds."""
    from harness.engine.environment_layer import LAYOUT as ENV_LAYOUT
    from harness.engine.instance_layer import LAYOUT
    from harness.engine.layers import IMAGE_FORMAT
    return IMAGE_FORMAT, LAYOUT, ENV_LAYOUT


def _view(client, only_label: str | None, engine_total: bool = False):
    from harness.imagecache.inventory import read_engine
    from harness.imagecache.selection import with_instances
    from harness.bookkeeping.usage import UseIndex, state_dir_for
    state = state_dir_for(client)
    index = UseIndex(state)
    view = read_engine(client, index, only_label=only_label, engine_total=engine_total)
    return state, view, with_instances(view.images, index.instances_by_tag())


def _leases(state: Path) -> dict[str, str]:
    from harness.bookkeeping.leases import gate, live_leases
    with gate(state / "leases", exclusive=False):
        return {tag: record.describe() for tag, record in live_leases(state / "leases").items()}


def _when(now: float, image) -> str:
    from humanfriendly import format_timespan
    if image.last_used is None:
        return f"created {format_timespan(max(0, now - image.created), max_units=1)} ago"
    return f"used {format_timespan(max(0, now - image.last_used), max_units=1)} ago"


# ---------------------------------------------------------------------------- list

def cmd_images_list(args: argparse.Namespace) -> int:
    from harness.engine.client import connect
    from humanfriendly import format_size

    from harness.imagecache.selection import KIND_RANK, harness_bytes, set_images, unique_bytes
    client = connect()
    state, view, images = _view(client, args.only_label, engine_total=True)
    in_set = read_set(args.set, "--set") if args.set else None
    members = set_images(images, in_set) if in_set is not None else {}
    unique = unique_bytes(images, view.accounting)
    sizes = view.accounting.sizes
    now = time.time()
    scoped = [i for i in images if i.in_scope]
    rows = sorted(scoped, key=lambda i: (KIND_RANK.get(i.kind, 3), i.name))
    summed = sum(i.size(sizes) for i in scoped)
    distinct = sum(sizes.get(l, 0) for l in {l for i in scoped for l in i.layers})
    own = harness_bytes(images, view.accounting)
    leases = _leases(state)
    if args.json:
        print(json.dumps({"images": [{"tag": i.name, "id": i.image_id, "kind": i.kind, "size": i.size(sizes),
                                      "unique": unique[i.image_id], "last_used": i.last_used, "created": i.created,
                                      "instances": sorted(i.instances), "in_set": i.image_id in members,
                                      "containers": list(i.containers), "leased": [t for t in i.tags if t in leases]}
                                     for i in rows],
                          "summed": summed, "distinct": distinct, "harness_only": own, "engine": view.engine_bytes,
                          "inexact_sizes": view.inexact_sizes}, indent=1))
        return 0
    for image in rows:
        marks = "".join(["S" if image.image_id in members else "", "L" if set(image.tags) & set(leases) else "",
                         "C" if image.containers else ""])
        print(f"{image.kind:8} {format_size(image.size(sizes)):>10}  unique {format_size(unique[image.image_id]):>10}"
              f"  {_when(now, image):24} {len(image.instances):4} inst  {marks:3} {image.name}")
    kinds = Counter(i.kind if i.tags else "untagged" for i in rows)
    print(f"{len(rows)} images ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})")
    print(f"summed image by image: {format_size(summed)}; on disk, each shared layer once: {format_size(distinct)} "
          f"({format_size(summed - distinct)} shared); held by no other image (what removing all frees): "
          f"{format_size(own)}")
    if view.engine_bytes is not None:
        print(f"the engine's total, every image (docker system df): {format_size(view.engine_bytes)}")
    if in_set is not None:
        print(f"the set {args.set}: {len(in_set)} instances, {len(members)} images (S)")
    print(f"marks: S in the set, L leased by a live harness process ({len(set(leases.values()))} live), "
          "C used by a container")
    if view.inexact_sizes:
        print(f"note: {view.inexact_sizes} images' layer sizes were assigned in order, not one to one")
    return 0


# ---------------------------------------------------------------------------- prune

def criteria_from_args(args: argparse.Namespace, now: float):
    from harness.imagecache.selection import Criteria
    image_format, layout, env_layout = current_formats()
    level = args.level
    if not (args.older_than is not None or args.stale or level or args.set or args.budget is not None):
        level = "env"  # the historical default: instance images go
    return Criteria(now=now, image_format=image_format, instance_layout=layout, environment_layout=env_layout, older_than=args.older_than,
                    stale=args.stale, level=level, in_set=read_set(args.set, "--set") if args.set else None,
                    keep_set=read_set(args.keep_set, "--keep-set") if args.keep_set else None, budget=args.budget)


def cmd_images_prune(args: argparse.Namespace) -> int:
    from harness.engine.client import connect
    from harness.imagecache.selection import plan
    from harness.imagecache.sandboxes import left_sandboxes, remove_sandboxes
    client = connect()
    now = time.time()
    criteria = criteria_from_args(args, now)
    # sandboxes a killed run left pin their images: they go first (never in a dry run)
    left = left_sandboxes(client, now, only_label=args.only_label)
    refused = dict((s.container_id, why) for s, why in ([] if args.dry_run else remove_sandboxes(client, left)))
    state, view, images = _view(client, args.only_label)
    decided = plan(images, view.accounting, criteria, _leases(state))
    outcomes = []
    if not args.dry_run:
        from harness.imagecache.prune import carry_out
        outcomes = carry_out(client, decided, state, only_label=args.only_label)
    sandboxes = [{"name": s.name, "run_id": s.run_id, "state": s.state, "stopped_at": s.stopped_at,
                  "removed": None if args.dry_run else s.container_id not in refused,
                  "note": refused.get(s.container_id)} for s in left]
    if args.json:
        print(json.dumps({**plan_json(decided, outcomes, args.dry_run), "sandboxes": sandboxes}, indent=1))
    else:
        print_sandboxes(sandboxes, args.dry_run, now)
        print_plan(decided, outcomes, args.dry_run, now)
    return 0


def print_sandboxes(sandboxes: list[dict], dry_run: bool, now: float, out=None) -> None:
    """One line per sandbox a run left behind (harness/imagecache/sandboxes.py)."""
    from humanfriendly import format_timespan
    out = out or sys.stdout
    for s in sandboxes:
        word = "would go" if dry_run else ("removed" if s["removed"] else "skipped")
        note = f" [{s['note']}]" if s["note"] else ""
        print(f"{word:8} sandbox  {s['name']}: left by run {s['run_id']}, {s['state']} "
              f"{format_timespan(max(0, now - s['stopped_at']), max_units=1)} ago{note}", file=out)
    if sandboxes:
        verb = "would remove" if dry_run else "removed"
        done = len(sandboxes) if dry_run else sum(bool(s["removed"]) for s in sandboxes)
        print(f"sandboxes left by ended runs: {verb} {done} of {len(sandboxes)}"
              + (" (their images are planned as still in use until then)" if dry_run else ""), file=out)


def plan_json(decided, outcomes, dry_run: bool) -> dict:
    done = {o.image_id: o for o in outcomes}
    return {"dry_run": dry_run, "total_before": decided.total_before, "freed": decided.freed,
            "total_after": decided.total_after, "budget": decided.budget, "budget_met": decided.budget_met,
            "images": [{"tag": v.image.name, "id": v.image.image_id, "kind": v.image.kind, "goes": v.goes,
                        "reason": v.reason, "size": v.size, "freed": v.freed, "last_used": v.image.last_used,
                        "created": v.image.created, "in_scope": v.image.in_scope,
                        "removed": done[v.image.image_id].removed if v.image.image_id in done else None,
                        "note": done[v.image.image_id].note if v.image.image_id in done else None}
                       for v in decided.verdicts]}


def print_plan(decided, outcomes, dry_run: bool, now: float, out=None) -> None:
    from humanfriendly import format_size
    out = out or sys.stdout
    done = {o.image_id: o for o in outcomes}
    for verdict in decided.verdicts:
        if not verdict.image.in_scope:
            continue
        outcome = done.get(verdict.image.image_id)
        if verdict.goes:
            word = "would go" if dry_run else ("removed" if outcome and outcome.removed else "skipped")
        else:
            word = "stays"
        note = f" [{outcome.note}]" if outcome and outcome.note else ""
        frees = f"frees {format_size(verdict.freed):>9}" if verdict.goes else " " * 15
        print(f"{word:8} {verdict.image.kind:8} {format_size(verdict.size):>10} {frees}  "
              f"{_when(now, verdict.image):22} {verdict.image.name}: {verdict.reason}{note}", file=out)
    removals = decided.removals
    skipped = [o for o in outcomes if not o.removed]
    verb = "would remove" if dry_run else "removed"
    count = len(removals) - len(skipped)
    print(f"harness images: {format_size(decided.total_before)} (each layer once, held by nothing else); "
          f"{verb} {count} of {len(removals)} selected, freeing {format_size(decided.freed)}"
          f"{' (planned)' if not dry_run else ''} -> {format_size(decided.total_after)}", file=out)
    if decided.budget is not None:
        print(f"budget {format_size(decided.budget)}: {'met' if decided.budget_met else 'NOT met'}"
              + ("" if decided.budget_met else " (what stays is protected: see each image's reason)"), file=out)
    if skipped:
        print(f"skipped {len(skipped)}: " + "; ".join(f"{o.name}: {o.note}" for o in skipped[:10]), file=out)


# ---------------------------------------------------------------------------- a run's pruning

def prune_for_run(client, *, level: str | None = None, budget: int | None = None,
                  instance_ids: frozenset[str] = frozenset(), only_label: str | None = None, log=None):
    """``--cache-level`` after a run (the images of this run's instances above the level)
    or ``--disk-budget`` before one (least recently used first, never what the run's
    instances need). Other live processes' leases protect their images either way.
    Returns the plan and what happened to each of its removals."""
    from harness.imagecache.selection import Criteria, plan
    now = time.time()
    image_format, layout, env_layout = current_formats()
    if level is not None:
        criteria = Criteria(now=now, image_format=image_format, instance_layout=layout, environment_layout=env_layout, level=level,
                            in_set=instance_ids)
    else:
        criteria = Criteria(now=now, image_format=image_format, instance_layout=layout, environment_layout=env_layout, budget=budget,
                            keep_set=instance_ids)
    state, view, images = _view(client, only_label)
    decided = plan(images, view.accounting, criteria, _leases(state))
    from harness.imagecache.prune import carry_out
    outcomes = carry_out(client, decided, state, only_label=only_label)
    if log is not None:
        log.info("images.pruned", level=level, budget=budget, removed=sum(o.removed for o in outcomes),
                 skipped=[f"{o.name}: {o.note}" for o in outcomes if not o.removed], freed=decided.freed,
                 harness_bytes=decided.total_after)
    return decided, outcomes
