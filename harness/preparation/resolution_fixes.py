"""What to change in a spec when its requirements do not resolve: one sentence per cause
the resolver's explanation shows, naming both sides and the spec field that fixes it.

Two causes need more than the resolver says:

* an exact pin published after the spec's ``resolve_as_of`` (the resolver sees no such
  release): the harness's own installer pins (``images/bases.yaml``) are the usual
  culprit in a spec of an older era; the fix is the spec's ``installer:`` with releases
  of that time (or a later ``resolve_as_of``), never an option of the resolver;
* a tree's own build requirements against the installer's pins: installs here are
  offline and without build isolation, so one set of tools builds the tree, and either
  the spec's ``build_requires:`` replaces the tree's list or ``installer:`` pins a release
  the tree allows.

Release facts (upload dates, the newest release allowed before a date) come from an
:class:`IndexFacts`; without one the sentences say what to pin without a version.
Pure apart from what ``facts`` looks up.
"""

from __future__ import annotations

import re
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement

from harness.preparation.requirements import INSTALLER_TOOLS, Req, TargetPython, normalise

_EXCLUDED = re.compile(r"`([A-Za-z0-9][A-Za-z0-9._-]*)` was filtered by `exclude-newer`[^.]*\.\s*"
                       r"The requested version, v?([^,\s]+), was published at (\d{4}-\d{2}-\d{2})")
_EXACT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*(?:;.*)?$")


class IndexFacts(Protocol):
    def published(self, name: str, version: str) -> str | None:
        """The date (YYYY-MM-DD) the release's first file was uploaded."""

    def newest_before(self, name: str, as_of: str, allowed: str = "") -> str | None:
        """The newest final release uploaded before ``as_of`` (any date when empty) that
        ``allowed`` (a specifier set, e.g. ``~=62.6``) admits."""


def is_installer_origin(origin: str) -> bool:
    return origin.startswith(("installer pins (", "spec installer ("))


def _is_tree_build(origin: str) -> bool:
    return origin.startswith("tree [build-system] requires")


def _exact(req: Req) -> tuple[str, str] | None:
    match = _EXACT.match(req.text)
    return (normalise(match.group(1)), match.group(2)) if match else None


def mentioned(resolver_output: str, requirements: list[Req]) -> set[str]:
    text = resolver_output.lower()
    names = set()
    for req in requirements:
        pattern = r"(?<![a-z0-9_.-])" + re.escape(req.name).replace(r"\-", "[-_.]") + r"(?![a-z0-9_])"
        if re.search(pattern, text):
            names.add(req.name)
    return names


def fixes(resolver_output: str, requirements: list[Req], as_of: str = "", python: str = "",
          facts: IndexFacts | None = None) -> list[str]:
    """One sentence per cause found: what clashes, where each side came from, what to change."""
    named = mentioned(resolver_output, requirements)
    sentences = _too_new(resolver_output, requirements, named, as_of, facts)
    sentences += _clashes(requirements, named, as_of, python, facts)
    return sentences


def _too_new(output: str, requirements: list[Req], named: set[str], as_of: str,
             facts: IndexFacts | None) -> list[str]:
    if not as_of:
        return []
    late: dict[str, tuple[Req, str, str]] = {}       # name -> (requirement, version, published)
    for name, version, published in _EXCLUDED.findall(output):
        for req in requirements:
            if req.name == normalise(name) and _exact(req) == (normalise(name), version):
                late[req.name] = (req, version, published)
    if facts is not None:  # the resolver names the first such pin only: check the others it names too
        for req in requirements:
            pin = _exact(req)
            if pin and req.name not in late and (req.name in named or is_installer_origin(req.origin)):
                published = facts.published(*pin)
                if published and published >= as_of:
                    late[req.name] = (req, pin[1], published)
    if not late:
        return []
    sentences = []
    installer = {n: v for n, v in late.items() if is_installer_origin(v[0].origin)}
    if installer:
        by_origin: dict[str, list[str]] = {}
        for req, _, published in installer.values():
            by_origin.setdefault(req.origin, []).append(f"{req.text} (published {published})")
        sides = "; ".join(f"{', '.join(pins)} from {origin}" for origin, pins in by_origin.items())
        pins = []
        for tool in INSTALLER_TOOLS:
            if tool in installer:
                older = facts.newest_before(tool, as_of) if facts is not None else None
                pins.append(f"{tool}=={older}" if older else f"{tool}==<a release before {as_of}>")
            else:
                current = next((r.text for r in requirements if r.name == tool and is_installer_origin(r.origin)),
                               None)
                if current:
                    pins.append(current)
        latest = max(published for _, _, published in installer.values())
        sentences.append(f"the installer pins {sides} are newer than the spec's resolve_as_of {as_of}, so the "
                         f"resolver cannot see them: set the spec's `installer: [{', '.join(pins)}]` (the newest "
                         f"releases before that date), or move resolve_as_of to {latest} or later")
    for req, _version, published in (v for n, v in late.items() if n not in installer):
        older = facts.newest_before(req.name, as_of) if facts is not None else None
        instead = f" (e.g. {req.name}=={older})" if older else ""
        where = "the spec's `build_requires:` (it replaces the tree's list)" if _is_tree_build(req.origin) \
            else "the spec"
        sentences.append(f"{req.text} ({req.origin}) was published on {published}, after the spec's resolve_as_of "
                         f"{as_of}: pin a release of before then in {where}{instead}, or move resolve_as_of to "
                         f"{published} or later")
    return sentences


