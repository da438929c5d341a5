"""Requirements with their origins (pure).

Every requirement that goes into an environment's lock says where it came from: the
spec's ``requirements``, the installer pins (the spec's ``installer`` or
``images/bases.yaml``), the tree's build requirements (``[build-system] requires`` or the
spec's ``build_requires``) or the tree's own metadata (``Requires-Dist``). When the
resolver finds no solution, :func:`explain_conflict` names each side's origin; when a
build fails, :func:`failing_package` names the package and :func:`resolver_summary`
keeps the resolver's own explanation whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import Parser

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

INSTALLER_TOOLS = ("pip", "setuptools", "wheel")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(text: str) -> str:
    """The normalised project name of a requirement line (``name[extra]>=1; marker``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    return normalise(match.group(1)) if match else text.strip().lower()


@dataclass(frozen=True)
class Req:
    text: str     # as given: "setuptools==68.0.0", "wheel~=0.37.1; python_version<'3.10'"
    origin: str   # e.g. "spec requirements (images/specs/x.yaml (version 2.15))"

    @property
    def name(self) -> str:
        return requirement_name(self.text)


def installer_pins(defaults: tuple[str, ...], spec_installer: tuple[str, ...], spec_requirements: tuple[str, ...],
                   defaults_origin: str, spec_origin: str) -> list[Req]:
    """pip, setuptools and wheel, each exactly pinned: the spec's ``installer`` wins over
    the base defaults, and an exact pin among the spec's requirements wins over both.
    These are also the tools every sdist and tree is built with."""
    chosen: dict[str, Req] = {}
    for pin in defaults:
        chosen[requirement_name(pin)] = Req(pin, f"installer pins ({defaults_origin})")
    for pin in spec_installer:
        chosen[requirement_name(pin)] = Req(pin, f"spec installer ({spec_origin})")
    for requirement in spec_requirements:
        name = requirement_name(requirement)
        if name in INSTALLER_TOOLS and re.match(r"^[A-Za-z0-9._-]+\s*==\s*[^,;\s]+\s*$", requirement):
            chosen[name] = Req(requirement, f"spec requirements ({spec_origin})")
    missing = [tool for tool in INSTALLER_TOOLS if tool not in chosen]
    if missing:
        raise ValueError(f"no pin for {', '.join(missing)} (set the spec's `installer`)")
    return [chosen[tool] for tool in INSTALLER_TOOLS]


@dataclass(frozen=True)
class TargetPython:
    """What environment markers see on the target (CPython on Linux x86_64)."""

    version: str  # exact, e.g. "3.9.2"

    def environment(self, extra: str = "") -> dict[str, str]:
        major_minor = ".".join(self.version.split(".")[:2])
        return {"python_version": major_minor, "python_full_version": self.version,
                "implementation_name": "cpython", "implementation_version": self.version,
                "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
                "platform_system": "Linux", "platform_machine": "x86_64", "platform_release": "",
                "platform_version": "", "extra": extra}


def tree_requirements(requires_dist: list[str], extras: tuple[str, ...], target: TargetPython,
                      project: str = "") -> list[str]:
    """The tree's install requirements for the requested ``extras``: lines guarded by an
    ``extra`` marker are evaluated here (kept, without marker, when true for one of the
    extras); other markers are kept for the resolver to evaluate for the target. A
    requirement on the project itself (``proj[test]`` in its own extras) is expanded."""
    out: list[str] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            out.append(line)
            continue
        if project and normalise(req.name) == normalise(project):
            continue  # "astropy[all]" inside astropy's own extras: its lines are listed anyway
        if req.marker is not None and "extra" in str(req.marker):
            if any(req.marker.evaluate(target.environment(e)) for e in extras):
                req.marker = None
                out.append(str(req))
            continue
        out.append(str(req))
    return out


def yield_to_tree(pins: list[Req], tree: list[str], names: tuple[str, ...], target: TargetPython
                  ) -> tuple[list[Req], list[str]]:
    """Drop the exact pins of ``names`` that the tree's own requirements exclude (what an
    install of the tree over an environment does: the tree's constraint wins, the resolver
    picks a release that satisfies it). Returns (pins kept, a sentence per dropped pin)."""
    wanted = {normalise(n) for n in names}
    constraints: dict[str, list[Requirement]] = {}
    for line in tree:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(target.environment()):
            constraints.setdefault(normalise(req.name), []).append(req)
    kept, dropped = [], []
    for pin in pins:
        match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^;,\s]+)\s*$", pin.text)
        name = normalise(match.group(1)) if match else ""
        if match and name in wanted:
            refusing = [str(r) for r in constraints.get(name, [])
                        if not r.specifier.contains(match.group(2), prereleases=True)]
            if refusing:
                dropped.append(f"{pin.text!r} ({pin.origin}) yields to the tree's {', '.join(refusing)}")
                continue
        kept.append(pin)
    return kept, dropped


