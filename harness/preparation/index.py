"""The package index, read on the host (the only place with network): project pages of
its simple API (PEP 691 JSON), release files and their digests. Nothing here builds or
runs a distribution; sdists are only downloaded, their digests checked, and their
``[build-system]`` table read as data.

The index is ``$HARNESS_SIMPLE_INDEX`` (default PyPI's simple API).
"""

from __future__ import annotations

import json
import os
import re
import functools
import shutil
import ssl
import tarfile
import tomllib
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ImageBuildError
from harness.hashing import file_sha256
from harness.preparation.requirements import normalise

SIMPLE_INDEX = os.environ.get("HARNESS_SIMPLE_INDEX", "https://pypi.org/simple").rstrip("/")
SDIST_EXTENSIONS = (".tar.gz", ".zip", ".tar.bz2", ".tgz")


@dataclass(frozen=True)
class Target:
    """The interpreter a wheelhouse is for."""

    version: str   # exact CPython version, e.g. "3.8.18"
    glibc: str     # e.g. "2.36"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def platforms(self) -> list[str]:
        major, minor = (int(x) for x in self.glibc.split("."))
        tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 16, -1)]
        return tags + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def download_sdist(name: str, version: str, dest: Path, log: Path) -> Path:
    """The sdist of ``name==version`` from the index's simple API (PEP 691 JSON), its
    sha256 checked against the index's."""
    url = f"{SIMPLE_INDEX}/{normalise(name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60, context=_tls()) as response:
            data = json.load(response)
    except (OSError, ValueError) as exc:
        raise ImageBuildError(f"looking up the sdist of {name}=={version} failed ({url}): {exc}") from None
    chosen = None
    for entry in data.get("files", []):
        filename = entry.get("filename", "")
        stem = next((filename[:-len(ext)] for ext in SDIST_EXTENSIONS if filename.endswith(ext)), None)
        if stem is None or "-" not in stem:
            continue
        file_name, _, file_version = stem.rpartition("-")
        if normalise(file_name) == normalise(name) and file_version == version and not entry.get("yanked"):
            chosen = entry
            break
    if chosen is None:
        raise ImageBuildError(f"{name}=={version} has neither a wheel for the target nor an sdist on the index "
                              f"({url})")
    target = dest / chosen["filename"]
    try:
        with urllib.request.urlopen(chosen["url"], timeout=300, context=_tls()) as response, \
                open(target, "wb") as handle:
            shutil.copyfileobj(response, handle)
    except OSError as exc:
        raise ImageBuildError(f"downloading the sdist of {name}=={version} failed: {exc}") from None
    expected = (chosen.get("hashes") or {}).get("sha256")
    got = file_sha256(target)
    if expected and got != expected:
        target.unlink()
        raise ImageBuildError(f"sdist of {name}=={version}: sha256 {got} != the index's {expected}")
    with log.open("a") as handle:
        handle.write(f"# sdist {name}=={version}: {chosen['url']} sha256={got}\n")
    return target


