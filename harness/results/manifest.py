"""The pinned manifest of a run (``manifest.json``) and checking a new run against one.

It records what decided the results: harness version and commit, grading configuration
(timeouts, limits), and per task the checksums of the instance record, the patch and the
spec, the image id and the content hash of its inputs, the environment image and its
wheelhouse lock hash, and the base image's package-list hash. ``harness run --manifest
OLD`` re-runs under the same pins and refuses, naming each difference, when an input no
longer matches.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Iterable

from harness._version import __version__
from harness.atomic import atomic_open
from harness.errors import InputError

MANIFEST_VERSION = 1


def harness_commit() -> str | None:
    """The commit the harness was built from: its checkout's HEAD, or the one recorded in
    the wheel at build time (see harness.buildinfo); None when unknown."""
    from harness.buildinfo import build_info
    return build_info().commit


def task_pins(key: dict[str, str], prepared) -> dict[str, Any]:
    labels = prepared.image.labels or {}
    env_inputs = json.loads((prepared.env_image.labels or {}).get("org.harness.inputs", "{}") or "{}")
    return {**key, "image_id": prepared.image.image_id, "image_tag": prepared.image.tag,
            "env_image_id": prepared.env_image.image_id, "wheelhouse_lock_sha256": env_inputs.get("lock"),
            "base_packages_sha256": labels.get("org.harness.packages-sha256"), "tree_sha": prepared.tree_sha}


def build_manifest(run_id: str, config: dict[str, Any], grading_key: str, pins: dict[str, dict],
                   inputs: dict[str, Any]) -> dict[str, Any]:
    return {"manifest_version": MANIFEST_VERSION, "run_id": run_id,
            "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "harness_version": __version__, "harness_commit": harness_commit(),
            "grading": config, "grading_key": grading_key, "inputs": inputs, "tasks": pins}


def write_manifest(path: Path, run_id: str, config: dict[str, Any], grading_key: str,
                   pins: Iterable[tuple[str, dict]], inputs: dict[str, Any]) -> int:
    """Write ``manifest.json`` atomically, streaming the per-task pins (memory does not
    grow with the number of tasks). Same document as :func:`build_manifest`. Returns the
    number of tasks written."""
    head = build_manifest(run_id, config, grading_key, {}, inputs)
    del head["tasks"]
    count = 0
    with atomic_open(path, "w", encoding="utf-8") as out:
        text = json.dumps(head, indent=2, default=str)
        out.write(text[:-2] + ',\n  "tasks": {')
        for key, value in pins:
            out.write(("\n    " if count == 0 else ",\n    ") + json.dumps(key) + ": "
                      + json.dumps(value, sort_keys=True, default=str))
            count += 1
        out.write("\n  }\n}\n")
    return count


def load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read manifest: {exc}", source=str(path), field="--manifest") from None
    for key in ("manifest_version", "grading_key", "tasks"):
        if key not in data:
            raise InputError("not a harness manifest", source=str(path), field=key)
    return data


def differences(pinned: dict[str, Any], grading_key: str, pins: dict[str, dict]) -> list[str]:
    """Every way the current inputs differ from the pinned manifest, as sentences."""
    out = []
    if pinned.get("harness_version") != __version__:
        out.append(f"harness version {__version__} != pinned {pinned.get('harness_version')}")
    if pinned.get("grading_key") != grading_key:
        out.append(f"grading configuration differs: now {grading_key}, pinned {pinned.get('grading_key')} "
                   f"(pinned: {json.dumps(pinned.get('grading'))})")
    pinned_tasks = pinned.get("tasks", {})
    for key in sorted(set(pinned_tasks) - set(pins)):
        out.append(f"{key}: pinned but not in this run")
    for key in sorted(set(pins) - set(pinned_tasks)):
        out.append(f"{key}: not in the pinned manifest")
    for key in sorted(set(pins) & set(pinned_tasks)):
        for field in ("instance", "patch", "spec", "image_inputs", "wheelhouse_lock_sha256", "base_packages_sha256",
                      "tree_sha"):
            now, then = pins[key].get(field), pinned_tasks[key].get(field)
            if then is not None and now != then:
                out.append(f"{key}: {field} is {now}, pinned {then}")
    return out
