"""A scaffold pinned to an exact version, installed in a virtualenv of its own.

A pin is ``NAME==VERSION`` (``mini-swe-agent==1.15.0``) plus the exact versions it is
installed with (``litellm==1.80.0``): nothing but ``==`` and a full version is accepted, so
the same pin always names the same code. Each pin gets its own environment, keyed by its
content the way images are::

    <cache>/scaffolds/<name>-<version>-<key>/      key: the requirements, the lock's bytes,
        bin/python                                  the interpreter (implementation, X.Y,
        requirements.lock     what was installed     machine)
        pin.json              the pin, every installed package and version, how long it took

so two pins (1.15.0 and 2.x) live side by side and the harness's own dependencies never
decide the scaffold's. The environment is made on the host with uv from PyPI (containers
never get network): a pin the harness knows ships its lock (``scaffolds/locks/``, every
package with its hashes, resolved as of the day it names); another pin is resolved when it
is first installed (``uv pip compile --generate-hashes``) and that lock is kept beside it.
Either way it is installed with ``--require-hashes --no-deps`` from the lock, without
extras, and the lock is checked before anything is installed.

litellm 1.82.7 and 1.82.8 carried a credential stealer (on PyPI in March 2026): a pin, a
lock or an installed environment that holds either is refused (:data:`COMPROMISED`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InputError
from harness.hashing import content_hash

#: Versions that must never be installed, whatever asks for them: {package: {version: why}}.
COMPROMISED: dict[str, dict[str, str]] = {
    "litellm": {"1.82.7": "carried a credential stealer (PyPI, March 2026)",
                "1.82.8": "carried a credential stealer (PyPI, March 2026)"},
}
#: The scaffold a pin names when only a version is given, and the default pin.
DEFAULT_SCAFFOLD = "mini-swe-agent"
DEFAULT_PIN = "mini-swe-agent==1.15.0"
#: litellm for a mini-swe-agent version the harness has no lock for (``--scaffold-with`` overrides it).
DEFAULT_LITELLM = "1.80.0"
LOCKS_DIR = Path(__file__).resolve().parent / "scaffolds" / "locks"


@dataclass(frozen=True)
class KnownPin:
    """What the harness ships for one scaffold version: the packages it is installed with,
    the day its lock was resolved as of, and the lock file."""

    with_: tuple[str, ...]
    exclude_newer: str
    lock: str


#: The pins whose locks ship with the harness.
KNOWN: dict[tuple[str, str], KnownPin] = {
    ("mini-swe-agent", "1.15.0"): KnownPin(("litellm==1.80.0",), "2025-11-18T00:00:00Z", "mini-swe-agent-1.15.0.txt"),
}
#: How a lock is made (a pin the harness does not ship one for; ``{exclude_newer}`` only when the pin sets one).
LOCK_COMMAND = ("pip", "compile", "-", "--universal", "--python-version", "3.10", "--generate-hashes",
                "--no-header", "--no-annotate", "--quiet")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?")
_LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def normalise(name: str) -> str:
    """A package name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def exact_requirement(text: str, *, field_name: str) -> tuple[str, str]:
    """``NAME==VERSION`` -> (normalised name, version); anything looser (a range, a
    wildcard, extras, markers, a URL) is refused: a pin names one version."""
    name, sep, version = str(text).strip().partition("==")
    name, version = name.strip(), version.strip()
    if not sep or not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
        raise InputError(f"expected an exact NAME==VERSION (e.g. {DEFAULT_PIN}), got {text!r}", field=field_name)
    refuse_compromised(name, version, field_name=field_name)
    return normalise(name), version


def refuse_compromised(name: str, version: str, *, field_name: str) -> None:
    why = COMPROMISED.get(normalise(name), {}).get(version)
    if why:
        raise InputError(f"{normalise(name)}=={version} is refused: that release {why}", field=field_name)


