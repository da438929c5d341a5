"""What the harness restores, deletes and seals before the tests run (pure).

Everything is decided from the *tree truth* (what the patch actually changed), the test
patch, the run's test files and the pristine tree's layout:

* **test material**: the test patch's files, and everything under a *test directory*
  (the topmost ancestor of a test file named like ``test*``/``*tests``/``testing``; a
  test file elsewhere counts alone). A model change there is reverted (restored from
  the pristine tree, or deleted when the pristine tree has no such file);
* **test infrastructure**: files that steer the runner (``conftest.py``, ``pytest.ini``,
  ``sitecustomize``, ``*.pth``, the runner's own top-level names), a shared configuration
  file (``setup.cfg``, ``tox.ini``, ``pyproject.toml``) whose runner section the model
  changed (:func:`steers_runner`: another section, such as a dependency list, is the
  project's and stays), and install metadata, matched as the loaders match it
  (:func:`is_install_metadata`: case-insensitive suffixes, ``*.egg-info``,
  ``*.dist-info``, ``*.egg-link``, ``*.egg``, ``__editable__*``): reverted likewise.
  Only test code is restored: the package markers restored are the test directories'
  own (under a test directory); a library package's ``__init__.py`` above the tests is
  library code and stays (issue 36: matplotlib's reference patches change
  ``lib/matplotlib/__init__.py``);
* **shadowing**: a new module or package, on a directory that ends up on the tests'
  ``sys.path`` (the root, ``src``, and each test file's *base directory*: the first
  directory above it without an ``__init__.py``, which pytest's rootdir insertion puts
  there), named like a module of the standard library, of the environment, or of the
  repository itself: deleted;
* **seal**: the test directories (recursively), the infrastructure files and
  ``__init__.py`` files of their ancestors, and the test files become root-owned and not
  writable by the test user; every sealed directory, the ancestors of the tests included
  (the root too), becomes root-owned and sticky (1777): the tests may create files and
  directories anywhere (honest tests write fixtures, temp trees and caches beside
  themselves) but cannot modify, rename, replace or delete what is sealed. What they create
  is surveyed after the run and judged (harness/integrity/evidence.py: planted test
  infrastructure, entries shadowing a sealed module); harness/incontainer/sealing.py says
  what holds in the sandbox.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from harness.integrity.tree import TreeTruth
from harness.patches import matches_any

#: Files that steer the test runner (the shared configuration files too: :data:`SHARED_CONFIG`).
TEST_INFRA_PATTERNS = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
                       "setup.cfg", "pyproject.toml", "noxfile.py", "sitecustomize.py", "usercustomize.py",
                       "*.pth")
#: Install metadata: entry points here load plugins at start-up. importlib.metadata and
#: pkg_resources find these by a lower-cased suffix (and a name normalised apart from it),
#: so they are matched case-insensitively: ``Evil.EGG-INFO`` is metadata too.
INSTALL_METADATA_SUFFIXES = (".egg-info", ".dist-info", ".egg-link", ".egg")
INSTALL_METADATA_PREFIXES = ("__editable__",)
INSTALL_METADATA = ("*.egg-info", "*.dist-info", "*.egg-link", "*.egg", "__editable__*")
#: Configuration files a runner shares with the project: restored only when the runner's
#: own section changed (:func:`steers_runner`)
SHARED_CONFIG = frozenset({"setup.cfg", "tox.ini", "pyproject.toml"})
#: Top-level names in the repository that would shadow the runner itself.
ROOT_SHADOW_NAMES = frozenset({"pytest.py", "py.py", "_pytest", "pytest", "pluggy", "pluggy.py"})
#: Names of directories that hold tests (the topmost one on a test file's path is sealed whole).
TEST_DIR_PATTERNS = ("test", "tests", "testing", "test_*", "*_tests", "*_test")
#: Files at an ancestor of the tests that are sealed when present (read by runners at start).
ANCESTOR_FILES = ("conftest.py", "__init__.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
                  "tox.ini", "setup.cfg", "pyproject.toml")


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def ancestors(path: str) -> list[str]:
    """Directories from the root ("") down to path's parent."""
    parts = path.split("/")[:-1]
    return [""] + ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def find_tests_root(path: str) -> str | None:
    """The topmost ancestor directory of a test file named like a test directory."""
    for directory in ancestors(path)[1:]:
        if any(fnmatch.fnmatch(posixpath.basename(directory), p) for p in TEST_DIR_PATTERNS):
            return directory
    return None


def under(path: str, directory: str) -> bool:
    return directory == "" or path == directory or path.startswith(directory + "/")