def _clashes(requirements: list[Req], named: set[str], as_of: str, python: str,
             facts: IndexFacts | None) -> list[str]:
    """Pairs (an exact pin, a requirement from elsewhere that excludes it). The installer's
    pins are checked against every other requirement (the resolver names one clash at a
    time); other pins only where the resolver's explanation names them."""
    target = TargetPython(python) if python else None
    build_clashes: list[tuple[Req, tuple[str, str], Req, str]] = []
    sentences, seen = [], set()
    for pin_req in requirements:
        pin = _exact(pin_req)
        if pin is None or (pin_req.name not in named and not is_installer_origin(pin_req.origin)):
            continue
        for other in requirements:
            if other is pin_req or other.name != pin_req.name or other.origin == pin_req.origin:
                continue
            try:
                parsed = Requirement(other.text)
            except InvalidRequirement:
                continue
            if parsed.marker is not None and target is not None and not parsed.marker.evaluate(target.environment()):
                continue
            if parsed.specifier.contains(pin[1], prereleases=True) or frozenset((pin_req, other)) in seen:
                continue
            seen.add(frozenset((pin_req, other)))
            if is_installer_origin(pin_req.origin) and _is_tree_build(other.origin):
                build_clashes.append((pin_req, pin, other, str(parsed.specifier)))
            else:
                sentences.append(_clash_sentence(pin_req, other, str(parsed.specifier)))
    if build_clashes:
        sentences.insert(0, _build_clash_sentence(build_clashes, as_of, facts))
    return sentences


def _build_clash_sentence(clashes: list[tuple[Req, tuple[str, str], Req, str]], as_of: str,
                          facts: IndexFacts | None) -> str:
    tree = ", ".join(repr(other.text) for _, _, other, _ in clashes)
    pins = ", ".join(f"{pin_req.text!r} ({pin_req.origin})" for pin_req, _, _, _ in clashes)
    allowed = []
    for _, (name, _), _, specifier in clashes:
        release = facts.newest_before(name, as_of, specifier) if facts is not None else None
        allowed.append(f"{name}=={release}" if release else f"a {name} release matching {specifier!r}")
    names = ", ".join(name for _, (name, _), _, _ in clashes)
    return (f"the tree's [build-system] requires {tree} exclude{'s' if len(clashes) == 1 else ''} the installer's "
            f"{pins}. Builds here are offline and without build isolation, so the installer's tools build the tree: "
            f"either replace the tree's build requirements with the spec's `build_requires:` (e.g. "
            f"`build_requires: []` to build with the installer's tools, or the tree's list without {names}), or pin "
            f"{', '.join(allowed)} in the spec's `installer:`")


def _clash_sentence(pin_req: Req, other: Req, allowed: str) -> str:
    name = pin_req.name
    both = f"{other.text!r} ({other.origin}) excludes {pin_req.text!r} ({pin_req.origin})"
    if other.origin.startswith("tree metadata Requires-Dist"):
        return (f"{both}: pin a release the tree allows ({allowed}), or add {name} to the spec's `yield_to_tree:` "
                f"so the tree's requirement wins, as `pip install -e .` over an installed environment does")
    if other.origin.startswith("spec build_requires") and is_installer_origin(pin_req.origin):
        return f"{both}: make the spec's `build_requires:` and `installer:` agree on {name}"
    return f"{both}: change one of them so both allow the same {name} release"
