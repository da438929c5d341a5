"""A spec to start from, inferred from a repository's tree (``harness specs init``). Pure:
the tree's files in (a reader and the list of paths), a spec and where each of its fields
came from out; :func:`render_spec` writes it as a spec file a user reads and edits, and
``harness instances derive`` then checks it by running the tests.

What is read, as data (nothing of the tree is run):

* **Python**: the newest Python the harness builds (``images/bases.yaml`` ``pythons``)
  that the project's ``requires-python`` admits (``pyproject.toml`` ``[project]``,
  ``setup.cfg`` ``python_requires``, ``setup.py``'s ``python_requires=`` literal),
  preferring the versions the project says it supports: its ``Programming Language ::
  Python :: 3.X`` classifiers, the Python versions its CI workflows name
  (``.github/workflows/*.yml``), its tox ``envlist``;
* **build backend**: ``[build-system] build-backend`` (its ``requires`` then join the
  environment: docs/SPECS.md ``build_requires``), else setuptools for a ``setup.py`` or
  ``setup.cfg`` project; a tree with none of them is refused (:class:`NotInferable`);
* **test dependencies**: a ``test``/``tests``/``testing`` extra (``install_extras``), the
  requirement files whose name says test (``requirements*test*.txt``,
  ``requirements/*test*.txt``, ``test-requirements.txt``; ``-r`` includes followed), a
  ``[dependency-groups]`` test group, else tox's ``[testenv] deps``; pytest is added when
  none of them names it;
* **test command**: pytest (``python -m pytest -rA``), which also runs unittest-style tests;
* **install mode**: an editable install of the tree, offline, without build isolation
  and without dependencies (``install_requires_from_tree`` brings the tree's own).
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from harness.errors import InputError

#: reads one file of the tree (its text, or None when the tree has no such file)
Reader = Callable[[str], "str | None"]
TEST_EXTRAS = ("test", "tests", "testing")
TEST_COMMAND = "python -m pytest -rA"
INSTALL = "python -m pip install --no-build-isolation --no-deps -e ."
#: build backends that build without a compiler of another language
KNOWN_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__", "flit_core.buildapi",
                  "hatchling.build", "poetry.core.masonry.api", "pdm.backend", "pdm.pep517.api")
_PY_VERSION = re.compile(r"(?<![\d.])3\.(\d{1,2})(?![\d])")


class NotInferable(InputError):
    """The tree does not say something a spec needs (the message says what to add)."""


@dataclass
class Inferred:
    """A spec's ``defaults`` fields, each with the sentence saying where it came from."""

    fields: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        self.fields[name] = value
        self.sources[name] = source