def index_project(name: str) -> dict:
    """The index's simple-API JSON of a project (memoised for the process)."""
    key = normalise(name)
    if key not in _INDEX_CACHE:
        request = urllib.request.Request(f"{SIMPLE_INDEX}/{key}/",
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        try:
            with urllib.request.urlopen(request, timeout=60, context=_tls()) as response:
                _INDEX_CACHE[key] = json.load(response)
        except (OSError, ValueError):
            _INDEX_CACHE[key] = {}
    return _INDEX_CACHE[key]


_INDEX_CACHE: dict[str, dict] = {}


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for the process: without it every request builds its own and
    loads the system's CA bundle again (a cold run's index look-ups spent about 20 CPU-s of the
    harness's on that, per 40 instances)."""
    return ssl.create_default_context()


def newest_release(name: str, target: Target, as_of: str, sources_only: bool = False,
                   newer_than: str | None = None, allowed: str = "") -> str | None:
    """The newest final release of ``name`` on the index (uploaded before ``as_of``,
    allowing the target Python, admitted by the specifier set ``allowed``), optionally
    only when it has no wheel the target can use and an sdist, and only when newer than
    ``newer_than``."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
    try:
        admitted = SpecifierSet(allowed)
    except InvalidSpecifier:
        return None
    releases: dict[Version, list[dict]] = {}
    for entry in index_project(name).get("files", []):
        if entry.get("yanked") or (as_of and (entry.get("upload-time") or "9999") >= as_of):
            continue
        version = _file_version(entry.get("filename", ""), name)
        try:
            parsed = Version(version) if version else None
        except InvalidVersion:
            parsed = None
        if parsed is None or parsed.is_prerelease or parsed.is_devrelease or parsed not in admitted:
            continue
        releases.setdefault(parsed, []).append(entry)
    for version in sorted(releases, reverse=True):
        entries = releases[version]
        requires = next((e.get("requires-python") for e in entries if e.get("requires-python")), None)
        try:
            if requires and target.version not in SpecifierSet(requires):
                continue
        except InvalidSpecifier:
            continue
        try:
            if newer_than is not None and version <= Version(newer_than):
                return None
        except InvalidVersion:
            return None
        if sources_only and (any(_wheel_fits(e.get("filename", ""), target) for e in entries)
                             or not any(e.get("filename", "").endswith(SDIST_EXTENSIONS) for e in entries)):
            return None
        return str(version)
    return None


class IndexReleases:
    """Release facts of the index for one target (harness.preparation.resolution_fixes.IndexFacts)."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def published(self, name: str, version: str) -> str | None:
        times = [e.get("upload-time") for e in index_project(name).get("files", [])
                 if _file_version(e.get("filename", ""), name) == version and e.get("upload-time")]
        return min(times)[:10] if times else None

    def newest_before(self, name: str, as_of: str, allowed: str = "") -> str | None:
        return newest_release(name, self.target, as_of, allowed=allowed)


def sources_only_pins(requirements: list[str], target: Target) -> list[tuple[str, str]]:
    """``(name, version)`` of the exact pins (``name==version``, no marker) whose release
    on the index has an sdist but no wheel the target can use."""
    from concurrent.futures import ThreadPoolExecutor
    pins = []
    for text in requirements:
        match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$", text)
        if match:
            pins.append((match.group(1), match.group(2)))

    def check(pin: tuple[str, str]) -> tuple[str, str] | None:
        name, version = pin
        entries = [e for e in index_project(name).get("files", [])
                   if _file_version(e.get("filename", ""), name) == version and not e.get("yanked")]
        if entries and not any(_wheel_fits(e.get("filename", ""), target) for e in entries) \
                and any(e.get("filename", "").endswith(SDIST_EXTENSIONS) for e in entries):
            return normalise(name), version
        return None

    with ThreadPoolExecutor(8) as pool:
        return [r for r in pool.map(check, pins) if r]


def newer_sdist_only(pins: list[str], target: Target, as_of: str, log: Path) -> list[tuple[str, str]]:
    """Pinned packages whose newest final release (uploaded before ``as_of``, allowing
    the target Python) has no wheel the target could use: ``(name, that version)``."""
    from concurrent.futures import ThreadPoolExecutor

    def check(pin: str) -> tuple[str, str] | None:
        name, _, pinned = pin.partition("==")
        version = newest_release(name, target, as_of, sources_only=True, newer_than=pinned)
        return (normalise(name), version) if version else None

    with ThreadPoolExecutor(8) as pool:
        found = [r for r in pool.map(check, pins) if r]
    if found:
        with log.open("a") as handle:
            handle.write(f"# newest releases that exist only as sources (built in the builder): {found}\n")
    return found


def _file_version(filename: str, name: str) -> str | None:
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return parts[1] if len(parts) >= 5 else None
    stem = next((filename[:-len(ext)] for ext in SDIST_EXTENSIONS if filename.endswith(ext)), None)
    if stem is None or "-" not in stem:
        return None
    file_name, _, version = stem.rpartition("-")
    return version if normalise(file_name) == normalise(name) else None


def _wheel_fits(filename: str, target: Target) -> bool:
    """A loose check that a wheel could serve the target (CPython X.Y, Linux x86_64)."""
    if not filename.endswith(".whl"):
        return False
    parts = filename[:-4].split("-")
    if len(parts) < 5:
        return False
    pythons, abis, platforms = parts[-3].split("."), parts[-2].split("."), parts[-1].split(".")
    nodot = target.minor.replace(".", "")
    python_ok = any(p in ("py3", "py2.py3", f"cp{nodot}", f"py{nodot}") or p.startswith("py3") for p in pythons) \
        or (any(p.startswith("cp3") for p in pythons) and "abi3" in abis)
    platform_ok = any(p == "any" or ("linux" in p and "x86_64" in p) for p in platforms)
    return python_ok and platform_ok


def sdist_build_requires(sdist: Path) -> list[str]:
    """``[build-system] requires`` of an sdist (read from the archive, never executed)."""
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as archive:
                names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/pyproject.toml")]
                text = archive.read(names[0]).decode() if names else ""
        else:
            with tarfile.open(sdist) as archive:
                members = [m for m in archive.getmembers() if m.name.count("/") == 1
                           and m.name.endswith("/pyproject.toml") and m.isfile()]
                text = archive.extractfile(members[0]).read().decode() if members else ""
        requires = tomllib.loads(text).get("build-system", {}).get("requires", []) if text else []
    except (OSError, tarfile.TarError, zipfile.BadZipFile, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    return [r for r in requires if isinstance(r, str)]
