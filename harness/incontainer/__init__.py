"""Trusted files the harness puts into every sandbox (they never run on the host).

They are installed at run time, not baked into images (an edit of a reporter must not
rebuild every instance image): the evaluation's first archive call
(:func:`harness.integrity.steps.initial_files`) writes every ``*.py`` file of this package
(except this one) root-owned and read-only under :data:`TRUSTED_DIR`, where the test user
can neither change nor shadow them (``/harness`` is a root-owned tmpfs)::

    /harness/trusted/                  TRUSTED_DIR   root, 0755
        prepare.py                     set-up step (test user): reset, apply, tree truth
        launcher.py                    build step (root: the rebuild, as the test user) and test step
                                       (root): delete, seal, services, tests
        sealing.py                     the seal, bytecode purge and survey (imported by launcher.py)
    /harness/trusted/py/               PY_DIR        root, 0755; on PYTHONPATH of the test command only
        sitecustomize.py               bootstrap: audit hook, plugin pre-import, then leaves sys.path
        _harness_monitor.py            the PEP 578 tamper monitor and the evidence channel (emit)
        _harness_outcomes.py           pytest plugin: reports, where skips/xfails were raised,
                                       the results file's hash after the JUnit writer ran
        junit_reporter.py              runs unittest/sympy/django in-process, writes JUnit XML
                                       (the runners' result reporter)
        (prepare.py, launcher.py, ...) also here: every file goes to PY_DIR

Commands refer to these files through :data:`TRUSTED_DIR` / :data:`PY_DIR` (and
:func:`trusted_path`) only, never by a literal path. Files here must run on the sandbox's
Pythons (3.6+ syntax, standard library only). ``sitecustomize.py`` is the only bootstrap:
reporters must not add another.
"""

from __future__ import annotations

import functools
import hashlib

from harness import resources
from harness.hashing import content_hash

#: Where the trusted files are installed in every sandbox (the one constant to reference).
TRUSTED_DIR = "/harness/trusted"
#: The directory of the trusted Python modules (every ``*.py`` of this package).
PY_DIR = f"{TRUSTED_DIR}/py"
#: File and directory modes inside the sandbox (root-owned: the test user runs as uid 1000).
FILE_MODE = 0o444
DIR_MODE = 0o755
#: The step scripts (and what they import), also installed at the top of TRUSTED_DIR.
SCRIPTS = ("prepare.py", "launcher.py", "sealing.py")


@functools.lru_cache(maxsize=1)
def files() -> dict[str, bytes]:
    """Path relative to :data:`TRUSTED_DIR` -> bytes, for every trusted file (read once per
    process: every sandbox of a run gets the same files)."""
    out: dict[str, bytes] = {}
    for path in sorted(resources.path("incontainer").glob("*.py")):
        if path.name == "__init__.py":
            continue
        data = path.read_bytes()
        out[f"py/{path.name}"] = data
        if path.name in SCRIPTS:
            out[path.name] = data
    return out


def trusted_path(name: str) -> str:
    """The in-sandbox path of trusted module ``name`` (e.g. ``junit_reporter.py``)."""
    if f"py/{name}" not in files():
        raise KeyError(f"{name} is not a trusted in-container file (harness/incontainer/)")
    return f"{PY_DIR}/{name}"


def digest() -> str:
    """A hash of the trusted files: an input of the grading key (a changed reporter must not
    reuse results graded with the old one)."""
    return content_hash({rel: hashlib.sha256(data).hexdigest() for rel, data in files().items()}, 64)
