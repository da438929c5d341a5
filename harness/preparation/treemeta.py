"""What a tree declares about itself, read without running it (pure).

A project whose requirements are *declared* — ``[project]`` in pyproject.toml with static
``dependencies``, or ``[options] install_requires`` in setup.cfg next to a setup.py that
passes no requirements of its own — needs no build backend to say what it requires:
:func:`static_metadata` reads it as data. Anything else (a setup.py computing its
requirements, dynamic dependencies) is read by the build backend in the builder
(:mod:`harness.engine.builder`), cached by :func:`metadata_inputs_digest`: the files a
backend reads to report requirements (setup.py, setup.cfg, pyproject.toml, requirement
files, the tree's root-level Python helpers such as ``ah_bootstrap.py``).
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

#: setup.py arguments that mean it declares requirements itself.
SETUP_PY_REQUIREMENT_WORDS = ("install_requires", "extras_require", "requires=", "setup_requires")


@dataclass(frozen=True)
class StaticMetadata:
    name: str
    version: str            # "" when not declared as data
    requires_dist: tuple[str, ...]
    source: str             # which file said so


def static_metadata(tree: Path, env: dict[str, str] | None = None) -> StaticMetadata | None:
    """The tree's name, version and Requires-Dist when they are declared as data, else None."""
    tree = Path(tree)
    env = env or {}
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text()).get("project")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = None
        if isinstance(project, dict) and isinstance(project.get("name"), str):
            dynamic = set(project.get("dynamic") or [])
            if {"dependencies", "optional-dependencies"} & dynamic:
                return None
            requires = list(project.get("dependencies") or [])
            for extra, lines in (project.get("optional-dependencies") or {}).items():
                requires += [_with_extra(line, extra) for line in lines]
            version = str(project.get("version") or "") if "version" not in dynamic else _scm_version(env)
            return StaticMetadata(project["name"], version or _module_version(tree, project["name"]),
                                  tuple(requires), "pyproject.toml [project]")
    setup_cfg, setup_py = tree / "setup.cfg", tree / "setup.py"
    if not setup_cfg.is_file():
        return None
    if setup_py.is_file():
        text = setup_py.read_text(errors="replace")
        if any(word in text for word in SETUP_PY_REQUIREMENT_WORDS):
            return None
    # setuptools reads setup.cfg with the default interpolation (extras may be "%(io)s")
    parser = configparser.ConfigParser()
    try:
        parser.read_string(setup_cfg.read_text(errors="replace"))
        if not parser.has_section("metadata") or not parser.has_option("metadata", "name"):
            return None
        name = parser.get("metadata", "name").strip()
        requires = _lines(parser.get("options", "install_requires", fallback=""))
        if parser.has_section("options.extras_require"):
            for extra, value in parser.items("options.extras_require"):
                requires += [_with_extra(line, extra) for line in _lines(value)]
        version = parser.get("metadata", "version", fallback="").strip()
    except configparser.Error:
        return None
    if any(not re.match(r"^[A-Za-z0-9]", line) for line in requires):
        return None  # not plain requirement lines: let the build backend say
    if not version or version.startswith(("attr:", "file:")):
        version = _scm_version(env) or _module_version(tree, name)
    return StaticMetadata(name, version, tuple(requires), "setup.cfg [options]")


def setup_cfg_setup_requires(tree: Path) -> list[str]:
    """``[options] setup_requires`` of setup.cfg (what a legacy build would fetch)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string((Path(tree) / "setup.cfg").read_text(errors="replace"))
    except (OSError, configparser.Error):
        return []
    return _lines(parser.get("options", "setup_requires", fallback=""))


def _lines(value: str) -> list[str]:
    out = []
    for raw in value.splitlines():
        line = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _with_extra(line: str, extra: str) -> str:
    requirement, _, marker = line.partition(";")
    clause = f'extra == "{extra}"'
    return f"{requirement.strip()}; ({marker.strip()}) and {clause}" if marker.strip() else \
        f"{requirement.strip()}; {clause}"


def _scm_version(env: dict[str, str]) -> str:
    return env.get("SETUPTOOLS_SCM_PRETEND_VERSION", "")


def _module_version(tree: Path, name: str) -> str:
    """``__version__ = "x"`` as a literal in the package's ``__init__.py`` (never imported)."""
    module = re.sub(r"[-.]", "_", name).lower()
    for candidate in (tree / module / "__init__.py", tree / "src" / module / "__init__.py",
                      tree / module / "__pkginfo__.py", tree / module / "_version.py"):
        if candidate.is_file():
            try:
                parsed = ast.parse(candidate.read_text(errors="replace"))
            except SyntaxError:
                continue
            for node in parsed.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("__version__", "version")
                                                        for t in node.targets):
                    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                        return node.value.value
    return ""


def metadata_inputs_digest(tree: Path) -> str:
    """A digest of what a build backend reads to report requirements: setup.py,
    setup.cfg, pyproject.toml, requirement files, and the other root-level Python files."""
    tree = Path(tree)
    digest = hashlib.sha256()
    paths = [p for p in sorted(tree.iterdir()) if p.is_file() and not p.is_symlink()
             and (p.suffix in (".py", ".cfg", ".toml") or p.name.startswith("requirements"))]
    if (tree / "requirements").is_dir():
        paths += sorted(p for p in (tree / "requirements").rglob("*") if p.is_file())
    for path in paths:
        digest.update(path.relative_to(tree).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]