@dataclass(frozen=True)
class ScaffoldPin:
    """One scaffold at one exact version, and the exact packages installed with it."""

    name: str
    version: str
    with_: tuple[str, ...] = ()
    #: resolve a lock as of this instant (RFC 3339), as PyPI was then; None: as it is now
    exclude_newer: str | None = None
    #: the shipped lock's file name under LOCKS_DIR (None: resolved at first install)
    lock: str | None = None

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def requirements(self) -> tuple[str, ...]:
        return (self.spec, *self.with_)

    def lock_text(self) -> str | None:
        return (LOCKS_DIR / self.lock).read_text(encoding="utf-8") if self.lock else None

    def to_json(self) -> dict:
        return {"name": self.name, "version": self.version, "spec": self.spec, "with": list(self.with_),
                "exclude_newer": self.exclude_newer, "lock": self.lock}


def parse_pin(text: str = DEFAULT_PIN, with_: tuple[str, ...] | list[str] = ()) -> ScaffoldPin:
    """``--scaffold NAME==VERSION`` (a bare version means mini-swe-agent) and
    ``--scaffold-with NAME==VERSION`` (repeatable). A known pin gets its shipped lock
    unless ``with_`` changes what it is installed with."""
    text = str(text).strip()
    if "==" not in text and _VERSION.fullmatch(text):
        text = f"{DEFAULT_SCAFFOLD}=={text}"
    name, version = exact_requirement(text, field_name="--scaffold")
    extra = tuple(f"{n}=={v}" for n, v in (exact_requirement(w, field_name="--scaffold-with") for w in with_))
    if name in {n.partition("==")[0] for n in extra}:
        raise InputError(f"--scaffold-with names the scaffold itself ({name})", field="--scaffold-with")
    known = KNOWN.get((name, version))
    if known is not None:
        given = {n.partition("==")[0]: n for n in extra}
        defaults = {n.partition("==")[0]: n for n in known.with_}
        if not extra or {**defaults, **given} == defaults:
            return ScaffoldPin(name, version, known.with_, known.exclude_newer, known.lock)
        # other packages than the shipped lock's: resolved when installed, as PyPI is then
        return ScaffoldPin(name, version, tuple(sorted({**defaults, **given}.values())))
    if name == DEFAULT_SCAFFOLD and not any(n.startswith("litellm==") for n in extra):
        extra = (*extra, f"litellm=={DEFAULT_LITELLM}")
    return ScaffoldPin(name, version, tuple(sorted(extra)))


def locked_packages(lock_text: str) -> dict[str, list[str]]:
    """{normalised name: [versions]} of a lock file (a universal lock may name one
    package at two versions, each under its own marker)."""
    found: dict[str, list[str]] = {}
    for name, version in _LOCK_LINE.findall(lock_text):
        found.setdefault(normalise(name), []).append(version)
    return found


def check_packages(packages: dict[str, list[str]] | dict[str, str], *, source: str) -> None:
    """Refuse a lock or an environment that holds a compromised release."""
    for name, versions in packages.items():
        for version in ([versions] if isinstance(versions, str) else versions):
            why = COMPROMISED.get(normalise(name), {}).get(version)
            if why:
                raise InputError(f"{source} holds {normalise(name)}=={version}, refused: that release {why}",
                                 source=source)


