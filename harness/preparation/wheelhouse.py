"""Host-side wheelhouses: a requirement set resolved for the *target* interpreter,
downloaded on the host (the only place with network), locked with hashes, and installed
in images with ``--no-index --require-hashes``.

A wheelhouse is keyed by the distinct requirement set (and the target's exact Python
and glibc), never by a tree: every instance whose spec and tree requirements are the
same shares one resolution and one lock.

Resolution runs ``uv pip compile --no-build`` for the target (``--python-version X.Y.Z
--python-platform x86_64-manylinux_2_NN``): nothing is ever built on the host. When the
resolver says a pinned package has no wheel, its sdist is downloaded (the index's simple API,
digest checked) and built into a wheel in the network-less builder of the target
interpreter with the set's own build tools (:mod:`harness.engine.builder`); the built
wheels are offered to the resolver (``--find-links``) and resolution is repeated. A
resolution that still fails is an ImageBuildError that keeps the resolver's whole
explanation, names the failing package, and names the origin of every requirement the
explanation mentions.

Layout (under the cache directory)::

    wheelhouse/<python>-<hash>/
        requirements.in      what was asked for, one line per requirement, with its origin
        resolver.log         every resolver and download command with its whole output
        requirements.lock    name==version --hash=sha256:... for every wheel present
        wheels/*.whl         downloaded and built wheels
        built/*.whl          the wheels built from sdists (also in wheels/)
        target.json          the target (Python and glibc): another wheelhouse of the same target
                             takes the wheels it downloaded instead of downloading them again
        COMPLETE             written last: a wheelhouse without it is rebuilt
    sdist-wheels/<key>/      one build of one sdist, shared by every wheelhouse (SDIST_WHEELS)
        *.whl                the wheels it made
        COMPLETE             "sha256  file name" per wheel, written last and checked on every use
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.bookkeeping import builds
from harness.errors import ImageBuildError
from harness.hashing import content_hash, file_sha256
from harness.locks import file_lock
from harness.preparation.index import (IndexReleases, Target, download_sdist, newer_sdist_only, newest_release,
                                       sdist_build_requires, sources_only_pins)
from harness.preparation.requirements import (Req, explain_conflict, failing_package, needs_building, normalise,
                                              requirement_name, resolver_summary)
from harness.preparation.resolution_fixes import IndexFacts, fixes

FORMAT = 4
#: The newest manylinux_2_<minor> that uv's --python-platform accepts.
UV_NEWEST_GLIBC_MINOR = 40
MAX_BUILD_ROUNDS = 8


class SdistBuilder(Protocol):
    """Builds sdists into wheels for the target (the engine's builder container)."""

    def build_wheels(self, sdists: list[Path], tools_dir: Path, tools_lock: str, wheel_dir: Path,
                     env: dict[str, str] | None = None) -> str: ...

    def identity(self) -> str:
        """What names the builder's content (its image's content-keyed tag)."""
        ...


#: Wheels built from sdists, shared by every wheelhouse of the cache: ``<cache>/sdist-wheels/<key>/``
#: holds the wheels one build of one sdist made (and ``COMPLETE``, written last). The key is the
#: content of everything the build used: the sdist's sha256, the target, the builder image, the
#: build tools' lock and the build's environment variables. A build of an sdist is not
#: reproducible (a wheel's sha256 differs per build), so without this each requirement set that
#: needs one built it again, and two sets resolving to the same pins locked different wheels and
#: built two environments.
SDIST_WHEELS = "sdist-wheels"


@dataclass(frozen=True)
class LocalProject:
    """The tree itself, as the resolver sees it: its name, public version and
    Requires-Dist. It takes part in resolution (so a dependency that requires the
    project, e.g. ``sphinxcontrib-applehelp`` → ``Sphinx>=5``, is checked against the
    tree instead of pulling the project from the index) and is never locked: the tree
    is installed from itself."""

    name: str
    version: str
    requires_dist: tuple[str, ...] = ()

    def stub_wheel(self, directory: Path) -> Path:
        """A metadata-only wheel of the project for ``--find-links``."""
        dist = f"{re.sub(r'[-.]+', '_', self.name)}-{self.version}"
        path = directory / f"{dist}-py2.py3-none-any.whl"
        metadata = (f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n"
                    + "".join(f"Requires-Dist: {r}\n" for r in self.requires_dist))
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(f"{dist}.dist-info/METADATA", metadata)
            archive.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: harness\n"
                                                        "Root-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n")
            archive.writestr(f"{dist}.dist-info/RECORD", "")
        return path


