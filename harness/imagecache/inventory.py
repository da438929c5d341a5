"""The engine's harness images, read into :class:`~harness.imagecache.selection.CachedImage` records.

A harness image is one tagged ``harness-<kind>:...`` for a kind the builder makes (base,
debs, py, cc, env, inst, sweb), or an untagged top-level image carrying the builder's
``org.harness.kind`` label (what a failed build leaves). Every other top-level image on
the engine is read too, for its layers only: a layer it holds is freed by no removal here.

Layers are named by their chain id (the engine's own: the digest of the diff ids below and
at that layer), so two images share a layer exactly when they share its chain id; each
layer's bytes come from the engine's history of the image (one call per image id, cached in
the use index: an id names fixed content).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import APIError, NotFound

from harness.imagecache.selection import KIND_RANK, Accounting, CachedImage
from harness.bookkeeping.usage import UseIndex

LABEL_PREFIX = "org.harness"
#: the inputs that name another harness image the image was built on or from
BUILT_FROM_INPUTS = ("env", "parent", "base", "build_parent", "debs")
#: Dockerfile steps that change only the configuration (their history entries hold no layer)
METADATA_STEPS = frozenset({"ENV", "LABEL", "CMD", "ENTRYPOINT", "WORKDIR", "USER", "EXPOSE", "SHELL", "ARG",
                            "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "VOLUME", "MAINTAINER"})


def harness_kind(tag: str) -> str | None:
    repo = tag.rsplit(":", 1)[0]
    if repo.startswith("harness-") and repo[len("harness-"):] in KIND_RANK:
        return repo[len("harness-"):]
    return None


def chain_ids(diff_ids: list[str]) -> tuple[str, ...]:
    """The chain id of each layer, bottom first (the OCI image spec's ChainID)."""
    out: list[str] = []
    for diff in diff_ids:
        out.append(diff if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {diff}".encode()).hexdigest())
    return tuple(out)


def layer_sizes_from_history(history: list[dict], layer_count: int) -> tuple[list[int], bool]:
    """Bytes of each layer (bottom first) from the engine's history of an image, and
    whether the assignment is exact. History entries that hold no layer have size 0;
    when the entries with bytes are as many as the layers they are the layers, else a
    0-byte entry that is no configuration step counts as a layer too; otherwise the sizes
    are given in order (the total is still right)."""
    entries = list(reversed(history))  # the engine lists the newest first
    sized = [int(e.get("Size") or 0) for e in entries if int(e.get("Size") or 0) > 0]
    if len(sized) == layer_count:
        return sized, True

    def configuration_only(entry: dict) -> bool:
        found = re.search(r"#\(nop\)\s+([A-Za-z]+)", str(entry.get("CreatedBy") or ""))
        return bool(found) and found.group(1).upper() in METADATA_STEPS

    layered = [int(e.get("Size") or 0) for e in entries
               if int(e.get("Size") or 0) > 0 or not configuration_only(e)]
    if len(layered) == layer_count:
        return layered, True
    sized = sized[:layer_count]
    return sized + [0] * (layer_count - len(sized)), False


def _inputs(labels: dict[str, str]) -> dict[str, Any]:
    text = labels.get(f"{LABEL_PREFIX}.inputs") or ""
    try:
        data = json.loads(text)
        return data if isinstance(data, dict) else {}
    except ValueError:  # cut at the label's limit: read the fields that matter from the text
        out: dict[str, Any] = {}
        for key in ("format", "layout"):
            found = re.search(rf'"{key}":\s*(\d+)', text)
            if found:
                out[key] = int(found.group(1))
        for key in BUILT_FROM_INPUTS:
            found = re.search(rf'"{key}":\s*"(sha256:[0-9a-f]{{64}})"', text)
            if found:
                out[key] = found.group(1)
        return out


@dataclass(frozen=True)
class EngineView:
    images: list[CachedImage]
    accounting: Accounting
    #: the engine's own total of every layer of every image (``docker system df``), when read
    engine_bytes: int | None = None
    #: images whose layer sizes could not be matched one to one with their layers
    inexact_sizes: int = 0


def has_label(labels: dict[str, str], only_label: str | None) -> bool:
    if only_label is None:
        return True
    key, equals, value = only_label.partition("=")
    return key in labels and (not equals or labels[key] == value)


def read_engine(client: docker.DockerClient, index: UseIndex | None = None, *, only_label: str | None = None,
                engine_total: bool = False) -> EngineView:
    """Every harness image on the engine, with what the use index knows of it.
    ``only_label`` (``KEY`` or ``KEY=VALUE``) confines the scope: other images are
    described but marked outside it."""
    summaries = client.api.images(all=True)
    by_id = {s["Id"]: s for s in summaries}
    has_children = {s.get("ParentId") for s in summaries if s.get("ParentId")}
    users: dict[str, list[str]] = {}
    for container in client.api.containers(all=True):
        name = (container.get("Names") or [container["Id"][:12]])[0].lstrip("/")
        image_id = container.get("ImageID")
        seen = set()
        while image_id and image_id not in seen:  # the container's image and all its ancestors
            seen.add(image_id)
            users.setdefault(image_id, []).append(name)
            image_id = (by_id.get(image_id) or {}).get("ParentId")

    harness, outside = [], []
    for summary in summaries:
        tags = [t for t in summary.get("RepoTags") or [] if t != "<none>:<none>"]
        labels = summary.get("Labels") or {}
        if any(harness_kind(t) for t in tags):
            harness.append(summary)
        elif not tags and summary["Id"] not in has_children and f"{LABEL_PREFIX}.kind" in labels:
            harness.append(summary)
        elif tags or summary["Id"] not in has_children:
            outside.append(summary)

    layers: dict[str, tuple[str, ...]] = {}
    for summary in harness + outside:
        try:
            layers[summary["Id"]] = chain_ids(client.api.inspect_image(summary["Id"])["RootFS"].get("Layers") or [])
        except (NotFound, APIError):
            continue  # removed while being read
    harness = [s for s in harness if s["Id"] in layers]

    cached = index.layer_sizes(s["Id"] for s in harness) if index else {}
    fresh: dict[str, list[int]] = {}
    inexact = 0
    for summary in harness:
        image_id = summary["Id"]
        if len(cached.get(image_id, ())) == len(layers[image_id]):
            continue
        try:
            sizes, exact = layer_sizes_from_history(client.api.history(image_id), len(layers[image_id]))
        except (NotFound, APIError):
            sizes, exact = [0] * len(layers[image_id]), False
        inexact += not exact
        if exact:
            fresh[image_id] = sizes
        cached[image_id] = sizes
    if index and fresh:
        index.save_layer_sizes(fresh)
    sizes: dict[str, int] = {}
    for image_id, per_layer in cached.items():
        for layer, size in zip(layers[image_id], per_layer):
            sizes[layer] = size

    last_uses = index.last_uses() if index else {}
    tagged = {t: s["Id"] for s in harness for t in s.get("RepoTags") or []}
    top_of: dict[str, list[str]] = {}
    for summary in harness:
        chain = layers[summary["Id"]]
        if chain:
            top_of.setdefault(chain[-1], []).append(summary["Id"])
    records = []
    for summary in harness:
        image_id = summary["Id"]
        labels = summary.get("Labels") or {}
        tags = tuple(sorted(t for t in summary.get("RepoTags") or [] if harness_kind(t)))
        foreign = tuple(sorted(t for t in summary.get("RepoTags") or []
                               if t != "<none>:<none>" and not harness_kind(t)))
        kind = harness_kind(tags[0]) if tags else "untagged"
        inputs = _inputs(labels)
        built_from = tuple((k, str(inputs[k])) for k in BUILT_FROM_INPUTS
                           if isinstance(inputs.get(k), str) and str(inputs[k]).startswith("sha256:"))
        needs = {image_id_ for _, image_id_ in built_from}
        ancestor = summary.get("ParentId")
        while ancestor and ancestor in by_id:  # the engine's parents (built here)
            needs.add(ancestor)
            ancestor = by_id[ancestor].get("ParentId")
        for layer in layers[image_id][:-1]:  # images this one was pulled on top of
            needs.update(top_of.get(layer, ()))
        if kind == "base":
            needs.update(tagged[d] for t in tags if (d := "harness-debs:" + t.split(":", 1)[1]) in tagged)
        needs.discard(image_id)
        uses = [last_uses[(t, image_id)] for t in tags if (t, image_id) in last_uses]
        records.append(CachedImage(
            image_id=image_id, tags=tags, kind=kind, layers=layers[image_id], created=float(summary.get("Created") or 0),
            last_used=max(uses) if uses else None,
            format=inputs.get("format") if isinstance(inputs.get("format"), int) else None,
            layout=inputs.get("layout") if isinstance(inputs.get("layout"), int) else None,
            built_from=built_from, needs=frozenset(needs), containers=tuple(users.get(image_id, ())),
            foreign_tags=foreign, in_scope=has_label(labels, only_label)))
    harness_ids = {r.image_id for r in records}
    records = [_only_harness_needs(r, harness_ids) for r in records]
    external = frozenset(layer for s in outside if s["Id"] in layers for layer in layers[s["Id"]])
    engine_bytes = None
    if engine_total:
        engine_bytes = int(client.df().get("LayersSize") or 0)
    return EngineView(records, Accounting(sizes, external), engine_bytes, inexact)


def _only_harness_needs(image: CachedImage, harness_ids: set[str]) -> CachedImage:
    from dataclasses import replace
    return replace(image, needs=frozenset(n for n in image.needs if n in harness_ids))
