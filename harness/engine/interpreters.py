"""Where a Python comes from: interpreter sources named by ``images/bases.yaml``
(``pythons``) or by a spec (``interpreter``).

Three kinds, each resolved to an exact version that is recorded in image labels and in
the run's manifest:

* ``{debian: SUITE}`` — Debian's own ``python3`` of that suite (bullseye 3.9, bookworm
  3.11, trixie 3.13), in the suite's bootstrapped base;
* ``{pyenv: "3.8"}`` or ``{prefix: /path}`` — a CPython install prefix on the host (a
  pyenv build, the newest ``X.Y.*`` under ``$PYENV_ROOT/versions`` for ``pyenv``; or an
  unpacked python-build-standalone archive), copied into a base of ``suite`` (default
  bookworm) at the prefix it was built for;
* ``{image: "python:3.8-slim-bookworm", prefix: /usr/local}`` — a registry image,
  pulled when a registry is reachable (or found locally), whose prefix is copied into a
  base of ``suite`` (the image's own Debian suite).

Prefix-based interpreters need their shared libraries (libssl, libffi, sqlite, ...) from
the base: the base build lists every unresolved library of the interpreter and its
extension modules (``ldd``) and fails when a module the harness relies on cannot load.

Layout of an interpreter layer (``harness-py:<version>-<hash>``, on ``harness-base``)::

    <prefix>/                 the interpreter, at the path it was built for
    /opt/harness/python.json  {"version", "executable", "prefix", "source", "unresolved_libs"}

A source's mapping form is parsed by :func:`harness.inputs.spec_fields.parse_interpreter_source`
(the inputs layer: a spec's ``interpreter`` field is checked when the spec is loaded).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ImageBuildError

#: Modules the harness and ordinary test suites rely on: the interpreter layer is refused
#: when one of them cannot be imported in the target base.
REQUIRED_MODULES = ("ssl", "sqlite3", "ctypes", "lzma", "bz2", "zlib", "hashlib", "uuid", "decimal", "json",
                    "venv", "pyexpat", "readline", "curses", "_multiprocessing")
#: Parts of a host prefix never copied into an image (the interpreter's own test suite,
#: packages installed into the prefix, static libraries, caches).
PREFIX_EXCLUDES = ("lib/python*/test", "lib/python*/site-packages/*", "lib/python*/config-*/*.a",
                   "lib/libpython*.a", "share/man", "**/__pycache__/*.opt-*.pyc")
#: Printed by a Python (run with a prefix interpreter on the host, or inside an image)
#: to describe itself.
PROBE = ("import json, platform, sys, sysconfig; print(json.dumps({'version': platform.python_version(), "
         "'prefix': sysconfig.get_config_var('prefix') or sys.prefix, 'executable': sys.executable, "
         "'soabi': sysconfig.get_config_var('SOABI')}))")


def pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def find_pyenv_prefix(version: str) -> Path:
    """The newest ``version.*`` build under ``$PYENV_ROOT/versions`` (or exactly
    ``version`` when it names a patch release)."""
    root = pyenv_root() / "versions"
    exact = root / version
    if version.count(".") == 2:
        if (exact / "bin").is_dir():
            return exact
        raise ImageBuildError(f"pyenv has no Python {version} ({exact} is absent; `pyenv install {version}`)")
    found = [Path(p) for p in glob.glob(str(root / f"{version}.*"))
             if re.fullmatch(re.escape(version) + r"\.\d+", Path(p).name) and (Path(p) / "bin").is_dir()]
    if not found:
        raise ImageBuildError(f"pyenv has no Python {version}.* under {root} "
                              f"(`pyenv install {version}` or name another interpreter source)")
    return max(found, key=lambda p: tuple(int(x) for x in p.name.split(".")))


@dataclass(frozen=True)
class HostPrefix:
    """A resolved host prefix: where it is, what it says about itself."""

    path: Path
    version: str
    build_prefix: str   # the prefix it was configured with (where it goes in the image)
    executable: str     # path of the interpreter inside the image
    fingerprint: str    # changes when the prefix's files change


def inspect_host_prefix(path: Path) -> HostPrefix:
    """Run the prefix's own interpreter on the host to learn its version and build
    prefix (a host tool chosen by the configuration, not data under test)."""
    path = Path(path)
    candidates = sorted(path.glob("bin/python3.*[0-9]")) or sorted(path.glob("bin/python3"))
    if not candidates:
        raise ImageBuildError(f"{path} holds no bin/python3.X interpreter")
    exe = candidates[0]
    proc = subprocess.run([str(exe), "-c", PROBE], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(path / "lib")})
    if proc.returncode != 0:
        raise ImageBuildError(f"{exe} does not run on the host: {proc.stderr.strip()[-400:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    build_prefix = str(info["prefix"])
    if not build_prefix.startswith("/") or build_prefix in ("/", "/usr", "/opt", "/bin", "/etc"):
        build_prefix = f"/opt/python/{info['version']}"
    return HostPrefix(path, info["version"], build_prefix, f"{build_prefix}/bin/{exe.name}",
                      _fingerprint(path))


def _fingerprint(path: Path) -> str:
    """A cheap content fingerprint of a prefix: every file's path, size and mtime."""
    import hashlib
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(full, path)}\0{st.st_size}\0{int(st.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


def prefix_excluded(relpath: str) -> bool:
    """Whether a path (relative to the prefix) stays out of the image."""
    import fnmatch
    return any(fnmatch.fnmatch(relpath, pattern) or fnmatch.fnmatch(relpath, pattern + "/*")
               for pattern in PREFIX_EXCLUDES)


def check_script(python: str, probe: str = "/tmp/probe.py") -> str:
    """Shell run when an interpreter layer is built: lists unresolved shared libraries
    of the interpreter and its extension modules, fails when a required module cannot be
    imported, and records the interpreter in /opt/harness/python.json."""
    modules = ", ".join(REQUIRED_MODULES)
    return f"""set -e
missing=$(for f in $(dirname $(dirname {python}))/lib/python*/lib-dynload/*.so $(readlink -f {python}); do
  ldd "$f" 2>/dev/null | awk '/not found/ {{print $1}}'; done | sort -u | tr '\\n' ' ')
{python} -c "import {modules}" || {{ echo "interpreter {python} cannot import a required module; unresolved libraries: $missing" >&2; exit 3; }}
{python} {probe} > /tmp/probe.json
{python} -c "import json,sys; d=json.load(open('/tmp/probe.json')); d['unresolved_libs']=sys.argv[1].split(); d['executable']='{python}'; json.dump(d, open('/opt/harness/python.json','w'))" "$missing"
rm -f /tmp/probe.json
"""
