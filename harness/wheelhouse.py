"""Host-side wheelhouses: dependencies resolved for the *target* Python, downloaded on
the host (the only place with network), locked with hashes, and installed in images
with ``--no-index``.

Resolution uses ``uv pip compile --python-version X --python-platform ...`` so that
environment markers are evaluated for the target interpreter (``pip download
--python-version`` run from another Python silently drops marker-dependent
requirements). Source-only distributions are built into wheels inside a network-less
builder container of the target base (see :meth:`Wheelhouse.build`).

Layout (under the cache directory)::

    wheelhouse/<python>-<hash>/
        requirements.in      what was asked for
        requirements.lock    name==version --hash=sha256:... for every wheel present
        wheels/*.whl
        COMPLETE             written last: a wheelhouse without it is rebuilt
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.errors import ImageBuildError
from harness.hashing import content_hash, file_sha256
from harness.locks import file_lock

#: Called to turn a directory of sdists into wheels for the target Python
#: (implemented with a network-less container by the engine layer).
SdistBuilder = Callable[[str, Path, Path], None]


@dataclass(frozen=True)
class LockedWheelhouse:
    """A ready wheelhouse: ``lock_text`` has one hashed line per wheel in ``wheel_dir``."""

    directory: Path
    wheel_dir: Path
    lock_text: str
    pins: tuple[str, ...]


#: The newest manylinux_2_<minor> that uv's --python-platform accepts.
UV_NEWEST_GLIBC_MINOR = 40


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _uv() -> str:
    candidate = Path(sys.executable).parent / "uv"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("uv")
    if found:
        return found
    raise ImageBuildError("uv is not installed (it is a dependency of harness: reinstall the package)")


class Wheelhouse:
    def __init__(self, cache_dir: Path, glibc_by_python: dict[str, str]) -> None:
        self.root = Path(cache_dir) / "wheelhouse"
        self.lock_dir = Path(cache_dir) / "locks"
        self.glibc_by_python = glibc_by_python

    def _platforms(self, python: str) -> list[str]:
        glibc = self.glibc_by_python.get(python, "2.17")
        major, minor = (int(x) for x in glibc.split("."))
        tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 16, -1)]
        return tags + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]

    def resolve(self, python: str, requirements: list[str], tree: Path | None = None,
                env: dict[str, str] | None = None) -> list[str]:
        """Exact pins (``name==version``) for the target Python/platform, via uv.

        With ``tree``, the project's own install requirements (read from its metadata)
        are resolved together with ``requirements``; the project itself is left out.
        ``env`` is passed to the metadata build (e.g. SETUPTOOLS_SCM_PRETEND_VERSION).
        """
        if tree is not None:
            requirements = [*requirements, str(tree)]
        if not requirements:
            return []
        major, minor = (int(x) for x in self.glibc_by_python.get(python, "2.17").split("."))
        # uv names platforms up to a fixed glibc; a newer target can use any of those wheels.
        glibc = f"{major}_{min(minor, UV_NEWEST_GLIBC_MINOR)}"
        cmd = [_uv(), "pip", "compile", "-", "--python-version", python,
               "--python-platform", f"x86_64-manylinux_{glibc}", "--no-header", "--no-annotate",
               "--quiet", "--no-config"]
        import os
        proc = subprocess.run(cmd, input="\n".join(requirements) + "\n", capture_output=True, text=True,
                              env={**os.environ, **(env or {})})
        if proc.returncode != 0:
            raise ImageBuildError(f"resolving requirements for Python {python} failed: "
                                  f"{proc.stderr.strip()[-600:]}", log=proc.stderr[-8000:])
        tree_text = str(tree) if tree is not None else None
        pins = []
        for line in proc.stdout.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "-e")) or " @ " in line or line == tree_text:
                continue  # comments, and the project itself (installed from its tree)
            pins.append(line)
        return pins

    def ensure(self, python: str, requirements: list[str], build_sdists: SdistBuilder | None = None,
               tree: Path | None = None, tree_key: str = "", env: dict[str, str] | None = None
               ) -> LockedWheelhouse:
        """Resolve, download and lock ``requirements`` (and, with ``tree``, the project's
        own install requirements; ``tree_key`` is its content hash) for ``python``.
        Cached by content."""
        key = content_hash({"python": python, "requirements": sorted(requirements), "format": 2,
                            "tree": tree_key if tree is not None else None,
                            "env": sorted((env or {}).items()) if tree is not None else None})
        directory = self.root / f"{python}-{key}"
        with file_lock(self.lock_dir, f"wheelhouse-{python}-{key}"):
            if (directory / "COMPLETE").exists():
                return self._load(directory)
            if directory.exists():
                shutil.rmtree(directory)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root if self.root.exists() else None))
            try:
                self._populate(tmp, python, requirements, build_sdists, tree, env)
                self.root.mkdir(parents=True, exist_ok=True)
                tmp.rename(directory)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return self._load(directory)

    def _populate(self, directory: Path, python: str, requirements: list[str],
                  build_sdists: SdistBuilder | None, tree: Path | None = None,
                  env: dict[str, str] | None = None) -> None:
        wheels = directory / "wheels"
        wheels.mkdir(parents=True)
        (directory / "requirements.in").write_text("\n".join(requirements) + "\n")
        pins = self.resolve(python, requirements, tree, env)
        (directory / "pins.txt").write_text("\n".join(pins) + "\n")
        if pins:
            missing = self._download_wheels(python, pins, wheels)
            if missing:
                sdists = directory / "sdists"
                sdists.mkdir()
                self._download_sdists(missing, sdists)
                if build_sdists is None:
                    raise ImageBuildError(f"no wheel for Python {python} of {', '.join(missing)} "
                                          "and no builder to build their sdists")
                build_sdists(python, sdists, wheels)
        present = {}
        for wheel in sorted(wheels.glob("*.whl")):
            present[_normalise(wheel.name.split("-")[0])] = wheel
        lines = []
        for pin in pins:
            name = _normalise(pin.split("==")[0].split("[")[0])
            wheel = present.get(name)
            if wheel is None:
                raise ImageBuildError(f"wheelhouse for Python {python} lacks {pin} after download and build")
            lines.append(f"{pin} --hash=sha256:{file_sha256(wheel)}")
        (directory / "requirements.lock").write_text("\n".join(lines) + ("\n" if lines else ""))
        (directory / "COMPLETE").write_text("ok\n")

    def _pip_download(self, args: list[str]) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--quiet", *args]
        return subprocess.run(cmd, capture_output=True, text=True)

    def _download_wheels(self, python: str, pins: list[str], dest: Path) -> list[str]:
        """Download binary wheels; return the pins that have none for this target."""
        nodot = python.replace(".", "")
        target = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
                  "--abi", f"cp{nodot}", "--abi", "abi3", "--abi", "none"]
        for platform in self._platforms(python):
            target += ["--platform", platform]
        if self._pip_download([*target, "-d", str(dest), *pins]).returncode == 0:
            return []
        missing = []
        for pin in pins:  # one by one, to find which ones have no wheel
            if self._pip_download([*target, "-d", str(dest), pin]).returncode != 0:
                missing.append(pin)
        return missing

    def _download_sdists(self, pins: list[str], dest: Path) -> None:
        proc = self._pip_download(["--no-binary=:all:", "-d", str(dest), *pins])
        if proc.returncode != 0:
            raise ImageBuildError(f"downloading sources of {', '.join(pins)} failed", log=proc.stderr[-8000:])

    def _load(self, directory: Path) -> LockedWheelhouse:
        pins = tuple(l for l in (directory / "pins.txt").read_text().splitlines() if l.strip())
        return LockedWheelhouse(directory, directory / "wheels", (directory / "requirements.lock").read_text(),
                                pins)