def is_install_metadata(path: str) -> bool:
    """A path in or of a distribution's metadata, spelled any way the loaders accept."""
    for part in path.split("/"):
        low = part.lower()
        if low.endswith(INSTALL_METADATA_SUFFIXES) or low.startswith(INSTALL_METADATA_PREFIXES):
            return True
    return False


def base_dir(path: str, packages: frozenset[str]) -> str:
    """The directory pytest's rootdir insertion puts on ``sys.path`` for test file ``path``:
    the first directory above it that is not a package (no ``__init__.py`` in ``packages``)."""
    directory = parent(path)
    while directory and directory + "/__init__.py" in packages:
        directory = parent(directory)
    return directory


_SECTION = re.compile(r"^\[([^\]]*)\]")
_RUNNER_WORD = re.compile(r"pytest", re.I)


def steers_runner(path: str, before: bytes | None, after: bytes | None) -> bool:
    """Whether a change to a shared configuration file (``setup.cfg``, ``tox.ini``,
    ``pyproject.toml``) can change what the test runner does: its runner section differs,
    or either version cannot be read the way the runner reads it (then the whole file is
    restored, as before). Unknown content (None) steers; a file the pristine tree lacks
    is ``b""``."""
    if before is None or after is None:
        return True
    try:
        old, new = before.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return True
    if posixpath.basename(path) == "pyproject.toml":
        import tomllib
        try:
            old_tool, new_tool = tomllib.loads(old).get("tool"), tomllib.loads(new).get("tool")
        except (tomllib.TOMLDecodeError, ValueError):
            return True
        pick = lambda tool: tool.get("pytest") if isinstance(tool, dict) else tool  # noqa: E731
        return pick(old_tool) != pick(new_tool) or _runner_lines(old) != _runner_lines(new)
    return _runner_lines(old) != _runner_lines(new)


def _runner_lines(text: str) -> list[str]:
    """The lines of an INI text a runner reads: the sections whose header (a ``[`` at the
    start of a line: iniconfig's and configparser's rule) names pytest, the lines before
    the first section, and any other line that spells a bracketed runner name (a header
    some reader might take)."""
    out, inside = [], True
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            inside = bool(_RUNNER_WORD.search(header.group(1)))
        if inside or ("[" in line and _RUNNER_WORD.search(line)):
            out.append(line)
    return out


def project_modules(pristine_paths: Iterable[str], test_dirs: Iterable[str] = ()) -> frozenset[str]:
    """Top-level modules and packages of the repository itself (root and ``src/`` layouts)."""
    names = set()
    excluded = set(test_dirs)
    for path in pristine_paths:
        parts = path.split("/")
        for base in ((), ("src",)):
            rest = parts[len(base):]
            if tuple(parts[:len(base)]) != base or not rest:
                continue
            if len(rest) == 1 and rest[0].endswith(".py") and rest[0] not in ("setup.py", "conftest.py"):
                names.add(rest[0][:-3])
            elif len(rest) == 2 and rest[1] == "__init__.py" and "/".join((*base, rest[0])) not in excluded:
                names.add(rest[0])
    return frozenset(n for n in names if n.isidentifier())


@dataclass
class Plan:
    """The host's decisions; ``restore`` paths are put back from the pristine tree in the
    sandbox (deleted when it has none), ``delete`` paths removed."""

    restore: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    touched_tests: list[str] = field(default_factory=list)
    touched_infra: list[str] = field(default_factory=list)
    shadows: list[str] = field(default_factory=list)
    model_files: list[str] = field(default_factory=list)   # the model's changes that stay
    seal_trees: list[str] = field(default_factory=list)
    seal_dirs: list[str] = field(default_factory=list)
    seal_files: list[str] = field(default_factory=list)
    sticky: list[str] = field(default_factory=list)


