"""Disk of a graded set: the images its runs used, counted once per layer, and the cache.

Reads every ``report.json`` under the given run directories for the images an instance
was graded in (``image.id`` and ``image.env_id``), walks each image's layers (the engine's
``RootFS.Layers`` paired with the non-empty entries of its history, which carry the layer
sizes) and adds up

* per instance image: its full size and the bytes of the layers above its environment image
  (what one more instance of a built version costs);
* per environment image: its size and the bytes above its base chain;
* the whole set: every distinct layer once (the disk the engine holds for it), against the
  sum of full image sizes (what a harness building one self-contained image per instance
  would hold);
* the cache directory (wheelhouses, tree exports, compiler cache, build logs), by subdirectory.

Only images the reports name are measured: other images on a shared engine are not counted.

    .venv/bin/python benchmarks/set_disk.py runs/v-sympy-r1 runs/v-pytest-r1 ... [--cache-dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import docker
from docker.errors import NotFound

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

MB = 1_000_000


def images_of_runs(run_dirs: list[Path]) -> dict[str, dict]:
    """image id -> {kind, repo, tag, env_id} for every image a report names."""
    found: dict[str, dict] = {}
    for run in run_dirs:
        for report in sorted(run.rglob("report.json")):
            try:
                data = json.loads(report.read_text())
            except (OSError, ValueError):
                continue
            image = data.get("image") or {}
            if image.get("id"):
                found[image["id"]] = {"kind": "instance", "repo": data.get("repo", "?"), "tag": image.get("tag"),
                                      "env_id": image.get("env_id"), "instance": data.get("instance_id")}
            if image.get("env_id"):
                found.setdefault(image["env_id"], {"kind": "env", "repo": data.get("repo", "?"),
                                                  "tag": image.get("env_tag"), "env_id": None})
    return found


def layers(client: docker.DockerClient, image_id: str) -> list[tuple[str, int]] | None:
    """(diff id, bytes) of an image's layers, bottom first; None when its history does not
    pair with its layers one to one (then it is not counted layer by layer)."""
    inspect = client.api.inspect_image(image_id)
    diff_ids = inspect["RootFS"]["Layers"]
    history = list(reversed(client.api.history(image_id)))   # oldest first
    sized = [int(h.get("Size") or 0) for h in history if _is_layer(h)]
    return list(zip(diff_ids, sized)) if len(sized) == len(diff_ids) else None


def _is_layer(entry: dict) -> bool:
    """A history entry that made a layer: RUN steps and COPY/ADD, not ENV, LABEL, WORKDIR, ..."""
    created = entry.get("CreatedBy") or ""
    if "#(nop)" in created:
        return bool(re.search(r"#\(nop\)\s+(COPY|ADD)\b", created))
    return True


def measure(run_dirs: list[Path], cache_dir: Path) -> dict:
    client = docker.from_env(timeout=600)
    named = images_of_runs(run_dirs)
    chain: dict[str, list[tuple[str, int]]] = {}
    missing, unpaired = [], []
    for image_id in named:
        try:
            found = layers(client, image_id)
        except NotFound:
            missing.append(named[image_id].get("tag") or image_id)
            continue
        if found is None:
            unpaired.append(named[image_id].get("tag") or image_id)
            found = [(image_id, int(client.api.inspect_image(image_id).get("Size") or 0))]
        chain[image_id] = found
    per_repo: dict[str, dict] = defaultdict(lambda: {"instances": [], "envs": {}})
    for image_id, info in named.items():
        if image_id not in chain:
            continue
        full = sum(size for _, size in chain[image_id])
        if info["kind"] == "instance":
            below = {d for d, _ in chain.get(info["env_id"] or "", [])}
            above = sum(size for d, size in chain[image_id] if d not in below)
            per_repo[info["repo"]]["instances"].append({"tag": info["tag"], "full": full, "above_env": above})
        else:
            per_repo[info["repo"]]["envs"][info["tag"]] = full
    distinct: dict[str, int] = {}
    for image_layers in chain.values():
        distinct.update(image_layers)
    instance_full = sum(full for repo in per_repo.values() for full in (i["full"] for i in repo["instances"]))
    cache = {}
    for sub in sorted(p for p in cache_dir.iterdir() if p.is_dir()) if cache_dir.is_dir() else []:
        out = subprocess.run(["du", "-sb", str(sub)], capture_output=True, text=True).stdout.split()
        cache[sub.name] = int(out[0]) if out else 0
    return {"machine": C.machine_info(), "runs": [str(r) for r in run_dirs], "missing_images": missing,
            "unpaired_images": unpaired,
            "repos": {repo: {"instance_images": len(v["instances"]),
                             "instance_full_mb_median": _median([i["full"] for i in v["instances"]]),
                             "above_env_mb_median": _median([i["above_env"] for i in v["instances"]]),
                             "above_env_mb_max": max((i["above_env"] for i in v["instances"]), default=0) / MB,
                             "above_env_mb_sum": sum(i["above_env"] for i in v["instances"]) / MB,
                             "env_images": len(v["envs"]),
                             "env_mb": sorted(round(s / MB) for s in v["envs"].values())}
                      for repo, v in sorted(per_repo.items())},
            "distinct_layers": len(distinct), "distinct_mb": sum(distinct.values()) / MB,
            "instance_images": sum(len(v["instances"]) for v in per_repo.values()),
            "sum_of_full_instance_images_mb": instance_full / MB,
            "cache_mb": {k: v / MB for k, v in cache.items()}, "cache_total_mb": sum(cache.values()) / MB}


def _median(values: list[int]) -> float:
    return statistics.median(values) / MB if values else 0.0


def markdown(result: dict) -> str:
    lines = ["| repository | instance images | env images (MB each) | instance image MB (median) | "
             "above its env MB: median / max / sum |", "|---|---:|---|---:|---:|"]
    for repo, row in result["repos"].items():
        lines.append(f"| {repo} | {row['instance_images']} | {row['env_images']} ({', '.join(map(str, row['env_mb']))})"
                     f" | {row['instance_full_mb_median']:.0f} | {row['above_env_mb_median']:.1f} / "
                     f"{row['above_env_mb_max']:.1f} / {row['above_env_mb_sum']:.0f} |")
    lines.append("")
    lines.append(f"Distinct layers of all {result['instance_images']} instance images and their environments: "
                 f"{result['distinct_layers']} layers, **{result['distinct_mb'] / 1000:.1f} GB**; the sum of the "
                 f"instance images' full sizes (one self-contained image each) would be "
                 f"{result['sum_of_full_instance_images_mb'] / 1000:.1f} GB.")
    lines.append("")
    lines.append("Cache: " + ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(result["cache_mb"].items()))
                 + f"; total {result['cache_total_mb'] / 1000:.1f} GB.")
    if result["missing_images"]:
        lines.append(f"\nImages the reports name that are gone: {len(result['missing_images'])}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "harness")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    result = measure(args.runs, args.cache_dir)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    sys.stdout.write(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
