"""Disk of the harness's images on this engine: per level, per instance, and what a budget would remove.

Reads the engine (``harness.imagecache.inventory``, the same accounting as ``harness
images list|prune``: each layer once, only layers no image outside the harness holds) and
removes nothing: the budgets are dry-run plans (``harness.imagecache.selection.plan``) with
the leases and containers of the moment.

* **per --cache-level**: the bytes the images kept at each level take (a level keeps every
  level below it), i.e. what a run leaves on disk with ``--cache-level L``;
* **per repository**: the instance images' own bytes (what their removal alone frees),
  their count and bytes per instance, and the environments they stand on;
* **budgets**: for each, how many images of each kind would go, the bytes freed, and
  whether the budget is met.

    .venv/bin/python benchmarks/disk.py [--budget 5G 3G] [--only-label KEY=VALUE] [--out FILE]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

from harness.imagecache.commands import current_formats, size_argument  # noqa: E402
from harness.imagecache.selection import (KIND_RANK, LEVEL_RANK, Criteria, harness_bytes, plan,  # noqa: E402
                                          unique_bytes)


def gb(value: float) -> str:
    return f"{value / 1e9:.2f}"


def mb(value: float) -> str:
    return f"{value / 1e6:.1f}"


def why_it_stays(reason: str) -> str:
    """The protection a reason names (harness.imagecache.selection.protection and the needs rule)."""
    for prefix, name in (("used by container", "in use by a container"), ("leased by", "leased"),
                         ("needed by the kept set", "kept set"), ("needed by", "needed by one of those"),
                         ("also tagged", "tagged by someone else"), ("untagged and created", "young untagged"),
                         ("outside the confinement", "outside")):
        if reason.startswith(prefix):
            return name
    return reason


def repository_of(tag: str) -> str:
    name = tag.split(":", 1)[1]
    return re.sub(r"-[0-9a-f]{16}$", "", name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", nargs="*", type=size_argument, default=None,
                        help="budgets to plan for (default: 75 %%, 50 %% and 25 %% of the harness's bytes)")
    parser.add_argument("--only-label", help="only images carrying this label (KEY or KEY=VALUE)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    machine = C.machine_info()
    import docker
    from harness.imagecache.commands import _leases
    from harness.imagecache.inventory import read_engine
    from harness.bookkeeping.usage import UseIndex, state_dir_for
    client = docker.from_env(timeout=600)
    started = time.monotonic()
    state = state_dir_for(client)
    view = read_engine(client, UseIndex(state), only_label=args.only_label, engine_total=True)
    read_seconds = time.monotonic() - started
    images, accounting = view.images, view.accounting
    scoped = [i for i in images if i.in_scope]
    sizes = accounting.sizes
    total = harness_bytes(images, accounting)
    summed = sum(i.size(sizes) for i in scoped)
    distinct = sum(sizes.get(l, 0) for l in {l for i in scoped for l in i.layers})

    out = [C.header("Disk of the harness's images on this engine", machine)]
    kinds = Counter(i.kind for i in scoped)
    out.append(f"{len(scoped)} harness images ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}), read in "
               f"{read_seconds:.1f} s. Summed image by image {gb(summed)} GB; on disk, each shared layer once, "
               f"{gb(distinct)} GB; held by no image outside the harness (what removing them all frees) "
               f"**{gb(total)} GB**; the engine's own total for every image (`docker system df`) "
               f"{gb(view.engine_bytes or 0)} GB. Layer sizes matched one to one: "
               f"{len(scoped) - view.inexact_sizes} of {len(scoped)}.\n")

    rows, level_bytes = [], {}
    for level, rank in sorted(LEVEL_RANK.items(), key=lambda kv: kv[1]):
        kept = [i for i in images if not i.in_scope or KIND_RANK.get(i.kind, 3) <= rank]
        level_bytes[level] = harness_bytes(kept, accounting)
        count = sum(1 for i in kept if i.in_scope)
        rows.append([f"`--cache-level {level}`", count, gb(level_bytes[level]),
                     f"{100 * level_bytes[level] / total:.0f} %" if total else "–"])
    leftovers = total - harness_bytes([i for i in images if i.tags or not i.in_scope], accounting)
    out.append("### What each `--cache-level` keeps\n")
    out.append(f"Untagged leftovers of failed builds (counted at `instance`; `--stale` takes them once an hour "
               f"old): {sum(1 for i in scoped if not i.tags)} images holding {gb(leftovers)} GB alone.\n")
    out.append(C.markdown_table(["level", "images kept", "GB (each layer once)", "of all"], rows) + "\n")

    by_repo: dict[str, list] = defaultdict(list)
    for image in scoped:
        if image.kind in ("inst", "sweb") and image.tags:
            by_repo[repository_of(image.tags[0])].append(image)
    unique = unique_bytes(images, accounting)
    repo_rows, repo_data = [], {}
    for repo, members in sorted(by_repo.items(), key=lambda kv: -len(kv[1])):
        ids = {i.image_id for i in members}
        own = total - harness_bytes([i for i in images if i.image_id not in ids], accounting)
        envs = {n for i in members for n in i.needs if n not in ids}
        sizes_each = [i.size(sizes) for i in members]
        repo_rows.append([repo, len(members), mb(own), mb(own / len(members)),
                          mb(statistics.median(unique[i.image_id] for i in members)),
                          mb(statistics.median(sizes_each)), len({n for n in envs
                                                                  if any(j.image_id == n and j.kind == "env"
                                                                         for j in images)})])
        repo_data[repo] = {"instances": len(members), "own_bytes": own, "per_instance": own / len(members),
                           "median_unique": statistics.median(unique[i.image_id] for i in members),
                           "median_image_size": statistics.median(sizes_each)}
    out.append("### Instance images per repository\n")
    out.append("*own*: the bytes only the repository's instance images hold (their removal frees them), "
               "*per instance*: own / count; *median unique*: what one instance image alone holds; "
               "*median image*: an instance image with all its layers (environment and base included).\n")
    out.append(C.markdown_table(["repository", "instance images", "own MB", "MB per instance", "median unique MB",
                                 "median image MB", "environments"], repo_rows) + "\n")

    image_format, layout = current_formats()
    now = time.time()
    leases = _leases(state)
    budgets = args.budget if args.budget else [int(total * f) for f in (0.75, 0.5, 0.25)]
    budget_rows, budget_data = [], []
    stale = plan(images, accounting, Criteria(now=now, image_format=image_format, instance_layout=layout, stale=True),
                 leases)
    budget_rows.append(["`--stale`", len(stale.removals), ", ".join(f"{k} {n}" for k, n in sorted(
        Counter(v.image.kind for v in stale.removals).items())) or "–", gb(stale.freed), gb(stale.total_after), "–", "–"])
    for budget in budgets:
        decided = plan(images, accounting, Criteria(now=now, image_format=image_format, instance_layout=layout,
                                                   budget=budget), leases)
        kinds_gone = Counter(v.image.kind for v in decided.removals)
        protected = Counter(why_it_stays(v.reason) for v in decided.verdicts
                            if not v.goes and v.image.in_scope and not v.reason.startswith("within the budget"))
        budget_rows.append([f"`--budget {gb(budget)}G`", len(decided.removals),
                            ", ".join(f"{k} {n}" for k, n in sorted(kinds_gone.items())) or "–", gb(decided.freed),
                            gb(decided.total_after), "met" if decided.budget_met else "**not met**",
                            ", ".join(f"{k} {n}" for k, n in protected.most_common()) or "–"])
        budget_data.append({"budget": budget, "removals": len(decided.removals), "by_kind": dict(kinds_gone),
                            "freed": decided.freed, "after": decided.total_after, "met": decided.budget_met,
                            "stays_because": dict(protected)})
    out.append("### What a prune would remove (dry run, leases and containers of the moment)\n")
    out.append(C.markdown_table(["prune", "images", "by kind", "GB freed", "GB after", "budget", "protected"],
                                budget_rows) + "\n")
    print("\n".join(out))
    path = C.write_results("disk", {"machine": machine, "command": C.command_line(), "read_seconds": read_seconds,
                                    "images": len(scoped), "kinds": dict(kinds), "summed": summed,
                                    "distinct": distinct, "harness_bytes": total, "engine_bytes": view.engine_bytes,
                                    "levels": level_bytes, "untagged_bytes": leftovers, "repositories": repo_data, "budgets": budget_data,
                                    "stale": {"removals": len(stale.removals), "freed": stale.freed},
                                    "live_leases": len(set(leases.values()))}, args.out)
    print(f"raw data: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