def make_plan(tree: TreeTruth, test_patch_paths: Iterable[str], test_files: Iterable[str],
              pristine_paths: frozenset[str], protected: frozenset[str], restore_infra: bool = True,
              runner_infra: Iterable[str] = (), pristine_bytes: Callable[[str], bytes | None] | None = None) -> Plan:
    """``runner_infra``: the test runner's own files in the repository (harness.runners:
    ``Runner.infra_patterns``), restored like conftest.py and sealed during the run;
    ``pristine_bytes``: a path's bytes at the base commit (None: absent), to tell a change
    to a shared configuration file's runner section from one to the project's (without it,
    every change to such a file is restored)."""
    test_patch_paths = set(test_patch_paths)
    runner_infra = frozenset(runner_infra)
    test_files = sorted(set(test_files) | {p for p in test_patch_paths if p.endswith(".py")})
    roots = sorted({r for r in (find_tests_root(f) for f in (*test_files, *test_patch_paths)) if r})
    test_anc = sorted({a for f in (*test_files, *test_patch_paths) for a in ancestors(f)})
    shadowed_names = protected | project_modules(pristine_paths, roots)
    # the base directories as the pristine tree has them and as the patch leaves them (a
    # package marker it adds above the tests moves one up: both are on the path somewhere)
    created_markers = {c.path for c in tree.changes if c.change == "created" and c.path.endswith("/__init__.py")}
    packages = frozenset(p for p in pristine_paths if p.endswith("__init__.py")) | test_patch_paths
    import_roots = {"", "src"} | {base_dir(f, packages) for f in test_files} | {
        base_dir(f, packages | created_markers) for f in test_files}
    changes_by_path = tree.by_path()

    def is_test_material(path: str) -> bool:
        return path in test_patch_paths or path in test_files or any(under(path, r) for r in roots)

    def is_infra(path: str) -> bool:
        if posixpath.basename(path) in SHARED_CONFIG and path not in runner_infra:
            change = changes_by_path.get(path)
            if change is None or not change.exists_after:
                return True
            before = b"" if path not in pristine_paths else pristine_bytes(path) if pristine_bytes else None
            return steers_runner(path, before, change.content)
        return (matches_any(path, TEST_INFRA_PATTERNS) or path.split("/", 1)[0] in ROOT_SHADOW_NAMES
                or posixpath.basename(path).lower().endswith(".pth")
                or is_install_metadata(path) or path in runner_infra)

    def shadow_root(path: str) -> str | None:
        """The created module/package path that shadows a protected name, if any."""
        parts = path.split("/")
        for depth in range(len(parts)):
            directory = "/".join(parts[:depth])
            if directory not in import_roots and not (directory == "" and depth == 0):
                continue
            name = parts[depth]
            leaf = depth == len(parts) - 1
            module = name[:-3] if leaf and name.endswith(".py") else (None if leaf else name)
            if module and module in shadowed_names:
                return "/".join(parts[:depth + 1])
        return None

    plan = Plan()
    created = {c.path for c in tree.changes if c.change == "created"}
    restore, delete = set(), set()
    for change in tree.changes:
        path = change.path
        if change.kind == "dir" and change.change in ("created", "deleted", "mode"):
            continue  # directories follow their files; sealed ones get their modes set anyway
        top = shadow_root(path) if path in created else None
        if top is not None and (top in created or top == path):
            plan.shadows.append(top)
        if is_test_material(path):
            plan.touched_tests.append(path)
            if is_infra(path):
                plan.touched_infra.append(path)
            if path not in test_patch_paths:
                restore.add(path)
            continue
        if is_infra(path):
            plan.touched_infra.append(path)
            if restore_infra:
                restore.add(path)
            continue
        if top is not None and (top in created or top == path):
            delete.add(top)
            continue
        plan.model_files.append(path)
    # a created directory of test material or install metadata goes as a whole when
    # everything in it goes (files are attributed to their ancestors: linear, not quadratic)
    created_dirs = {c.path for c in tree.changes if c.change == "created" and c.kind == "dir"}
    contents: dict[str, list[str]] = {}
    for change in tree.changes:
        if change.kind == "dir":
            continue
        for directory in ancestors(change.path)[1:]:
            if directory in created_dirs:
                contents.setdefault(directory, []).append(change.path)
    for directory, inside in contents.items():
        if (is_test_material(directory) or is_install_metadata(directory)) and all(
                p in created and (p in restore or p in delete) for p in inside):
            delete.add(directory)
    plan.delete = _outermost(delete)
    deleted = set(plan.delete)
    plan.restore = sorted(p for p in restore if not any(a in deleted for a in ancestors(p)[1:]) and p not in deleted)
    plan.shadows = sorted(set(plan.shadows))
    plan.touched_tests = sorted(set(plan.touched_tests))
    plan.touched_infra = sorted(set(plan.touched_infra))

    plan.seal_trees = roots
    plan.sticky = [a for a in test_anc if not any(under(a, r) for r in roots)]
    plan.seal_files = sorted({*test_files, *(p for p in test_patch_paths), *(runner_infra & pristine_paths),
                              *(posixpath.join(a, name) if a else name for a in plan.sticky for name in ANCESTOR_FILES)})
    return plan


def _outermost(paths: set[str]) -> list[str]:
    """The paths none of whose ancestors is in the set (linear in the set's size)."""
    return sorted(p for p in paths if not any(a in paths for a in ancestors(p)[1:]))