def interpreter_tag(python: str | None = None) -> dict:
    """What an environment's key says of its interpreter."""
    if python is None:
        return {"implementation": sys.implementation.name, "version": f"{sys.version_info[0]}.{sys.version_info[1]}",
                "machine": platform.machine()}
    out = subprocess.run([python, "-I", "-c", "import sys, platform; print(sys.implementation.name, "
                          "'%d.%d' % sys.version_info[:2], platform.machine())"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    return {"implementation": out[0], "version": out[1], "machine": out[2]}


@dataclass(frozen=True)
class ScaffoldEnvironment:
    """An installed pin: its interpreter and what is in it."""

    pin: ScaffoldPin
    root: Path
    key: str
    packages: dict[str, str] = field(default_factory=dict)
    #: seconds the install took when this call made it, else None (found in the cache)
    install_seconds: float | None = None

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def to_json(self) -> dict:
        return {**self.pin.to_json(), "key": self.key, "environment": str(self.root),
                "packages": dict(sorted(self.packages.items())), "install_seconds": self.install_seconds}


def environment_key(pin: ScaffoldPin, interpreter: dict) -> str:
    return content_hash({"requirements": list(pin.requirements), "exclude_newer": pin.exclude_newer,
                         "lock": pin.lock_text(), "interpreter": interpreter})


def ensure_environment(pin: ScaffoldPin, cache_dir: Path, *, python: str | None = None) -> ScaffoldEnvironment:
    """The pin's environment under ``cache_dir/scaffolds``, installed when missing (one
    installer at a time per pin: an inter-process lock). ``python``: the interpreter to
    base it on (default: this one's)."""
    from harness.locks import file_lock
    base = python or sys.executable
    key = environment_key(pin, interpreter_tag(python))
    root = Path(cache_dir) / "scaffolds" / f"{pin.name}-{pin.version}-{key}"
    found = _installed(pin, root, key)
    if found is not None:
        return found
    with file_lock(Path(cache_dir) / "locks", f"scaffold-{root.name}"):
        found = _installed(pin, root, key)
        if found is not None:
            return found
        return _install(pin, root, key, base)


def _installed(pin: ScaffoldPin, root: Path, key: str) -> ScaffoldEnvironment | None:
    record = root / "pin.json"
    if not record.is_file():
        return None
    data = json.loads(record.read_text(encoding="utf-8"))
    packages = data.get("packages") or {}
    check_packages(packages, source=str(root))
    return ScaffoldEnvironment(pin, root, key, packages)


def _install(pin: ScaffoldPin, root: Path, key: str, python: str) -> ScaffoldEnvironment:
    from harness.atomic import write_json_atomic, write_text_atomic
    started = time.monotonic()
    building = root.with_name(f"{root.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    uv = _uv()
    try:
        _uv_run([uv, "venv", "--relocatable", "--quiet", "--python", python, str(building)], pin)
        lock = pin.lock_text()
        if lock is None:
            command = [uv, *LOCK_COMMAND] + (["--exclude-newer", pin.exclude_newer] if pin.exclude_newer else [])
            lock = _uv_run(command, pin, stdin="\n".join(pin.requirements) + "\n")
        check_packages(locked_packages(lock), source=f"the lock of {pin.spec}")
        write_text_atomic(building / "requirements.lock", lock)
        _uv_run([uv, "pip", "install", "--python", str(building / "bin" / "python"), "--require-hashes",
                 "--no-deps", "--quiet", "-r", str(building / "requirements.lock")], pin)
        frozen = _uv_run([uv, "pip", "freeze", "--python", str(building / "bin" / "python")], pin)
        packages = {normalise(n): v for n, v in re.findall(r"^([^=\s]+)==(\S+)$", frozen, re.MULTILINE)}
        check_packages(packages, source=f"the environment of {pin.spec}")
        missing = [r for r in pin.requirements if packages.get(normalise(r.partition("==")[0])) != r.partition("==")[2]]
        if missing:
            raise InputError(f"installing {pin.spec} did not give {', '.join(missing)}", field="--scaffold")
        seconds = round(time.monotonic() - started, 3)
        write_json_atomic(building / "pin.json", {"pin": pin.to_json(), "key": key, "packages": packages,
                                                  "python": python, "install_seconds": seconds,
                                                  "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        building.rename(root)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return ScaffoldEnvironment(pin, root, key, packages, seconds)


def _uv() -> str:
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise InputError("uv is not installed (it is a dependency of harness: reinstall the package)")


def _uv_run(command: list[str], pin: ScaffoldPin, stdin: str | None = None) -> str:
    """Run uv; a failure is the pin's (not installable here), said in one message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-1500:]
        raise InputError(f"cannot install the scaffold {pin.spec} ({' '.join(command[1:3])} failed): {tail}",
                         field="--scaffold")
    return proc.stdout