@dataclass(frozen=True)
class LockedWheelhouse:
    """A ready wheelhouse: ``lock_text`` has one hashed line per wheel in ``wheel_dir``."""

    directory: Path
    wheel_dir: Path
    lock_text: str
    pins: tuple[str, ...]

    @property
    def resolver_log(self) -> Path:
        return self.directory / "resolver.log"


def _uv() -> str:
    candidate = Path(sys.executable).parent / "uv"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("uv")
    if found:
        return found
    raise ImageBuildError("uv is not installed (it is a dependency of harness: reinstall the package)")


class Wheelhouse:
    def __init__(self, cache_dir: Path) -> None:
        self.root = Path(cache_dir) / "wheelhouse"
        self.lock_dir = Path(cache_dir) / "locks"

    def key(self, target: Target, requirements: list[Req], local: LocalProject | None = None,
            as_of: str = "") -> str:
        return content_hash({"format": FORMAT, "python": target.version, "glibc": target.glibc, "as_of": as_of,
                             "requirements": sorted({r.text for r in requirements}),
                             "local": [local.name, local.version, sorted(local.requires_dist)] if local else None})

    def lock(self, target: Target, requirements: list[Req], tools: list[Req],
             builder: SdistBuilder | None = None, env: dict[str, str] | None = None,
             local: LocalProject | None = None, as_of: str = "") -> LockedWheelhouse:
        """Resolve, download (building sdists in ``builder`` with ``tools``) and lock
        ``requirements`` for ``target`` (with ``local``, the tree, taking part in the
        resolution but not in the lock). Cached by the requirement set."""
        key = self.key(target, requirements, local, as_of)
        directory = self.root / f"{target.version}-{key}"
        with file_lock(self.lock_dir, f"wheelhouse-{target.version}-{key}"):
            if (directory / "COMPLETE").exists():
                return self._load(directory)
            if directory.exists():
                shutil.rmtree(directory)
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            try:
                with builds.timed("wheelhouse", directory.name):
                    self._populate(tmp, target, requirements, tools, builder, env, local, as_of)
                tmp.rename(directory)
            except BaseException as exc:
                if isinstance(exc, ImageBuildError):
                    kept = self.root / "failed" / f"{target.version}-{key}.log"
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    log = (tmp / "resolver.log").read_text(errors="replace") if (tmp / "resolver.log").exists() \
                        else ""
                    kept.write_text(log + "\n" + (exc.log or ""))
                    exc.log_path = str(kept)
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return self._load(directory)

    # ------------------------------------------------------------------ population
    def _populate(self, directory: Path, target: Target, requirements: list[Req], tools: list[Req],
                  builder: SdistBuilder | None, env: dict[str, str] | None, local: LocalProject | None,
                  as_of: str = "") -> None:
        wheels = directory / "wheels"
        built = directory / "built"
        stubs = directory / "local"
        wheels.mkdir(parents=True)
        built.mkdir()
        stubs.mkdir()
        (directory / TARGET_FILE).write_text(_target_record(target))
        asked = [r.text for r in requirements]
        if local is not None:
            local.stub_wheel(stubs)
            asked.append(f"{local.name}=={local.version}")
        log = directory / "resolver.log"
        (directory / "requirements.in").write_text("".join(f"{r.text}    # {r.origin}\n" for r in requirements))
        (directory / "origins.json").write_text(json.dumps([[r.text, r.origin] for r in requirements], indent=1))
        skipped: set[tuple[str, str]] = set()
        # exact pins with sources only are known before resolving: build them all at once
        # (the tree itself is never built here: it is installed from the tree)
        own = {normalise(local.name)} if local is not None else set()
        upfront = [(n, v) for n, v in sources_only_pins(asked, target) if not _has_wheel(built, n, v) and n not in own]
        if upfront and builder is not None:
            self._build_sdists(directory, target, upfront, tools, builder, env, log, as_of)
        for _ in range(MAX_BUILD_ROUNDS):
            ok, output = self._resolve(target, asked, [built, stubs], log, as_of)
            if ok:
                # --no-build hides releases that exist only as sources: where the newest
                # release of a pinned package is one, build it so the resolver can choose
                # it as it would with builds allowed.
                exact = {requirement_name(r) for r in asked if re.match(r"^[A-Za-z0-9._-]+(\[[^]]*\])?\s*==", r)}
                todo = [(n, v) for n, v in newer_sdist_only([p for p in output if requirement_name(p) not in exact
                                                             and requirement_name(p) not in own], target, as_of, log)
                        if not _has_wheel(built, n, v) and (n, v) not in skipped]
                if not todo or builder is None:
                    pins = output
                    break
                try:
                    self._build_sdists(directory, target, todo, tools, builder, env, log, as_of)
                except ImageBuildError as exc:
                    skipped.update(todo)
                    with log.open("a") as handle:
                        handle.write(f"# newer source-only releases not used (their build failed): {todo}: {exc}\n")
                continue
            exact, loose = needs_building(output)
            # a package none of whose versions has a wheel: its newest release (as the
            # resolver would pick it with builds allowed)
            exact += [(name, version) for name in loose
                      if (version := newest_release(name, target, as_of, sources_only=True)) is not None]
            todo = [(name, version) for name, version in exact
                    if not _has_wheel(built, name, version) and (name, version) not in skipped]
            if not todo:
                self._fail(target, requirements, output, loose, as_of)
            if builder is None:
                raise ImageBuildError(f"{', '.join(f'{n}=={v}' for n, v in todo)} has no wheel for Python "
                                      f"{target.version} and no builder is available", log=output)
            self._build_sdists(directory, target, todo, tools, builder, env, log, as_of)
        else:
            raise ImageBuildError(f"resolution for Python {target.version} still needs sdists built after "
                                  f"{MAX_BUILD_ROUNDS} rounds", log=log.read_text())
        if local is not None:
            pins = [p for p in pins if normalise(p.partition("==")[0]) != normalise(local.name)]
        (directory / "pins.txt").write_text("".join(p + "\n" for p in pins))
        for wheel in built.glob("*.whl"):
            shutil.copy2(wheel, wheels / wheel.name)
        self._download_wheels(target, [p for p in pins if not _present(wheels, p)], wheels, log)
        present = {_normalise_wheel_name(w.name): w for w in sorted(wheels.glob("*.whl"))}
        lines = []
        for pin in pins:
            name, _, version = pin.partition("==")
            wheel = present.get((normalise(name), version))
            if wheel is None:
                raise ImageBuildError(f"wheelhouse for Python {target.version} lacks {pin} after download and build "
                                      f"(package {name})", log=log.read_text())
            lines.append(f"{pin} --hash=sha256:{file_sha256(wheel)}")
        (directory / "requirements.lock").write_text("".join(line + "\n" for line in lines))
        (directory / "COMPLETE").write_text("ok\n")

    def _resolve(self, target: Target, requirements: list[str], links: list[Path], log: Path,
                 as_of: str = "") -> tuple[bool, list | str]:
        if not requirements:
            return True, []
        major, minor = (int(x) for x in target.glibc.split("."))
        glibc = f"{major}_{min(minor, UV_NEWEST_GLIBC_MINOR)}"
        cmd = [_uv(), "pip", "compile", "-", "--python-version", target.version,
               "--python-platform", f"x86_64-manylinux_{glibc}", "--no-header", "--no-annotate", "--no-config",
               "--no-build", "--no-python-downloads", "--color", "never"]
        for link in links:
            cmd += ["--find-links", str(link)]
        if as_of:
            cmd += ["--exclude-newer", f"{as_of}T00:00:00Z"]
        proc = subprocess.run(cmd, input="\n".join(requirements) + "\n", capture_output=True, text=True,
                              env={**os.environ, "UV_NO_PROGRESS": "1"})
        with log.open("a") as handle:
            handle.write(f"$ {' '.join(cmd)}\n< {' | '.join(requirements)}\n{proc.stdout}{proc.stderr}\n"
                         f"(exit {proc.returncode})\n\n")
        if proc.returncode != 0:
            return False, proc.stderr
        pins = []
        for line in proc.stdout.splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "-e")) and " @ " not in line:
                pins.append(line.split(";")[0].strip())
        return True, pins

    def _fail(self, target: Target, requirements: list[Req], output: str, loose: list[str],
              as_of: str = "") -> None:
        raise ImageBuildError(failure_message(target, requirements, output, loose, as_of, IndexReleases(target)),
                              log=output)

    def _build_sdists(self, directory: Path, target: Target, todo: list[tuple[str, str]], tools: list[Req],
                      builder: SdistBuilder, env: dict[str, str] | None, log: Path, as_of: str = "") -> None:
        sdists_dir = directory / "sdists"
        sdists_dir.mkdir(exist_ok=True)
        sdists = [download_sdist(name, version, sdists_dir, log) for name, version in todo]
        extra = sorted({r for sdist in sdists for r in sdist_build_requires(sdist)}
                       - {r.text for r in tools})
        tool_reqs = [*tools, *(Req(r, "[build-system] requires of an sdist") for r in extra
                               if requirement_name(r) not in {t.name for t in tools})]
        if any(requirement_name(r.text) in {n for n, _ in todo} for r in tool_reqs):
            raise ImageBuildError(f"the build tools themselves need building from source for Python "
                                  f"{target.version} ({', '.join(n for n, _ in todo)}): pin wheels instead")
        tool_house = self.lock(target, tool_reqs, tools, builder, env, as_of=as_of)
        built = directory / "built"
        stores = {pin: self.root.parent / SDIST_WHEELS / sdist_wheels_key(target, sdist, builder.identity(),
                                                                           tool_house.lock_text, env)
                  for pin, sdist in zip(todo, sdists)}
        reused = [pin for pin, store in stores.items() if _take_built(store, built)]
        missing = [(pin, sdist) for pin, sdist in zip(todo, sdists) if pin not in reused]
        output = ""
        if missing:
            with builds.timed("sdist", ", ".join(f"{n}=={v}" for (n, v), _ in missing)):
                output = builder.build_wheels([sdist for _, sdist in missing], tool_house.wheel_dir,
                                              tool_house.lock_text, built, env)
            for (name, version), _ in missing:
                self._keep_built(stores[(name, version)], built, name, version)
        with log.open("a") as handle:
            if reused:
                handle.write(f"# built from sdists earlier (same sdist, target, builder, tools and environment; "
                             f"{SDIST_WHEELS}/): {', '.join(f'{n}=={v}' for n, v in reused)}\n")
            if missing:
                handle.write(f"# built from sdists: {', '.join(sdist.name for _, sdist in missing)}\n{output}\n\n")

    def _keep_built(self, store: Path, built: Path, name: str, version: str) -> None:
        """The wheels of ``name==version`` just built, kept for other wheelhouses (first one wins)."""
        wheels = [w for w in built.glob("*.whl") if _normalise_wheel_name(w.name) == (normalise(name), version)]
        if not wheels:
            return  # a wheel named otherwise than its sdist: not shared, built again next time
        with file_lock(self.lock_dir, f"{SDIST_WHEELS}-{store.name}"):
            if _kept_wheels(store):
                return
            store.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=store.parent))
            for wheel in wheels:
                shutil.copy2(wheel, tmp / wheel.name)
            (tmp / "COMPLETE").write_text("".join(f"{file_sha256(tmp / w.name)}  {w.name}\n" for w in wheels))
            shutil.rmtree(store, ignore_errors=True)
            tmp.rename(store)

    def _download_wheels(self, target: Target, pins: list[str], dest: Path, log: Path) -> None:
        """Binary wheels only (``--only-binary :all:``: pip never builds here)."""
        taken = self._take_downloaded(target, pins, dest)
        if taken:
            with log.open("a") as handle:
                handle.write(f"# downloaded earlier by another wheelhouse of this target (the same file name, the "
                             f"sha256 locked there): {' '.join(taken)}\n")
        pins = [p for p in pins if p not in taken]
        if not pins:
            return
        nodot = target.minor.replace(".", "")
        args = ["--only-binary=:all:", "--python-version", target.version, "--implementation", "cp",
                "--abi", f"cp{nodot}", "--abi", f"cp{nodot}m", "--abi", "abi3", "--abi", "none"]
        for platform in target.platforms():
            args += ["--platform", platform]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
               *args, "-d", str(dest)]
        proc = subprocess.run([*cmd, *pins], capture_output=True, text=True)
        with log.open("a") as handle:
            handle.write(f"$ {' '.join(cmd)} {' '.join(pins)}\n{proc.stdout}{proc.stderr}(exit {proc.returncode})\n")
        if proc.returncode != 0:
            missing = [p for p in pins if not _present(dest, p)]
            raise ImageBuildError(f"downloading wheels for Python {target.version} failed "
                                  f"(package {failing_package(proc.stderr) or missing[0] if missing else '?'})",
                                  log=proc.stderr)

    def _take_downloaded(self, target: Target, pins: list[str], dest: Path) -> list[str]:
        """The pins another complete wheelhouse of the same target downloaded (not built), linked
        into ``dest`` when the file is still the one that wheelhouse locked. An index never serves
        two files under one name, and pip picks the same file for the same target, so the download
        would bring the same bytes again."""
        wanted = {_pin_key(p): p for p in pins}
        taken: list[str] = []
        for other in sorted(self.root.glob(f"{target.version}-*")):
            if not wanted:
                break
            if not (other / "COMPLETE").is_file() or not (other / TARGET_FILE).is_file() \
                    or (other / TARGET_FILE).read_text() != _target_record(target):
                continue
            built = {w.name for w in (other / "built").glob("*.whl")}
            locked = {_pin_key(line.split()[0]): line.rpartition("sha256:")[2]
                      for line in (other / "requirements.lock").read_text().splitlines() if "sha256:" in line}
            for wheel in sorted((other / "wheels").glob("*.whl")):
                key = _normalise_wheel_name(wheel.name)
                if key not in wanted or wheel.name in built or locked.get(key) != file_sha256(wheel):
                    continue
                try:
                    os.link(wheel, dest / wheel.name)
                except OSError:
                    shutil.copy2(wheel, dest / wheel.name)
                taken.append(wanted.pop(key))
        return taken

    def _load(self, directory: Path) -> LockedWheelhouse:
        pins = tuple(l for l in (directory / "pins.txt").read_text().splitlines() if l.strip())
        return LockedWheelhouse(directory, directory / "wheels", (directory / "requirements.lock").read_text(),
                                pins)


