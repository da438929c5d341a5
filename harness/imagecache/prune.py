"""Carrying a :class:`~harness.imagecache.selection.Plan` out, one image at a time.

Each removal runs under the exclusive lease gate (harness.bookkeeping.leases): the leases
are read again there, so an image leased since the plan was made stays, and nothing can
lease it while it goes. Before each removal the image is read again: gone already, given a
tag that is not the harness's, or (confined) without the confining label, it is not
touched — the last a :class:`~harness.errors.ConfinementBreached` that stops the prune.
Removal never forces: the engine itself refuses an image a container uses. An image whose
removal was skipped keeps everything it needs, so a skip never strands a child.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import APIError, NotFound

from harness.errors import ConfinementBreached
from harness.imagecache.inventory import harness_kind, has_label
from harness.bookkeeping.leases import gate, live_leases, remove_stale
from harness.imagecache.selection import Plan, dependents_of


@dataclass(frozen=True)
class Removal:
    name: str
    image_id: str
    removed: bool
    note: str = ""     # why it was not removed, or what the engine said


def carry_out(client: docker.DockerClient, plan: Plan, state_dir: Path, *, only_label: str | None = None) -> list[Removal]:
    """Remove the plan's removals in order; returns what happened to each."""
    lease_dir = Path(state_dir) / "leases"
    dependents = dependents_of(v.image for v in plan.verdicts)
    removed: set[str] = set()
    outcomes: list[Removal] = []
    with gate(lease_dir, exclusive=True):
        remove_stale(lease_dir)
    for verdict in plan.removals:
        image = verdict.image
        kept = sorted(d for d in dependents.get(image.image_id, ()) if d not in removed)
        if kept:
            outcomes.append(Removal(image.name, image.image_id, False,
                                    f"needed by {kept[0][7:19]}, which was not removed"))
            continue
        with gate(lease_dir, exclusive=True):
            outcome = _remove_one(client, image, lease_dir, only_label)
        outcomes.append(outcome)
        if outcome.removed:
            removed.add(image.image_id)
    return outcomes


def _remove_one(client: docker.DockerClient, image, lease_dir: Path, only_label: str | None) -> Removal:
    leases = live_leases(lease_dir)
    held = [t for t in image.tags if t in leases]
    if held:
        return Removal(image.name, image.image_id, False, f"leased by {leases[held[0]].describe()} since the plan")
    try:
        current = client.api.inspect_image(image.image_id)
    except NotFound:
        return Removal(image.name, image.image_id, True, "already gone")
    labels = (current.get("Config") or {}).get("Labels") or {}
    if only_label is not None and not has_label(labels, only_label):
        raise ConfinementBreached(f"{image.name} ({image.image_id[7:19]}) lacks the label {only_label} this prune "
                                  "is confined to; nothing more is removed")
    tags = [t for t in current.get("RepoTags") or [] if t != "<none>:<none>"]
    foreign = [t for t in tags if not harness_kind(t)]
    if foreign:
        return Removal(image.name, image.image_id, False, f"tagged {foreign[0]} since the plan")
    if sorted(tags) != sorted(image.tags):
        return Removal(image.name, image.image_id, False, "its tags changed since the plan")
    try:
        for reference in image.tags or (image.image_id,):
            client.api.remove_image(reference, force=False, noprune=False)
    except NotFound:
        return Removal(image.name, image.image_id, True, "already gone")
    except APIError as exc:
        return Removal(image.name, image.image_id, False, f"the engine refused: {exc.explanation or exc}")
    try:
        client.api.inspect_image(image.image_id)
        return Removal(image.name, image.image_id, True, "untagged; the engine keeps its layers for a child image")
    except NotFound:
        return Removal(image.name, image.image_id, True)
