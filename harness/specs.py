"""Environment specifications: per-repository YAML data under ``images/specs/``.

One file per repository; ``defaults`` is merged under every entry of ``versions``
(version keys override key by key; ``env`` dicts are merged). Nothing
repository-specific lives in Python code: a user adds a repository with one file and
``--specs DIR``. Example::

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
fallback for versions not listed.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from harness import resources
from harness.errors import InputError, UnknownNameError

#: Where the project's own specs and base-image definitions live: ``images/``, shipped in
#: the package (or ``$HARNESS_DATA_DIR/images``); see harness.resources. Read at import.
IMAGES_DIR = resources.images_dir()
DEFAULT_SPECS_DIR = IMAGES_DIR / "specs"

_FIELDS = {
    "python", "apt_packages", "requirements", "install_requires_from_tree", "pre_install",
    "install", "reinstall_after_patch", "reinstall", "test_cmd", "parser", "env", "services",
    "timeout", "test_directives", "setup_files", "runner_internals_allowed", "runner", "id_convention",
}
_TOP_LEVEL = {"repo", "defaults", "versions"}


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
    """

    repo: str
    version: str
    python: str = "3.11"
    apt_packages: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    install_requires_from_tree: bool = False
    pre_install: tuple[str, ...] = ()
    install: str = ""
    reinstall_after_patch: bool = False
    reinstall: str = "python -m pip install --no-index --no-deps --no-build-isolation ."
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

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def needs_net_admin(self) -> bool:
        return any(s.net_admin for s in self.services)

    @property
    def service_hosts(self) -> dict[str, str]:
        return {host: "127.0.0.1" for s in self.services for host in s.hosts}

    def checksum(self) -> str:
        data = asdict(self)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=list).encode()).hexdigest()