# ---------------------------------------------------------------------- helpers

def sdist_wheels_key(target: Target, sdist: Path, builder: str, tools_lock: str, env: dict[str, str] | None) -> str:
    """What one build of ``sdist`` into wheels depends on, as a content hash (pure)."""
    return content_hash({"format": 1, "sdist": file_sha256(sdist), "python": target.version, "glibc": target.glibc,
                         "builder": builder, "tools": tools_lock, "env": sorted((env or {}).items())})


def _kept_wheels(store: Path) -> list[str]:
    """The wheels kept in ``store``, each checked against the sha256 it was kept with; none when
    the store is incomplete or one no longer matches (then the sdist is built again)."""
    complete = store / "COMPLETE"
    if not complete.exists():
        return []
    kept = [line.split("  ", 1) for line in complete.read_text().splitlines() if line.strip()]
    if any(len(entry) != 2 or not (store / entry[1]).is_file() or file_sha256(store / entry[1]) != entry[0]
           for entry in kept):
        return []
    return [name for _, name in kept]


def _take_built(store: Path, built: Path) -> bool:
    """Copy the wheels kept in ``store`` into ``built``; False when there are none."""
    names = _kept_wheels(store)
    built.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(store / name, built / name)
    return bool(names)


#: The target a wheelhouse is for, in its directory (its name carries the Python version only).
TARGET_FILE = "target.json"


