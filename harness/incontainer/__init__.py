"""Trusted files the harness puts into every sandbox (they never run on the host).

They are installed at run time, not baked into images (an edit of a reporter must not
rebuild every instance image): one archive call per sandbox writes every ``*.py`` file of
this package (except this one) root-owned and read-only under :data:`TRUSTED_DIR`, where
the test user can neither change nor shadow them::

    /harness/trusted/            TRUSTED_DIR   root, 0755
    /harness/trusted/py/         PY_DIR        root, 0755
        junit_reporter.py                      root, 0444: runs unittest/sympy/django in-process,
                                               writes JUnit XML (the runners' result reporter)

Commands refer to these files through :data:`TRUSTED_DIR` / :data:`PY_DIR` (and
:func:`trusted_path`) only, never by a literal path. Files here must run on the sandbox's
Pythons (3.6+ syntax, standard library only).
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


@functools.lru_cache(maxsize=1)
def files() -> dict[str, bytes]:
    """Path relative to :data:`TRUSTED_DIR` -> bytes, for every trusted file (read once per
    process: every sandbox of a run gets the same files)."""
    return {f"py/{p.name}": p.read_bytes()
            for p in sorted(resources.path("incontainer").glob("*.py")) if p.name != "__init__.py"}


def trusted_path(name: str) -> str:
    """The in-sandbox path of trusted module ``name`` (e.g. ``junit_reporter.py``)."""
    if f"py/{name}" not in files():
        raise KeyError(f"{name} is not a trusted in-container file (harness/incontainer/)")
    return f"{PY_DIR}/{name}"


def digest() -> str:
    """A hash of the trusted files: an input of the grading key (a changed reporter must not
    reuse results graded with the old one)."""
    return content_hash({rel: hashlib.sha256(data).hexdigest() for rel, data in files().items()}, 64)