class SpecRegistry:
    """All specs found in one or more directories, by repository name."""

    def __init__(self, raw_by_repo: dict[str, tuple[dict, str]]) -> None:
        self._raw = raw_by_repo

    @classmethod
    def load(cls, *dirs: Path) -> "SpecRegistry":
        """Load every ``*.yaml``/``*.yml`` in the dirs; later dirs override earlier ones.

        Raises InputError naming the file and field for malformed specs.
        """
        raw: dict[str, tuple[dict, str]] = {}
        for d in dirs:
            d = Path(d)
            if not d.is_dir():
                raise InputError("not a directory", source=str(d), field="--specs")
            for path in sorted([*d.glob("*.yaml"), *d.glob("*.yml")]):
                try:
                    data = yaml.safe_load(path.read_text(encoding="utf-8"))
                except yaml.YAMLError as exc:
                    raise InputError(f"invalid YAML: {exc}", source=str(path)) from None
                if not isinstance(data, dict) or not isinstance(data.get("repo"), str):
                    raise InputError("a spec must be a mapping with a 'repo' string", source=str(path),
                                     field="repo")
                for key in sorted(set(data) - _TOP_LEVEL, key=str):
                    close = difflib.get_close_matches(str(key), _TOP_LEVEL, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise InputError(f"unknown key {key!r}{hint}", source=str(path), field=str(key))
                for section in ("defaults", "versions"):
                    if not isinstance(data.get(section, {}), dict):
                        raise InputError("must be a mapping", source=str(path), field=section)
                for vkey in data.get("versions", {}):
                    if isinstance(vkey, float):  # YAML reads 1.10 as 1.1
                        raise InputError(f"version key {vkey!r} must be quoted (YAML reads it as a number)",
                                         source=str(path), field=f"versions.{vkey}")
                for vkey, vval in {"defaults": data.get("defaults", {}),
                                   **{f"versions.{k}": v for k, v in data.get("versions", {}).items()}}.items():
                    if not isinstance(vval, dict):
                        raise InputError("must be a mapping", source=str(path), field=vkey)
                    unknown = set(vval) - _FIELDS
                    if unknown:
                        name = sorted(unknown, key=str)[0]
                        close = difflib.get_close_matches(str(name), _FIELDS, n=1)
                        hint = f" (did you mean {close[0]!r}?)" if close else ""
                        raise InputError(f"unknown key {name!r}{hint}", source=str(path),
                                         field=f"{vkey}.{name}")
                raw[data["repo"]] = (data, str(path))
        return cls(raw)

    @property
    def repos(self) -> list[str]:
        return sorted(self._raw)

    def get(self, repo: str, version: str) -> EnvSpec:
        """The spec for (repo, version). Raises UnknownNameError with close repo names."""
        if repo not in self._raw:
            close = difflib.get_close_matches(repo, self._raw, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(f"no environment spec for repository {repo!r}{hint} "
                                   f"(add images/specs/{repo.replace('/', '__')}.yaml or pass --specs DIR)",
                                   field="repo")
        data, source = self._raw[repo]
        versions = {str(k): v for k, v in (data.get("versions") or {}).items()}
        entry = versions.get(str(version), versions.get("*"))
        if entry is None:
            raise UnknownNameError(
                f"spec {source} has no version {version!r} and no '*' fallback "
                f"(versions: {', '.join(sorted(versions))})", field="version")
        merged = dict(data.get("defaults") or {})
        for key, value in entry.items():
            if key == "env" and isinstance(value, dict):
                merged["env"] = {**(merged.get("env") or {}), **value}
            else:
                merged[key] = value
        return _build(repo, str(version), merged, source)


def _build(repo: str, version: str, merged: dict, source: str) -> EnvSpec:
    def fail(fieldname: str, msg: str) -> InputError:
        return InputError(msg, source=source, record=f"{repo}@{version}", field=fieldname)

    def str_list(key: str) -> tuple[str, ...]:
        value = merged.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, "must be a list of strings")
        return tuple(value)

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
    runner, parser, convention = _runner_fields(merged, fail)
    return EnvSpec(
        repo=repo, version=version, python=python,
        apt_packages=str_list("apt_packages"), requirements=str_list("requirements"),
        install_requires_from_tree=boolean("install_requires_from_tree"),
        pre_install=str_list("pre_install"), install=str(merged.get("install") or ""),
        reinstall_after_patch=boolean("reinstall_after_patch"),
        runner_internals_allowed=boolean("runner_internals_allowed"),
        reinstall=str(merged.get("reinstall") or EnvSpec.reinstall),
        test_cmd=str(merged.get("test_cmd") or "pytest -rA"), runner=runner, parser=parser,
        id_convention=convention,
        env=tuple(sorted((str(k), str(v)) for k, v in env.items())),
        services=tuple(_service(raw, i, fail) for i, raw in enumerate(services)), timeout=timeout, test_directives=directives,
        setup_files=tuple(sorted((str(k), str(v)) for k, v in setup_files.items())),
    )


def _runner_fields(merged: dict, fail) -> tuple[str, str, str]:
    """``runner``, ``parser`` and ``id_convention``, checked against each other: the parser
    must read what the runner writes and the runner must address the convention's ids."""
    from harness.errors import UnknownNameError
    from harness.grading.conventions import get_convention
    from harness.runners import get_runner
    try:
        runner = get_runner(str(merged.get("runner") or "pytest"))
        parser = str(merged.get("parser") or runner.default_parser)
        convention = get_convention(str(merged.get("id_convention") or runner.default_convention)).name
    except UnknownNameError as exc:
        message = str(exc).split(": ", 1)[-1] if exc.field else str(exc)
        raise fail(exc.field or "runner", message) from None
    if parser not in runner.parsers:
        raise fail("parser", f"{parser!r} does not read what the {runner.name} runner writes "
                             f"(use one of: {', '.join(runner.parsers)})")
    if convention not in runner.conventions:
        raise fail("id_convention", f"the {runner.name} runner cannot address {convention!r} test ids "
                                    f"(it addresses: {', '.join(runner.conventions)})")
    problem = runner.check_test_cmd(str(merged.get("test_cmd") or "pytest -rA"))
    if problem:
        raise fail("test_cmd", problem)
    return runner.name, parser, convention
