"""Environment specifications: per-repository YAML data under ``images/specs/``.

One file per repository; ``defaults`` is merged under every entry of ``versions``
(version keys override key by key; ``env`` dicts are merged; ``<list field>+`` *extends*
the default list instead of replacing it, e.g. ``requirements+: ["x==1"]``). List fields
may hold YAML aliases of lists (``[*common, "x==1"]`` is flattened), and top-level keys
starting with ``x-`` hold anchors and are otherwise ignored. Nothing repository-specific
lives in Python code: a user adds a repository with one file and ``--specs DIR``. A
user's file for a repository the project has is a layer over the project's, per version
and field by field (harness.inputs.spec_layers): a file holding only ``versions: {"7.2": ...}``
adds that version and leaves the others as they are. docs/SPECS.md is the guide.
Environment fields (see :class:`EnvSpec`): ``python`` and optionally ``interpreter``
(where that Python comes from, overriding ``images/bases.yaml``), ``installer`` (pip,
setuptools and wheel pins; default: bases.yaml's for the Python), ``requirements``,
``install_requires_from_tree`` with ``install_extras``, ``build_requires`` (replaces the
tree's ``[build-system] requires``), ``compiler`` (``none``/``build``/``keep``),
``submodules`` (path → OWNER/NAME of the repository providing a submodule's content),
``resolve_as_of`` (a date: unpinned requirements resolve as the index was then),
``downloads`` (files a build would fetch, fetched on the host with their sha256 checked).
Grading fields: ``canaries`` (at most that many must-fail canaries per run; 0 turns them
off for the repository, recorded in each report as ``integrity.canary_count_source``).
Example::

    repo: pallets/flask
    defaults:
      python: "3.11"
      requirements: ["pytest==7.4.4"]
      install: "python -m pip install --no-build-isolation --no-deps -e ."
      test_cmd: "pytest -rA"
      parser: pytest
    versions:
      "2.3": {requirements: ["pytest==7.4.4", "werkzeug==2.3.7"]}

A spec is looked up by (repo, instance version); a ``"*"`` version entry is the
fallback for versions no file lists.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from harness import resources
from harness.errors import InputError, UnknownNameError
from harness.inputs.spec_fields import check_cap, parse_interpreter_source, runner_fields
from harness.inputs.spec_layers import Resolved, SpecFile, listed_versions, resolve, version_order

#: Where the project's own specs and base-image definitions live: ``images/``, shipped in
#: the package (or ``$HARNESS_DATA_DIR/images``); see harness.resources. Read at import.
IMAGES_DIR = resources.images_dir()
DEFAULT_SPECS_DIR = IMAGES_DIR / "specs"

_FIELDS = {
    "python", "apt_packages", "requirements", "install_requires_from_tree", "pre_install",
    "install", "reinstall_after_patch", "reinstall", "test_cmd", "parser", "env", "services",
    "timeout", "test_directives", "setup_files", "runner_internals_allowed", "runner", "id_convention",
    "interpreter", "installer", "build_requires", "install_extras", "compiler", "reinstall_timeout",
    "compiled_sources", "submodules", "resolve_as_of", "downloads", "yield_to_tree", "build_inputs",
    "rebuild_in_place", "canaries", "cpus",
}
#: Fields that are lists of strings: a version entry may extend them with ``<name>+``.
_LIST_FIELDS = {"apt_packages", "requirements", "pre_install", "installer", "build_requires", "install_extras",
                "compiled_sources", "yield_to_tree", "build_inputs"}
_TOP_LEVEL = {"repo", "defaults", "versions"}
COMPILER_MODES = ("none", "build", "keep")
#: Sources whose change needs a rebuild of compiled extensions (``reinstall_after_patch: auto``).
DEFAULT_COMPILED_SOURCES = ("*.pyx", "*.pxd", "*.pxi", "*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.hh", "*.hpp",
                            "*.f", "*.f90", "*.F", "*.F90", "*.cu", "*.rs")


@dataclass(frozen=True)
class ServiceSpec:
    """A local stand-in started inside the container before the tests (the container
    still has no network). ``requirements`` go into the service's own virtual
    environment (``/opt/harness/services/<name>/venv``); ``build`` runs as root when the
    environment image is built (offline); ``setup`` runs as root in the sandbox before
    the tests (``net_admin`` grants the capability it needs, dropped from the bounding
    set before the tests run); ``command`` runs in the background as a separate
    unprivileged service user; ``ready`` lists ``host:port`` addresses polled until they
    accept; ``hosts`` are names aliased to 127.0.0.1."""

    name: str
    command: str
    requirements: tuple[str, ...] = ()
    build: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    ready: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    net_admin: bool = False
    env: tuple[tuple[str, str], ...] = ()
    ready_timeout: int = 60

    @property
    def venv(self) -> str:
        return f"/opt/harness/services/{self.name}/venv"


_SERVICE_FIELDS = {"name", "command", "requirements", "build", "setup", "ready", "hosts", "net_admin", "env",
                   "ready_timeout"}


def _service(raw: object, index: int, fail) -> ServiceSpec:
    where = f"services[{index}]"
    if not isinstance(raw, dict):
        raise fail(where, "must be a mapping")
    unknown = set(map(str, raw)) - _SERVICE_FIELDS
    if unknown:
        name = sorted(unknown)[0]
        close = difflib.get_close_matches(name, _SERVICE_FIELDS, n=1)
        raise fail(f"{where}.{name}", "unknown key" + (f" (did you mean {close[0]!r}?)" if close else ""))
    name, command = raw.get("name"), raw.get("command")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise fail(f"{where}.name", "must be a lower-case name")
    if not isinstance(command, str) or not command.strip():
        raise fail(f"{where}.command", "must be a non-empty string")

    def strings(key: str) -> tuple[str, ...]:
        value = raw.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"{where}.{key}", "must be a list of strings")
        return tuple(value)

    for address in strings("ready"):
        if not re.fullmatch(r"[0-9.]+:[0-9]+", address):
            raise fail(f"{where}.ready", f"{address!r} is not HOST:PORT (an IPv4 address)")
    env = raw.get("env") or {}
    if not isinstance(env, dict):
        raise fail(f"{where}.env", "must be a mapping")
    net_admin = raw.get("net_admin", False)
    if not isinstance(net_admin, bool):
        raise fail(f"{where}.net_admin", "must be true or false")
    timeout = raw.get("ready_timeout", 60)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        raise fail(f"{where}.ready_timeout", "must be a positive integer (seconds)")
    return ServiceSpec(name, command, strings("requirements"), strings("build"), strings("setup"),
                       strings("ready"), strings("hosts"), net_admin,
                       tuple(sorted((str(k), str(v)) for k, v in env.items())), timeout)


@dataclass(frozen=True)
class EnvSpec:
    """How to build and test one (repository, version).

    ``timeout`` is in seconds for the test command. ``test_directives`` chooses what is
    appended to ``test_cmd``: "test_files" (the runner's targets from the test patch:
    files, or Django's dotted labels, as SWE-bench does) or "none". ``setup_files``
    (path → text) are written into the working copy at image-build time, before
    ``pre_install`` and ``install``. ``runner`` names the test runner (harness.runners;
    default pytest), ``parser`` the result parser (default: the runner's) and
    ``id_convention`` how the dataset spelled its test ids (harness/grading/conventions.py;
    default: the runner's first).

    Environment: ``interpreter`` overrides where ``python`` comes from (a mapping as in
    images/bases.yaml ``pythons``); ``installer`` pins pip/setuptools/wheel (empty: the
    base's defaults for that Python), recorded in the lock; ``build_requires`` replaces
    the tree's ``[build-system] requires`` (None: read from the tree);
    ``install_extras`` are the extras whose requirements the tree contributes;
    ``compiler`` is "none", "build" (image builds compile, the test image has no
    compiler) or "keep" (the test image keeps it, so a patch to C sources can be
    rebuilt). ``reinstall_after_patch`` is "always", "never" or "auto" (when the patch
    touches ``compiled_sources``); the re-install runs ``reinstall`` (default: the
    ``install`` command) under ``reinstall_timeout`` seconds, and only where
    ``rebuild_in_place`` says it can: the sandbox's environment is read-only, so only a
    rebuild that writes nothing but the working copy (``build_ext --inplace``) can run there
    (harness/integrity/rebuild.py decides when it does). ``build_inputs`` are
    further files (path globs) the install builds from, e.g. a module it generates C
    from: an instance whose tree changes one is rebuilt, never an earlier one reused as is.
    ``cpus`` caps the cores the tests may use (a CFS quota; None: the engine host's cores,
    as SWE-bench's containers; with the run's ``--cpus`` the smaller wins).
    """

    repo: str
    version: str
    python: str = "3.11"
    apt_packages: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    install_requires_from_tree: bool = False
    pre_install: tuple[str, ...] = ()
    install: str = ""
    reinstall_after_patch: str = "auto"
    reinstall: str = ""
    test_cmd: str = "pytest -rA"
    runner: str = "pytest"
    parser: str = "pytest"
    id_convention: str = "pytest"
    env: tuple[tuple[str, str], ...] = ()
    services: tuple[ServiceSpec, ...] = ()
    timeout: int = 1800
    test_directives: str = "test_files"
    setup_files: tuple[tuple[str, str], ...] = ()
    runner_internals_allowed: bool = False
    interpreter: tuple[tuple[str, str], ...] = ()
    installer: tuple[str, ...] = ()
    build_requires: tuple[str, ...] | None = None
    install_extras: tuple[str, ...] = ()
    compiler: str = "none"
    reinstall_timeout: int = 900
    rebuild_in_place: bool = False
    compiled_sources: tuple[str, ...] = DEFAULT_COMPILED_SOURCES
    build_inputs: tuple[str, ...] = ()
    submodules: tuple[tuple[str, str], ...] = ()
    #: resolve unpinned requirements as the index was on this date (``uv --exclude-newer``)
    resolve_as_of: str = ""
    #: files fetched on the host (sha256 checked) and placed in the build container before
    #: the install: (url, sha256, absolute path); they reach the test image only inside the tree
    downloads: tuple[tuple[str, str, str], ...] = ()
    #: packages whose pin in ``requirements`` gives way when the tree's own requirements
    #: exclude it (as SWE-bench's ``pip install -e .`` over its environment did)
    yield_to_tree: tuple[str, ...] = ()
    #: at most this many canaries per run (0: none) for the repository, below the run's own
    #: setting (harness/integrity/canaries); None: the run's setting
    canaries: int | None = None
    #: a cap on the cores of the sandbox (harness/engine/cpus.py); None: the engine host's
    cpus: float | None = None
    #: the file and entry this spec came from (named in errors; not part of the checksum)
    source: str = field(default="", compare=False)

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def reinstall_command(self) -> str:
        return self.reinstall or self.install

    def reinstall_needed(self, touched: list[str] | tuple[str, ...]) -> bool:
        """Whether the re-install runs after a patch touching ``touched`` paths."""
        if not self.reinstall_command or self.reinstall_after_patch == "never":
            return False
        if self.reinstall_after_patch == "always":
            return True
        import fnmatch
        return any(fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
                   for path in touched for pattern in self.compiled_sources)

    @property
    def needs_net_admin(self) -> bool:
        return any(s.net_admin for s in self.services)

    @property
    def service_hosts(self) -> dict[str, str]:
        return {host: "127.0.0.1" for s in self.services for host in s.hosts}

    def checksum(self) -> str:
        data = asdict(self)
        data.pop("source", None)
        if data.get("canaries") is None:
            data.pop("canaries", None)  # unset: the checksum every earlier spec had
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=list).encode()).hexdigest()


class SpecRegistry:
    """All specs found in one or more directories, by repository name: each repository's
    files stacked as layers in load order (harness.inputs.spec_layers)."""

    def __init__(self, files_by_repo: dict[str, list[SpecFile]]) -> None:
        self._files = files_by_repo

    @classmethod
    def load(cls, *dirs: Path) -> "SpecRegistry":
        """Load every ``*.yaml``/``*.yml`` in the dirs; a later file naming a repository
        already loaded is a layer over it (per version, field by field). The first
        directory is the project's (images/specs/ in every command), the others the user's.

        Raises InputError naming the file and field for malformed specs.
        """
        files: dict[str, list[SpecFile]] = {}
        for index, d in enumerate(dirs):
            d = Path(d)
            if not d.is_dir():
                raise InputError("not a directory", source=str(d), field="--specs")
            for path in sorted([*d.glob("*.yaml"), *d.glob("*.yml")]):
                data = _read_spec_file(path)
                repo = data["repo"]
                _check_fields(data, str(path), layered=repo in files)
                files.setdefault(repo, []).append(SpecFile(str(path), index == 0, data))
        return cls(files)

    @property
    def repos(self) -> list[str]:
        return sorted(self._files)

    def files(self, repo: str) -> tuple[SpecFile, ...]:
        """The files that make up a repository's spec, in the order they are layered."""
        return tuple(self._files.get(repo, ()))

    def versions(self, repo: str) -> dict[str, list[SpecFile]]:
        """Every version a repository's files list (``*`` included), with the files listing it."""
        return listed_versions(self._files.get(repo, []))

    def resolve(self, repo: str, version: str) -> Resolved:
        """The merged fields of (repo, version) with where each came from. Raises
        UnknownNameError with close repo names, or naming the versions there are."""
        if repo not in self._files:
            close = difflib.get_close_matches(repo, self._files, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(f"no environment spec for repository {repo!r}{hint} "
                                   f"(add images/specs/{repo.replace('/', '__')}.yaml or pass --specs DIR)",
                                   field="repo")
        files = self._files[repo]
        resolved = resolve(repo, files, str(version))
        if resolved is None:
            where = " + ".join(f.path for f in files)
            raise UnknownNameError(
                f"spec {where} has no version {str(version)!r} and no '*' fallback "
                f"(versions: {', '.join(sorted(self.versions(repo), key=version_order))}); add it with "
                f"--specs DIR holding a {repo.replace('/', '__')}.yaml with only that version "
                f"(see docs/SPECS.md)", field="version")
        return resolved

    def get(self, repo: str, version: str) -> EnvSpec:
        """The spec for (repo, version). Raises UnknownNameError with close repo names."""
        resolved = self.resolve(repo, version)
        source = " + ".join(f.path for f in resolved.files)
        return _build(repo, str(version), resolved.merged, f"{source} (version {version})")


def _read_spec_file(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("repo"), str):
        raise InputError("a spec must be a mapping with a 'repo' string", source=str(path), field="repo")
    for key in sorted(set(data) - _TOP_LEVEL, key=str):
        if isinstance(key, str) and key.startswith("x-"):
            continue  # a holder of YAML anchors
        close = difflib.get_close_matches(str(key), _TOP_LEVEL, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"unknown key {key!r}{hint}", source=str(path), field=str(key))
    for section in ("defaults", "versions"):
        if not isinstance(data.get(section) or {}, dict):
            raise InputError("must be a mapping", source=str(path), field=section)
    for vkey in data.get("versions") or {}:
        if isinstance(vkey, float):  # YAML reads 1.10 as 1.1
            raise InputError(f"version key {vkey!r} must be quoted (YAML reads it as a number)",
                             source=str(path), field=f"versions.{vkey}")
    return data


def _check_fields(data: dict, source: str, layered: bool) -> None:
    """Every section's keys are fields; ``<list field>+`` extends, so it is allowed in a
    version entry and in the defaults of a file layered over another (not in a
    repository's first file's defaults: there is nothing before them to extend)."""
    sections = {"defaults": data.get("defaults") or {},
                **{f"versions.{k}": v for k, v in (data.get("versions") or {}).items()}}
    for where, entry in sections.items():
        if entry is None and where != "defaults":
            continue  # an empty version entry ("7.2":) takes everything from the layers below
        if not isinstance(entry, dict):
            raise InputError("must be a mapping", source=source, field=where)
        extends_ok = where != "defaults" or layered
        unknown = {k for k in entry if k not in _FIELDS
                   and not (extends_ok and isinstance(k, str) and k.endswith("+") and k[:-1] in _LIST_FIELDS)}
        if unknown:
            name = sorted(unknown, key=str)[0]
            close = difflib.get_close_matches(str(name).rstrip("+"), _FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if where == "defaults" and str(name).endswith("+") and str(name)[:-1] in _LIST_FIELDS:
                hint = (f": this file's defaults are the first of {data.get('repo')}, there is nothing to extend "
                        f"(write {str(name)[:-1]!r})")
            raise InputError(f"unknown key {name!r}{hint}", source=source, field=f"{where}.{name}")


def _build(repo: str, version: str, merged: dict, source: str) -> EnvSpec:
    def fail(fieldname: str, msg: str) -> InputError:
        return InputError(msg, source=source, record=f"{repo}@{version}", field=fieldname)

    def str_list(key: str) -> tuple[str, ...]:
        value = merged.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise fail(key, "must be a list of strings")
        flat: list = []
        for item in value:  # a YAML alias of a list inside a list is spliced in
            flat.extend(item if isinstance(item, list) else [item])
        if not all(isinstance(v, str) for v in flat):
            raise fail(key, "must be a list of strings")
        return tuple(flat)

    def str_map(key: str, what: str) -> tuple[tuple[str, str], ...]:
        value = merged.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
            raise fail(key, f"must be a mapping of {what}")
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))

    env = merged.get("env") or {}
    if not isinstance(env, dict):
        raise fail("env", "must be a mapping")
    setup_files = merged.get("setup_files") or {}
    if not isinstance(setup_files, dict):
        raise fail("setup_files", "must be a mapping of path to content")

    def boolean(key: str) -> bool:
        value = merged.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise fail(key, f"must be true or false, got {value!r}")
        return value

    for key in ("python", "install", "reinstall", "test_cmd", "parser", "runner", "id_convention"):
        if merged.get(key) is not None and not isinstance(merged[key], str):
            raise fail(key, f"must be a string (quote it in YAML), got {merged[key]!r}")

    timeout = merged.get("timeout", 1800)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        raise fail("timeout", "must be a positive integer (seconds)")
    python = merged.get("python") or "3.11"
    directives = merged.get("test_directives", "test_files")
    if directives not in ("test_files", "none"):
        raise fail("test_directives", "must be 'test_files' or 'none'")
    services = merged.get("services") or []
    if not isinstance(services, list):
        raise fail("services", "must be a list")
    reinstall_mode = merged.get("reinstall_after_patch", "auto")
    if isinstance(reinstall_mode, bool):
        reinstall_mode = "always" if reinstall_mode else "never"
    if not isinstance(reinstall_mode, str) or reinstall_mode not in ("always", "never", "auto"):
        raise fail("reinstall_after_patch", "must be true, false or 'auto'")
    compiler = merged.get("compiler") or "none"
    if not isinstance(compiler, str) or compiler not in COMPILER_MODES:
        raise fail("compiler", f"must be one of {', '.join(COMPILER_MODES)}")
    in_place = boolean("rebuild_in_place")
    if reinstall_mode == "always" and not in_place:
        raise fail("reinstall_after_patch", "'always' needs rebuild_in_place: true (the sandbox's environment is "
                                            "read-only: only a rebuild into the working copy can run there)")
    reinstall_timeout = merged.get("reinstall_timeout", 900)
    if not isinstance(reinstall_timeout, int) or isinstance(reinstall_timeout, bool) or reinstall_timeout <= 0:
        raise fail("reinstall_timeout", "must be a positive integer (seconds)")
    build_requires = str_list("build_requires") if merged.get("build_requires") is not None else None
    interpreter = str_map("interpreter", "source fields (see images/bases.yaml pythons)")
    if interpreter:
        try:
            parse_interpreter_source(dict(interpreter), where="interpreter")
        except InputError as exc:
            raise fail("interpreter", str(exc)) from None
    submodules = str_map("submodules", "path to OWNER/NAME")
    for path, name in submodules:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", name):
            raise fail(f"submodules.{path}", f"{name!r} is not OWNER/NAME")
    as_of = merged.get("resolve_as_of") or ""
    if not isinstance(as_of, str) or (as_of and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of)):
        raise fail("resolve_as_of", "must be a date YYYY-MM-DD (quote it in YAML)")
    downloads = []
    for index, item in enumerate(merged.get("downloads") or []):
        where = f"downloads[{index}]"
        if not isinstance(item, dict) or set(item) != {"url", "sha256", "to"}:
            raise fail(where, "must be a mapping with url, sha256 and to")
        url, digest, to = (str(item[k]) for k in ("url", "sha256", "to"))
        if not re.match(r"^https?://", url):
            raise fail(f"{where}.url", "must be an http(s) URL")
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise fail(f"{where}.sha256", "must be 64 lower-case hex digits")
        if not to.startswith("/") or ".." in to.split("/"):
            raise fail(f"{where}.to", "must be an absolute path in the build container")
        downloads.append((url, digest, to))
    installer = str_list("installer")
    for pin in installer:
        if not re.fullmatch(r"(pip|setuptools|wheel)==[A-Za-z0-9_.+!-]+", pin):
            raise fail("installer", f"{pin!r}: only exact pins of pip, setuptools and wheel (NAME==VERSION)")
    canaries = merged.get("canaries")
    if canaries is not None and (not isinstance(canaries, int) or isinstance(canaries, bool) or canaries < 0):
        raise fail("canaries", f"must be a whole number of canaries (0 turns them off), got {canaries!r}")
    runner, parser, convention = runner_fields(merged, fail)
    try:
        cpus = check_cap(merged.get("cpus"), "cpus")
    except ValueError as exc:
        raise fail("cpus", str(exc).split(": ", 1)[1]) from None
    return EnvSpec(
        repo=repo, version=version, python=python,
        apt_packages=str_list("apt_packages"), requirements=str_list("requirements"),
        install_requires_from_tree=boolean("install_requires_from_tree"),
        pre_install=str_list("pre_install"), install=str(merged.get("install") or ""),
        reinstall_after_patch=reinstall_mode,
        runner_internals_allowed=boolean("runner_internals_allowed"),
        reinstall=str(merged.get("reinstall") or ""),
        test_cmd=str(merged.get("test_cmd") or "pytest -rA"), runner=runner, parser=parser,
        id_convention=convention,
        env=tuple(sorted((str(k), str(v)) for k, v in env.items())),
        services=tuple(_service(raw, i, fail) for i, raw in enumerate(services)), timeout=timeout, test_directives=directives,
        setup_files=tuple(sorted((str(k), str(v)) for k, v in setup_files.items())),
        interpreter=interpreter, installer=installer, build_requires=build_requires,
        install_extras=str_list("install_extras"), compiler=compiler, reinstall_timeout=reinstall_timeout,
        rebuild_in_place=in_place,
        compiled_sources=str_list("compiled_sources") if merged.get("compiled_sources") else DEFAULT_COMPILED_SOURCES,
        submodules=submodules, resolve_as_of=as_of, downloads=tuple(downloads),
        yield_to_tree=str_list("yield_to_tree"), build_inputs=str_list("build_inputs"), canaries=canaries,
        cpus=cpus, source=source,
    )