def _table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``data[key]`` when it is a table, else an empty one (the tree's files are data: any shape)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _items(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def _toml(read: Reader, path: str) -> dict[str, Any]:
    text = read(path)
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NotInferable(f"{path} is not valid TOML: {exc}", field=path) from None


def _ini(read: Reader, path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    text = read(path)
    if text is not None:
        try:
            parser.read_string(text)
        except configparser.Error:
            pass  # a file configparser cannot read says nothing we can use
    return parser


def infer_spec(read: Reader, paths: Sequence[str], pythons: Sequence[str]) -> Inferred:
    """The ``defaults`` of a spec for the tree (``paths``: every file of it). Raises
    :class:`NotInferable` when the tree has no build backend to install it with, or its
    ``requires-python`` admits none of ``pythons``."""
    pyproject = _toml(read, "pyproject.toml")
    setup_cfg = _ini(read, "setup.cfg")
    setup_py = read("setup.py") or ""
    out = Inferred()
    out.set(*_python(read, paths, pyproject, setup_cfg, setup_py, pythons))
    backend, where = _backend(pyproject, setup_cfg, "setup.py" in paths)
    out.set("install", INSTALL, f"an editable install of the tree (build backend {backend}, from {where}); its "
                                f"[build-system] requires join the environment (no build_requires: read from the tree)")
    out.set("install_requires_from_tree", True, "the tree's own dependencies join the environment")
    extras, requirements, sources = _test_dependencies(read, paths, pyproject, setup_cfg)
    if extras:
        out.set("install_extras", extras, sources.pop("extras"))
    named = {Requirement(r).name.lower() for r in [*requirements, *_extra_requirements(pyproject, setup_cfg, extras)]}
    if "pytest" not in named:
        requirements.append("pytest")
        sources["pytest"] = "pytest added: no test dependency of the tree names it"
    if requirements:
        out.set("requirements", requirements, "; ".join(sources.values()))
    out.set("test_cmd", TEST_COMMAND, "pytest runs the test patch's files (pytest also runs unittest-style tests)")
    out.set("timeout", 1800, "a default: seconds the test run may take")
    return out


def _python(read: Reader, paths: Sequence[str], pyproject: Mapping[str, Any], setup_cfg: configparser.ConfigParser,
            setup_py: str, pythons: Sequence[str]) -> tuple[str, str, str]:
    project = _table(pyproject, "project")
    requires, where = None, ""
    if isinstance(project.get("requires-python"), str):
        requires, where = project["requires-python"], "pyproject.toml [project] requires-python"
    elif setup_cfg.has_option("options", "python_requires"):
        requires, where = setup_cfg.get("options", "python_requires").strip(), "setup.cfg python_requires"
    elif (match := re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", setup_py)):
        requires, where = match.group(1), "setup.py python_requires"
    try:
        allowed = SpecifierSet(requires or "")
    except InvalidSpecifier:
        raise NotInferable(f"{where} {requires!r} is not a version specifier", field=where) from None
    candidates = sorted((p for p in pythons if allowed.contains(Version(f"{p}.0"), prereleases=True)
                         or allowed.contains(Version(f"{p}.99"), prereleases=True)), key=Version)
    if not candidates:
        raise NotInferable(f"{where} {requires!r} admits none of the Pythons the harness builds "
                           f"({', '.join(pythons)}): set python: in the spec yourself", field=where)
    said, told = _said_pythons(read, paths, project, setup_cfg, setup_py)
    preferred = [p for p in candidates if p in said]
    chosen = (preferred or candidates)[-1]
    why = [f"{where} {requires!r}" if requires else "no requires-python"]
    if preferred:
        why.append(f"the project names {', '.join(sorted(set(preferred), key=Version))} ({', '.join(told)})")
    why.append("the newest of those the harness builds")
    return "python", chosen, "; ".join(why)


def _said_pythons(read: Reader, paths: Sequence[str], project: Mapping[str, Any],
                  setup_cfg: configparser.ConfigParser, setup_py: str) -> tuple[set[str], list[str]]:
    """The Python versions the project says it supports, and where it says so."""
    said: set[str] = set()
    told: list[str] = []

    def take(text: str, where: str) -> None:
        found = {f"3.{m}" for m in _PY_VERSION.findall(text)}
        if found:
            said.update(found)
            told.append(where)

    classifiers = _items(project, "classifiers")
    cfg_classifiers = setup_cfg.get("metadata", "classifiers", fallback="")
    take("\n".join(c for c in [*map(str, classifiers), *cfg_classifiers.splitlines(), *setup_py.splitlines()]
                   if "Programming Language :: Python ::" in c), "classifiers")
    for path in paths:
        if path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml")):
            text = read(path) or ""
            take("\n".join(line for line in text.splitlines() if "python" in line.lower()), path)
    envlist = _ini(read, "tox.ini").get("tox", "envlist", fallback="")
    take(" ".join(f"3.{m.group(1)[1:]}" for m in re.finditer(r"py(3\d{1,2})\b", envlist)), "tox.ini envlist")
    return said, told


def _backend(pyproject: Mapping[str, Any], setup_cfg: configparser.ConfigParser, has_setup_py: bool) -> tuple[str, str]:
    system = _table(pyproject, "build-system")
    backend = system.get("build-backend")
    if isinstance(backend, str) and backend:
        return backend, "pyproject.toml [build-system]"
    if system.get("requires") or has_setup_py or setup_cfg.has_section("metadata"):
        where = "pyproject.toml [build-system] requires" if system.get("requires") else \
            "setup.py" if has_setup_py else "setup.cfg [metadata]"
        return "setuptools.build_meta:__legacy__", where
    raise NotInferable("the build backend cannot be inferred: the tree has no [build-system] in pyproject.toml, "
                       "no setup.py and no setup.cfg [metadata]; write the spec's install: yourself",
                       field="build-system")


def _requirement_lines(read: Reader, path: str, seen: set[str]) -> list[str]:
    """The requirements of a requirements file (``-r`` includes followed in the tree,
    options, editables and local paths left out)."""
    if path in seen:
        return []
    seen.add(path)
    out: list[str] = []
    for raw in (read(path) or "").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            include = line.split(None, 1)[1].strip()
            base = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
            out += _requirement_lines(read, base + include, seen)
            continue
        if line.startswith("-") or line.startswith(".") or "://" in line:
            continue
        out.append(line)
    return out


def _valid(lines: Iterable[str]) -> list[str]:
    kept: list[str] = []
    for line in lines:
        try:
            Requirement(line)
        except InvalidRequirement:
            continue
        if line not in kept:
            kept.append(line)
    return kept


def _extra_requirements(pyproject: Mapping[str, Any], setup_cfg: configparser.ConfigParser,
                        extras: Sequence[str]) -> list[str]:
    """The requirements the tree's ``extras`` bring (pyproject.toml or setup.cfg)."""
    project = _table(pyproject, "project")
    optional = _table(project, "optional-dependencies")
    lines: list[str] = []
    for extra in extras:
        lines += [r for r in optional.get(extra) or [] if isinstance(r, str)]
        lines += setup_cfg.get("options.extras_require", extra, fallback="").splitlines()
    return _valid(line.strip() for line in lines if line.strip())


def _test_dependencies(read: Reader, paths: Sequence[str], pyproject: Mapping[str, Any],
                       setup_cfg: configparser.ConfigParser) -> tuple[list[str], list[str], dict[str, str]]:
    """(extras, requirement lines, where each kind came from)."""
    sources: dict[str, str] = {}
    project = _table(pyproject, "project")
    optional = _table(project, "optional-dependencies")
    cfg_extras = setup_cfg["options.extras_require"] if setup_cfg.has_section("options.extras_require") else {}
    extras = [e for e in TEST_EXTRAS if e in optional or e in cfg_extras][:1]
    if extras:
        sources["extras"] = (f"the tree's [{extras[0]}] extra "
                             f"({'pyproject.toml' if extras[0] in optional else 'setup.cfg'})")
    lines: list[str] = []
    files = [p for p in paths if p.endswith(".txt") and "test" in p.rsplit("/", 1)[-1].lower()
             and (p.count("/") == 0 or p.startswith("requirements/"))
             and ("requirements" in p.lower() or p.rsplit("/", 1)[-1].startswith("test"))]
    seen: set[str] = set()
    for path in sorted(files):
        lines += _requirement_lines(read, path, seen)
    if files:
        sources["files"] = f"requirements from {', '.join(sorted(files))}"
    groups = _table(pyproject, "dependency-groups")
    for name in TEST_EXTRAS:
        if isinstance(groups.get(name), list):
            lines += [g for g in groups[name] if isinstance(g, str)]
            sources["groups"] = f"pyproject.toml [dependency-groups] {name}"
            break
    if not extras and not lines:
        deps = _ini(read, "tox.ini").get("testenv", "deps", fallback="")
        tox = [d.strip() for d in deps.splitlines() if d.strip() and "{" not in d and not d.strip().startswith("-")]
        if tox:
            lines += tox
            sources["tox"] = "tox.ini [testenv] deps"
    return extras, _valid(lines), sources


def render_spec(repo: str, version: str, inferred: Inferred, commit: str) -> str:
    """The spec file: every field under a comment saying where it came from."""
    lines = [f"# {repo}: inferred by `harness specs init` from the tree at {commit}.",
             "# Each field says where it came from: read it, change what is wrong (docs/SPECS.md lists every",
             "# field), then check it by running the tests:",
             "#   harness instances derive --instances RECORDS.jsonl --out DERIVED.jsonl --specs THIS_DIRECTORY",
             f"repo: {repo}", "defaults:"]
    for name, value in inferred.fields.items():
        lines.append(f"  # {inferred.sources[name]}")
        dumped = yaml.safe_dump({name: value}, default_flow_style=False, sort_keys=False, width=1000)
        lines += [f"  {line}" for line in dumped.rstrip("\n").splitlines()]
    lines += ["versions:", f"  {yaml.safe_dump(version, default_style=chr(34)).strip().splitlines()[0]}: {{}}"]
    return "\n".join(lines) + "\n"
