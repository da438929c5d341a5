"""Listing and pruning the harness's images (``harness images list|prune``, ``--cache-level``).

Levels, lowest first: ``base`` (bootstrapped Debian, the compiler .debs of its suite, interpreter layers),
``env`` (locked dependencies), ``inst`` (one per instance; ``sweb``: the thin layer on a
prebuilt SWE-bench image, which is the engine's, never removed here). Keeping a level keeps every
level below it; ``none`` keeps nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker
from docker.errors import APIError, NotFound

KIND_RANK = {"base": 1, "builder": 1, "debs": 1, "py": 1, "env": 2, "cc": 2, "inst": 3, "sweb": 3}
LEVEL_RANK = {"none": 0, "base": 1, "env": 2, "instance": 3}


@dataclass(frozen=True)
class ImageRow:
    tag: str
    kind: str
    size: int     # bytes, with every layer it shares
    unique: int   # bytes no other image shares (the engine's own accounting)


def list_images(client: docker.DockerClient) -> list[ImageRow]:
    usage = client.df().get("Images") or []
    rows = []
    for item in usage:
        for tag in item.get("RepoTags") or []:
            repo = tag.split(":")[0]
            if repo.startswith("harness-") and repo.split("-", 1)[1] in KIND_RANK:
                kind = repo.split("-", 1)[1]
                rows.append(ImageRow(tag, kind, int(item.get("Size") or 0),
                                     int(item.get("Size") or 0) - int(item.get("SharedSize") or 0)))
    return sorted(rows, key=lambda r: (KIND_RANK[r.kind], r.tag))


def prune_images(client: docker.DockerClient, level: str) -> list[str]:
    """Remove harness images whose kind ranks above ``level``. Returns removed tags.
    Images still used by a container are left in place."""
    keep = LEVEL_RANK[level]
    removed = []
    for row in sorted(list_images(client), key=lambda r: -KIND_RANK[r.kind]):
        if KIND_RANK[row.kind] > keep:
            try:
                client.images.remove(row.tag, noprune=False)
                removed.append(row.tag)
            except (NotFound, APIError):
                continue
    return removed
