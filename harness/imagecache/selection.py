"""Which harness images go, and why: a pure function of the engine's records.

An image *needs* the harness images its inputs name (the environment an instance was built
on, the compiler image it was built in, ...) and its ancestors on the engine: the harness
reuses an image only while those exist under their tags (an instance built on an
environment that is gone is never reused: the environment is rebuilt with another id), and
the engine frees no byte of a parent while a child holds its layers. So **an image stays
whenever an image that needs it stays**, and images go children first.

An image is a *candidate* when it matches every criterion given:

* ``older_than`` — neither it nor any image needing it was used for that long (the last use
  the harness recorded, else the creation time);
* ``stale`` — this harness would never reuse it: built by another image format or instance
  layout, one of the images it was built from is gone, or it is an untagged leftover;
* ``level`` — its kind ranks above a ``--cache-level``;
* ``in_set`` — an instance of the set was prepared in it, or such an image needs it;
* ``budget`` alone selects every image.

A candidate still stays when it is protected: outside the confinement, tagged by someone
other than the harness, used by a container, leased by a live harness process, needed by an
instance of ``keep_set``, or untagged and young (a build may be between two steps). With a
``budget``, candidates go least recently used first, only until the harness's images fit:
their bytes counted as the engine counts them, each layer once, and only layers no image
outside the harness holds (the bytes removing them all would free).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from humanfriendly import format_size, format_timespan

#: an untagged harness image is ``untagged`` whatever its labels (which it inherits from its parent)
KIND_RANK = {"base": 1, "builder": 1, "debs": 1, "py": 1, "env": 2, "cc": 2, "inst": 3, "sweb": 3, "untagged": 3}
LEVEL_RANK = {"none": 0, "base": 1, "env": 2, "instance": 3}
#: an untagged harness image younger than this may be a build between two steps
UNTAGGED_GRACE = 3600.0


@dataclass(frozen=True)
class CachedImage:
    """One harness image as the engine and the use index describe it."""

    image_id: str
    tags: tuple[str, ...]                 # its harness tags; () for an untagged leftover
    kind: str                             # the org.harness.kind label
    layers: tuple[str, ...]               # chain ids, bottom first
    created: float
    last_used: float | None = None        # recorded by the harness (None: never recorded)
    format: int | None = None             # its inputs' image format
    layout: int | None = None             # its inputs' instance layout (instance images)
    built_from: tuple[tuple[str, str], ...] = ()   # (input, image id) of the harness images it was built from
    needs: frozenset[str] = frozenset()   # ids of the harness images it needs (built_from and ancestors)
    containers: tuple[str, ...] = ()      # containers using it, running or not
    foreign_tags: tuple[str, ...] = ()    # its tags that are not the harness's
    instances: frozenset[str] = frozenset()   # instances recorded as prepared in it
    in_scope: bool = True                 # inside the confinement (--only-label)

    @property
    def name(self) -> str:
        return self.tags[0] if self.tags else f"<untagged {self.image_id[7:19]}>"

    @property
    def last_activity(self) -> float:
        return self.last_used if self.last_used is not None else self.created

    def size(self, sizes: Mapping[str, int]) -> int:
        return sum(sizes.get(layer, 0) for layer in self.layers)


@dataclass(frozen=True)
class Accounting:
    """Bytes per layer (chain id) and the layers images outside the model hold."""

    sizes: Mapping[str, int]
    external: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Criteria:
    now: float
    image_format: int
    instance_layout: int
    older_than: float | None = None
    #: the environment layout this harness builds (an environment image without one in its
    #: inputs is layout 1); None: not checked
    environment_layout: int | None = None
    stale: bool = False
    level: str | None = None
    in_set: frozenset[str] | None = None
    keep_set: frozenset[str] | None = None
    budget: int | None = None

    @property
    def selects(self) -> bool:
        """Whether any criterion selects images (keep_set only protects)."""
        return (self.older_than is not None or self.stale or self.level is not None or self.in_set is not None
                or self.budget is not None)


@dataclass(frozen=True)
class Verdict:
    image: CachedImage
    goes: bool
    reason: str
    size: int = 0          # all its layers
    freed: int = 0         # what its removal frees, after the removals before it
    order: int | None = None


@dataclass(frozen=True)
class Plan:
    verdicts: tuple[Verdict, ...]       # the removals in order, then what stays
    total_before: int                   # the harness's images (in scope), each layer once
    budget: int | None = None

    @property
    def removals(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.goes]

    @property
    def freed(self) -> int:
        return sum(v.freed for v in self.removals)

    @property
    def total_after(self) -> int:
        return self.total_before - self.freed

    @property
    def budget_met(self) -> bool | None:
        return None if self.budget is None else self.total_after <= self.budget


# ---------------------------------------------------------------------------- accounting

def layer_counts(images: Iterable[CachedImage], accounting: Accounting) -> dict[str, int]:
    """How many holders each layer has (images of the model, plus one for the outside)."""
    counts: dict[str, int] = {layer: 1 for layer in accounting.external}
    for image in images:
        for layer in image.layers:
            counts[layer] = counts.get(layer, 0) + 1
    return counts


def harness_bytes(images: Iterable[CachedImage], accounting: Accounting) -> int:
    """What removing every in-scope image would free: each layer once, and only layers
    nothing else holds (neither an image outside the harness nor one outside the scope)."""
    images = list(images)
    held_outside = set(accounting.external)
    for image in images:
        if not image.in_scope:
            held_outside.update(image.layers)
    inside = {layer for image in images if image.in_scope for layer in image.layers}
    return sum(accounting.sizes.get(layer, 0) for layer in inside - held_outside)


def unique_bytes(images: Iterable[CachedImage], accounting: Accounting) -> dict[str, int]:
    """image id -> the bytes only it holds (what removing it alone would free)."""
    images = list(images)
    counts = layer_counts(images, accounting)
    return {i.image_id: sum(accounting.sizes.get(l, 0) for l in i.layers if counts[l] == 1) for i in images}


# ---------------------------------------------------------------------------- relations

def dependents_of(images: Iterable[CachedImage]) -> dict[str, set[str]]:
    images = list(images)
    known = {i.image_id for i in images}
    out: dict[str, set[str]] = {i.image_id: set() for i in images}
    for image in images:
        for need in image.needs:
            if need in known and need != image.image_id:
                out[need].add(image.image_id)
    return out


def needs_closure(start: Iterable[str], by_id: Mapping[str, CachedImage]) -> set[str]:
    seen: set[str] = set()
    todo = [i for i in start if i in by_id]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(n for n in by_id[current].needs if n in by_id and n not in seen)
    return seen


def effective_last_use(images: list[CachedImage]) -> dict[str, float]:
    """An image's last use, or that of any image needing it, whichever is later (a parent
    is never older than its children: LRU takes children first)."""
    by_id = {i.image_id: i for i in images}
    dependents = dependents_of(images)
    memo: dict[str, float] = {}

    def visit(image_id: str, path: frozenset[str]) -> float:
        if image_id in memo:
            return memo[image_id]
        value = by_id[image_id].last_activity
        for child in dependents[image_id]:
            if child not in path:  # a cycle in hand-made records must not recurse forever
                value = max(value, visit(child, path | {image_id}))
        memo[image_id] = value
        return value

    return {i.image_id: visit(i.image_id, frozenset()) for i in images}


def set_images(images: list[CachedImage], instance_ids: frozenset[str]) -> dict[str, str]:
    """image id -> the instance of the set it serves, for every image an instance of the
    set was prepared in and every image those need."""
    by_id = {i.image_id: i for i in images}
    out: dict[str, str] = {}
    for image in images:
        hit = sorted(image.instances & instance_ids)
        if hit:
            for image_id in needs_closure([image.image_id], by_id):
                out.setdefault(image_id, hit[0])
    return out


# ---------------------------------------------------------------------------- criteria

def _ago(seconds: float) -> str:
    return format_timespan(max(0.0, seconds), max_units=1)


def stale_reason(image: CachedImage, criteria: Criteria, tagged_ids: set[str]) -> str | None:
    """Why this harness would never reuse ``image``, or None."""
    if not image.tags:
        if criteria.now - image.created >= UNTAGGED_GRACE:
            return "untagged: left by a failed or superseded build, never looked up"
        return None
    if image.format is not None and image.format != criteria.image_format:
        return f"image format {image.format}, this harness builds {criteria.image_format}: never reused"
    if image.kind == "inst" and image.layout is not None and image.layout != criteria.instance_layout:
        return f"instance layout {image.layout}, this harness builds {criteria.instance_layout}: never reused"
    if image.kind == "env" and criteria.environment_layout is not None \
            and (image.layout or 1) != criteria.environment_layout:
        return (f"environment layout {image.layout or 1}, this harness builds {criteria.environment_layout}: "
                "never reused")
    for name, image_id in image.built_from:
        if image_id not in tagged_ids:
            return f"the {name} image it was built on ({image_id[7:19]}) is gone: never reused"
    return None


def _stale_with_parents(images: list[CachedImage], criteria: Criteria, tagged_ids: set[str]) -> dict[str, str | None]:
    """:func:`stale_reason` of each image, and stale too what was built on a stale image (its tag
    names that image's id, which this harness never makes again)."""
    by_id = {image.image_id: image for image in images}
    out: dict[str, str | None] = {}

    def stale(image: CachedImage) -> str | None:
        if image.image_id in out:
            return out[image.image_id]
        out[image.image_id] = None   # a cycle (none should exist) ends here
        why = stale_reason(image, criteria, tagged_ids)
        for name, parent_id in image.built_from if why is None else ():
            parent = by_id.get(parent_id)
            if parent is not None and stale(parent) is not None:
                why = f"the {name} image it was built on ({parent_id[7:19]}) is never reused: neither is it"
                break
        out[image.image_id] = why
        return why

    for image in images:
        stale(image)
    return out


def protection(image: CachedImage, criteria: Criteria, leases: Mapping[str, str],
               kept_for_set: Mapping[str, str]) -> str | None:
    if not image.in_scope:
        return "outside the confinement (--only-label)"
    if image.foreign_tags:
        return f"also tagged {image.foreign_tags[0]} (not the harness's)"
    if image.containers:
        names = ", ".join(image.containers[:3]) + (" ..." if len(image.containers) > 3 else "")
        return f"used by container{'s' if len(image.containers) > 1 else ''} {names}"
    leased = [leases[t] for t in image.tags if t in leases]
    if leased:
        return f"leased by {leased[0]}"
    if image.image_id in kept_for_set:
        return f"needed by the kept set (instance {kept_for_set[image.image_id]})"
    if not image.tags and criteria.now - image.created < UNTAGGED_GRACE:
        return f"untagged and created {_ago(criteria.now - image.created)} ago: a build may be using it"
    return None


def _match(image: CachedImage, criteria: Criteria, last: float, stale: str | None,
           in_set: Mapping[str, str]) -> tuple[bool, list[str]]:
    """(candidate?, the reasons): what matched when it is one, what did not otherwise."""
    why: list[str] = []
    why_not: list[str] = []
    if criteria.older_than is not None:
        idle = criteria.now - last
        text = f"last used {_ago(idle)} ago"
        (why if idle > criteria.older_than else why_not).append(
            f"{text} ({'older' if idle > criteria.older_than else 'not older'} than {_ago(criteria.older_than)})")
    if criteria.stale:
        if stale:
            why.append(stale)
        elif not image.tags:
            why_not.append(f"untagged but created {_ago(criteria.now - image.created)} ago: a build may be using it")
        else:
            why_not.append("current: this harness would reuse it")
    if criteria.level is not None:
        rank = KIND_RANK.get(image.kind, 3)
        if rank > LEVEL_RANK[criteria.level]:
            why.append(f"{image.kind} is above level {criteria.level}")
        else:
            why_not.append(f"{image.kind} is kept at level {criteria.level}")
    if criteria.in_set is not None:
        if image.image_id in in_set:
            why.append(f"used by the set (instance {in_set[image.image_id]})")
        else:
            why_not.append("not used by the set")
    if why_not:
        return False, why_not
    if not why:  # the budget alone selects everything
        why.append(f"least recently used (last used {_ago(criteria.now - last)} ago)")
    return True, why


# ---------------------------------------------------------------------------- the plan

def plan(images: Iterable[CachedImage], accounting: Accounting, criteria: Criteria,
         leases: Mapping[str, str] | None = None) -> Plan:
    """Decide every image. ``leases``: tag -> its live holder, described."""
    images = list(images)
    leases = leases or {}
    by_id = {i.image_id: i for i in images}
    dependents = dependents_of(images)
    last = effective_last_use(images)
    tagged_ids = {i.image_id for i in images if i.tags}
    in_set = set_images(images, criteria.in_set) if criteria.in_set is not None else {}
    kept_for_set = set_images(images, criteria.keep_set) if criteria.keep_set is not None else {}

    reasons: dict[str, str] = {}
    candidates: set[str] = set()
    stale_of = _stale_with_parents(images, criteria, tagged_ids) if criteria.stale else {}
    for image in images:
        stale = stale_of.get(image.image_id)
        selected, why = _match(image, criteria, last[image.image_id], stale, in_set) if criteria.selects \
            else (False, ["no criterion given"])
        guard = protection(image, criteria, leases, kept_for_set)
        if selected and guard is None:
            candidates.add(image.image_id)
            reasons[image.image_id] = "; ".join(why)
        else:
            reasons[image.image_id] = guard if (selected and guard) else "; ".join(why)

    # whatever stays keeps everything it needs
    staying = [i for i in by_id if i not in candidates]
    while staying:
        keeper = staying.pop()
        for need in by_id[keeper].needs:
            if need in candidates:
                candidates.discard(need)
                reasons[need] = f"needed by {by_id[keeper].name}, which stays"
                staying.append(need)

    counts = layer_counts(images, accounting)
    total = harness_bytes(images, accounting)
    remaining = total
    removed: list[Verdict] = []
    gone: set[str] = set()
    waiting = {i: {d for d in dependents[i] if d in candidates} for i in candidates}
    ready = [(last[i], by_id[i].name, i) for i, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    while ready:
        if criteria.budget is not None and remaining <= criteria.budget:
            break
        _, _, image_id = heapq.heappop(ready)
        image = by_id[image_id]
        freed = 0
        for layer in image.layers:
            counts[layer] -= 1
            if counts[layer] == 0:
                freed += accounting.sizes.get(layer, 0)
        remaining -= freed
        gone.add(image_id)
        removed.append(Verdict(image, True, reasons[image_id], image.size(accounting.sizes), freed, len(removed)))
        for need in image.needs:
            if need in waiting:
                waiting[need].discard(image_id)
                if not waiting[need] and need not in gone:
                    heapq.heappush(ready, (last[need], by_id[need].name, need))
    if criteria.budget is not None:
        for image_id in candidates - gone:  # the budget was met before their turn
            reasons[image_id] = (f"within the budget: after the removals the harness's images take "
                                 f"{format_size(remaining)} of {format_size(criteria.budget)} "
                                 f"(selected: {reasons[image_id]})")
    stays = [Verdict(i, False, reasons[i.image_id], i.size(accounting.sizes))
             for i in sorted(images, key=lambda i: (KIND_RANK.get(i.kind, 3), -last[i.image_id], i.name))
             if i.image_id not in gone]
    return Plan(tuple(removed + stays), total, criteria.budget)


def with_instances(images: Iterable[CachedImage], by_tag: Mapping[str, frozenset[str]]) -> list[CachedImage]:
    """``images`` with the instances the use index recorded for their tags."""
    return [replace(i, instances=frozenset().union(*(by_tag.get(t, frozenset()) for t in i.tags)))
            for i in images]


__all__ = ["Accounting", "CachedImage", "Criteria", "KIND_RANK", "LEVEL_RANK", "Plan", "Verdict", "harness_bytes",
           "plan", "unique_bytes", "with_instances"]
