"""Build steps pyproject.toml cannot express (all declarative metadata lives there).

* Packages: harness's own, found (a new subpackage ships without editing a list), plus
  the two top-level data directories mapped into the package::

      images/     -> harness/data/images/      (package harness.data.images)
      instances/  -> harness/data/instances/   (package harness.data.instances)

  ``package_dir`` does the mapping for wheels, sdists and editable installs alike.
  harness.resources finds the files with importlib.resources.

* Package data: every file under those package directories ships (dotfiles too: the demo
  repositories' snapshots hold ``.gitignore`` files, and a missing one would change their
  commit SHAs), except caches (``__pycache__``, ``*.pyc``). Nothing to list per file: a
  stream that adds data beside its code (in-container files, the audit corpus,
  templates) gets it shipped.

* The commit: ``build_py`` (wheels) and ``sdist`` write ``harness/_build_info.json`` into
  the build tree, never into the source tree. The commit is ``$HARNESS_BUILD_COMMIT``
  when set, else ``git rev-parse HEAD`` of this directory when it is the top of a git
  work tree (with ``-dirty`` when tracked packaged files differ from it). A build from an
  unpacked sdist finds no git and keeps the file the sdist carries. harness.buildinfo
  reads it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
BUILD_INFO = Path("harness") / "_build_info.json"
DATA_PACKAGES = {"harness.data.images": "images", "harness.data.instances": "instances"}
JUNK_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})
JUNK_SUFFIXES = (".pyc", ".pyo")
#: Paths whose uncommitted changes make a build "-dirty" (what the wheel is made of).
PACKAGED_PATHS = ("harness", "images", "instances", "pyproject.toml", "setup.py")


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def build_commit() -> dict[str, str] | None:
    """The commit this build is made from, or None when nothing says."""
    given = os.environ.get("HARNESS_BUILD_COMMIT", "").strip()
    if given:
        return {"commit": given, "source": "HARNESS_BUILD_COMMIT"}
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != HERE:
        return None  # not a checkout (an unpacked sdist), or a directory inside another repository
    head = _git("rev-parse", "--verify", "HEAD^{commit}")
    if not head:
        return None
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *PACKAGED_PATHS)
    return {"commit": head + ("-dirty" if dirty else ""), "source": "git"}


def _write_build_info(root: Path) -> None:
    info = build_commit()
    target = root / BUILD_INFO
    if info is None:
        if not (HERE / BUILD_INFO).is_file() and target.is_file():
            target.unlink()  # left in the build directory by an earlier build: it would lie
        return  # keep what an unpacked sdist carries; with no file the commit is unknown
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()  # may be a hard link to the source tree's file: never write through it
    target.write_text(json.dumps(info, sort_keys=True) + "\n", encoding="utf-8")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:  # an editable install reads the checkout's git live
            _write_build_info(Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _write_build_info(Path(base_dir))


def _package_dirs() -> dict[str, Path]:
    found = find_namespace_packages(str(HERE), include=["harness", "harness.*"],
                                    exclude=["*.__pycache__", "*.__pycache__.*"])
    dirs = {name: Path(*name.split(".")) for name in found}
    dirs.update({name: Path(d) for name, d in DATA_PACKAGES.items()})
    return dirs


def _package_data(package_dirs: dict[str, Path]) -> dict[str, list[str]]:
    """Every file of each package directory that is not a module of it and does not belong
    to a nested package, as escaped relative patterns (setuptools globs them)."""
    owned = {HERE / d for d in package_dirs.values()}
    data: dict[str, list[str]] = {}
    for name, rel in package_dirs.items():
        root = HERE / rel
        files: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if d not in JUNK_DIRS and here / d not in owned)
            for filename in sorted(filenames):
                if filename.endswith(JUNK_SUFFIXES) or (here == root and filename.endswith(".py")):
                    continue  # caches; the package's own modules ship as modules
                if (here / filename).is_file():
                    files.append(glob.escape((here / filename).relative_to(root).as_posix()))
        if files:
            data[name] = files
    return data


PACKAGE_DIRS = _package_dirs()

setup(
    packages=sorted(PACKAGE_DIRS),
    package_dir=DATA_PACKAGES,
    package_data=_package_data(PACKAGE_DIRS),
    cmdclass={"build_py": BuildPy, "sdist": Sdist},
)
