"""Sandboxes a run left behind, found and removed before a prune.

A run removes its own sandboxes (in the background as each evaluation ends, and every one
of its scope when it ends or is resumed). One that is killed with its engine (the machine
stopped, the engine was restarted, ``kill -9``) and never resumed leaves them stopped on
the engine: nothing reuses a sandbox, yet each still pins its image, so ``harness images
prune`` could only say "stays: used by container". A sandbox is *left* when

* it carries the harness's owner label and a run id (what :class:`~harness.engine.sandbox.Sandbox`
  sets on each; build steps and other containers have no run id),
* it is not running, paused or restarting, and
* it stopped (or, never started, was created) more than :data:`STOPPED_FOR` seconds ago: a
  live run removes a stopped sandbox within seconds, after reading its output.

``--only-label`` confines this as it confines the images: a container's labels include its
image's, so a sandbox of an image outside the scope is never touched.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import docker
from docker.errors import APIError, NotFound

from harness.engine.sandbox import LABEL_OWNER, LABEL_RUN
from harness.imagecache.inventory import has_label

#: seconds a sandbox must have been stopped to count as left behind
STOPPED_FOR = 600.0
_LIVE_STATES = frozenset({"running", "paused", "restarting", "removing"})
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$")


@dataclass(frozen=True)
class LeftSandbox:
    name: str
    container_id: str
    run_id: str
    state: str
    stopped_at: float     # epoch seconds: when it stopped (or was created, never started)


def _epoch(stamp: object) -> float | None:
    """The engine's RFC 3339 time (nanoseconds, ``Z`` or an offset) in epoch seconds; None
    for its zero time (``0001-01-01T00:00:00Z``: never happened) or anything else."""
    if not isinstance(stamp, str) or stamp.startswith("0001-"):
        return None
    match = _STAMP.match(stamp)
    if match is None:
        return None
    zone = match.group(2) or "Z"
    moment = dt.datetime.fromisoformat(match.group(1) + ("+00:00" if zone == "Z" else zone))
    return moment.timestamp()


def left_sandboxes(client: docker.DockerClient, now: float, *, only_label: str | None = None,
                   stopped_for: float | None = None) -> list[LeftSandbox]:
    """The harness sandboxes on the engine that a run left behind (the module's rule;
    ``stopped_for`` defaults to :data:`STOPPED_FOR`)."""
    stopped_for = STOPPED_FOR if stopped_for is None else stopped_for
    found = []
    for summary in client.api.containers(all=True, filters={"label": [f"{LABEL_OWNER}=harness", LABEL_RUN]}):
        labels = summary.get("Labels") or {}
        if summary.get("State") in _LIVE_STATES or not has_label(labels, only_label):
            continue
        try:
            state = client.api.inspect_container(summary["Id"]).get("State") or {}
        except NotFound:
            continue
        if state.get("Status") in _LIVE_STATES or state.get("Running"):
            continue
        stopped = _epoch(state.get("FinishedAt"))
        if stopped is None:
            stopped = float(summary.get("Created") or now)
        if now - stopped < stopped_for:
            continue
        name = (summary.get("Names") or [summary["Id"][:12]])[0].lstrip("/")
        found.append(LeftSandbox(name, summary["Id"], labels.get(LABEL_RUN, ""), str(state.get("Status") or ""),
                                 stopped))
    return sorted(found, key=lambda s: s.stopped_at)


def remove_sandboxes(client: docker.DockerClient, sandboxes: list[LeftSandbox]) -> list[tuple[LeftSandbox, str]]:
    """Remove each, with its volumes (those the harness made); returns the ones the engine refused, with why.
    A sandbox gone already counts as removed; one that started again since is left alone."""
    refused = []
    for sandbox in sandboxes:
        try:
            info = client.api.inspect_container(sandbox.container_id)
            if info.get("State", {}).get("Running"):
                refused.append((sandbox, "running again"))
                continue
            volumes = [m["Name"] for m in info.get("Mounts") or [] if m.get("Type") == "volume" and m.get("Name")]
            client.api.remove_container(sandbox.container_id, v=True, force=False)
        except NotFound:
            continue
        except APIError as exc:
            refused.append((sandbox, str(exc.explanation or exc)))
            continue
        for name in volumes:
            _remove_owned_volume(client, name)
    return refused


def _remove_owned_volume(client: docker.DockerClient, name: str) -> None:
    """A sandbox's own volumes are named, so removing the container with ``v`` leaves them:
    remove each that carries the harness's owner label (never another's), quietly (one in
    use elsewhere, or gone, stays as it is)."""
    try:
        if (client.api.inspect_volume(name).get("Labels") or {}).get(LABEL_OWNER) == "harness":
            client.api.remove_volume(name)
    except (NotFound, APIError):
        pass