def _target_record(target: Target) -> str:
    return json.dumps({"python": target.version, "glibc": target.glibc}, sort_keys=True)


def _pin_key(pin: str) -> tuple[str, str]:
    name, _, version = pin.partition("==")
    return normalise(name), version


def _normalise_wheel_name(filename: str) -> tuple[str, str]:
    parts = filename.split("-")
    return normalise(parts[0]), parts[1] if len(parts) > 1 else ""


def _present(directory: Path, pin: str) -> bool:
    name, _, version = pin.partition("==")
    return _has_wheel(directory, normalise(name), version)


def _has_wheel(directory: Path, name: str, version: str) -> bool:
    return any(_normalise_wheel_name(w.name) == (name, version) for w in directory.glob("*.whl"))


def failure_message(target: Target, requirements: list[Req], output: str, loose: list[str], as_of: str = "",
                    facts: IndexFacts | None = None) -> str:
    """A failed resolution: the package, what to change in the spec (harness.preparation.resolution_fixes),
    both sides with their origins, and the resolver's own explanation."""
    sides = explain_conflict(output, requirements)
    package = failing_package(output)
    message = f"resolving requirements for Python {target.version} failed"
    if package:
        message += f" at package {package}"
    if loose:
        message += (f"; {', '.join(loose)} exist only as sources in the versions allowed: pin an exact version "
                    "in the spec's requirements so it can be built")
    found = fixes(output, requirements, as_of, target.version, facts)
    if found:
        message += ". To fix: " + "; ".join(found)
        # uv's own advice names one of its options, which a spec does not set
        output = re.sub(r" ?Consider using `exclude-newer-package`[^.\n]*\.", "", output)
    if sides:
        message += ". Requirements involved and where they come from: " + "; ".join(sides)
    return message + ". Resolver (uv pip compile --no-build): " + resolver_summary(output)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_PROTECTED_CACHE: dict[Path, frozenset[str]] = {}


def protected_modules(wheel_dir: Path) -> frozenset[str]:
    """Top-level module names a repository must not shadow: the standard library's and
    those of every wheel in the environment (the test runner and its plugins included)."""
    if wheel_dir not in _PROTECTED_CACHE:
        names = set(sys.stdlib_module_names) | {"pytest", "_pytest", "py", "pluggy"}
        for wheel in Path(wheel_dir).glob("*.whl"):
            try:
                with zipfile.ZipFile(wheel) as archive:
                    for entry in archive.namelist():
                        top = entry.split("/", 1)[0]
                        if top.endswith((".dist-info", ".data")):
                            continue
                        names.add(top[:-3] if top.endswith(".py") else top.split(".", 1)[0])
            except (OSError, zipfile.BadZipFile):
                continue
        _PROTECTED_CACHE[wheel_dir] = frozenset(n for n in names if n and not n.startswith("__"))
    return _PROTECTED_CACHE[wheel_dir]