def parse_metadata(text: str) -> tuple[str, str, list[str], list[str]]:
    """(name, version, Requires-Dist lines, Provides-Extra) of a METADATA/PKG-INFO file."""
    message = Parser().parsestr(text)
    return (message.get("Name", ""), message.get("Version", ""), list(message.get_all("Requires-Dist") or []),
            list(message.get_all("Provides-Extra") or []))


def parse_egg_requires(text: str) -> list[str]:
    """An egg-info ``requires.txt`` as Requires-Dist lines (``[extra:marker]`` sections
    become ``extra == "..."`` markers)."""
    out: list[str] = []
    section_marker = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            parts = [f'extra == "{extra}"'] if extra else []
            if marker:
                parts.append(f"({marker})")
            section_marker = " and ".join(parts)
            continue
        out.append(f"{line}; {section_marker}" if section_marker else line)
    return out


def explain_conflict(resolver_output: str, requirements: list[Req]) -> list[str]:
    """For each requirement named in the resolver's explanation: ``name: 'text' from origin``."""
    text = resolver_output.lower()
    lines = []
    seen = set()
    for req in requirements:
        name = req.name
        pattern = r"(?<![a-z0-9_.-])" + re.escape(name).replace(r"\-", "[-_.]") + r"(?![a-z0-9_])"
        if re.search(pattern, text) and (name, req.text) not in seen:
            seen.add((name, req.text))
            lines.append(f"{name}: {req.text!r} from {req.origin}")
    return lines


_UV_PACKAGE = re.compile(r"Because (?:there is no version of |there are no versions of )?(?:you require )?(?:only )?(?:the following versions of )?([A-Za-z0-9][A-Za-z0-9._-]*)")
_SDIST_ONLY = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+) has no usable wheels")
_SDIST_ONLY_ANY = re.compile(r"(?:all versions of|only) ([A-Za-z0-9][A-Za-z0-9._-]*)[^\n]*?ha(?:s|ve) no usable wheels")


def needs_building(resolver_output: str) -> tuple[list[tuple[str, str]], list[str]]:
    """From uv's ``--no-build`` failure: ``(name, version)`` pins that have only sources,
    and names with only sources whose version the resolver did not pin."""
    exact = [(normalise(n), v) for n, v in _SDIST_ONLY.findall(resolver_output)]
    named = {n for n, _ in exact}
    loose = sorted({normalise(n) for n in _SDIST_ONLY_ANY.findall(resolver_output)} - named)
    return sorted(set(exact)), loose


def resolver_summary(resolver_output: str) -> str:
    """The resolver's explanation (uv's ``cause:``/``Because`` lines), whole."""
    lines = [l.rstrip() for l in resolver_output.splitlines()
             if l.strip() and not l.lstrip().startswith("warning:")]
    return "\n".join(lines)


def failing_package(log: str) -> str | None:
    """The package a failed install or build names (pip, uv, setuptools messages)."""
    patterns = (
        r"Failed (?:building wheel for|to build) ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"No matching distribution found for ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"Could not find a version that satisfies the requirement ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"building wheel of ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"Getting requirements to build (?:wheel|editable) for ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"Running setup\.py (?:develop|install) for ([A-Za-z0-9][A-Za-z0-9._-]*)",
        r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'",
        r"ImportError: No module named '?([A-Za-z0-9_.]+)",
    )
    for pattern in patterns:
        found = re.findall(pattern, log)
        if found:
            return found[-1].rstrip(".")
    match = _UV_PACKAGE.search(log)
    return match.group(1) if match else None


def marker_ok(text: str) -> bool:
    try:
        Marker(text)
        return True
    except Exception:  # noqa: BLE001 - packaging raises several types
        return False
