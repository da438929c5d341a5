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
        processes.py                   commands as the test/service user, the services (imported by launcher.py)
        evidence_channel.py            the launcher's half of the evidence channel: activation
                                       file, collecting socket (root)
        step_channel.py                the launcher's end of a step session: messages to and from
                                       the host (imported by launcher.py)
        bytecode_cache.py              root's bytecode of the bootstrap's modules (run by launcher.py,
                                       as root, with the test command's interpreter)
    /harness/trusted/py/               PY_DIR        root, 0755; never on anyone's sys.path
        _harness_boot.py               bootstrap: run by the site hook in every test process
        _harness_genuine.py            which code of the process is genuine installed code
        _harness_monitor.py            the PEP 578 tamper monitor and the evidence channel (emit)
        _harness_identity.py           the runner's outcome-deciding bindings: captured before
                                       repository code runs, compared at each outcome and the end
        _harness_outcomes.py           pytest plugin: reports, where skips/xfails were raised,
                                       the results file's hash after the JUnit writer ran
        junit_reporter.py              runs unittest/sympy/django in-process, writes JUnit XML
                                       (the runners' result reporter)
        (the top-level scripts)        also here: every file goes to PY_DIR
    /harness/bytecode/                 BYTECODE_DIR  root, 0755: ``<module>.<magic>.bin``, made while the
                                       set-up step runs (bytecode_cache.py)
    /harness/activation.json           ACTIVATION    root, 0644, only while the tests run

**The site hook** (:func:`site_hook`) is the one permanent piece: a ``.pth`` file baked into
the site-packages directory of every interpreter of an environment image. It reaches every
Python process of that environment however it was started (tox, nox, ``subprocess``,
``python -m``, whatever environment variables its parent passed) and does nothing unless
:data:`ACTIVATION` exists; then it runs :data:`BOOT`, which checks that the activation file
is root's and that the process belongs to the test user it names, and only then installs
the monitor, loads the identity registry and pre-imports the plugin. Its text never changes with the trusted files (they
are read at run time), so an edit of them rebuilds no image; changing the hook itself
rebuilds every environment image once (it is an input of their tags).

Commands refer to these files through :data:`TRUSTED_DIR` / :data:`PY_DIR` (and
:func:`trusted_path`) only, never by a literal path. Files here must run on the sandbox's
Pythons (3.6+ syntax, standard library only). ``_harness_boot.py`` is the only bootstrap:
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
#: The bootstrap the site hook runs.
BOOT = f"{PY_DIR}/_harness_boot.py"
#: Written by the launcher (root) just before the test command and removed after it: the
#: test user's uid, the evidence socket, the results file; without it the hook does nothing.
ACTIVATION = "/harness/activation.json"
#: File and directory modes inside the sandbox (root-owned: the test user runs as uid 1000).
FILE_MODE = 0o444
DIR_MODE = 0o755
#: The scripts the launcher and the set-up step run, also installed at the top of TRUSTED_DIR.
SCRIPTS = ("prepare.py", "launcher.py", "sealing.py", "processes.py", "evidence_channel.py", "step_channel.py",
           "bytecode_cache.py")
#: Root's bytecode of the bootstrap's modules, made by the launcher once per sandbox with the
#: test command's interpreter (``bytecode_cache.py``; the activation file names it).
BYTECODE_DIR = "/harness/bytecode"
#: The hook's file name: sorts before every other ``.pth`` file of a site-packages directory
#: (digits before ``_`` and letters), so it runs before any ``.pth`` an install added.
SITE_HOOK_NAME = "00-harness-bootstrap.pth"
#: One ``import`` line (what ``site`` executes from a ``.pth``; Python 3.6 to 3.13). It must
#: never raise (``site`` would print the error into the tests' output): the bootstrap runs
#: only if it is a regular file of root's that nobody else can write.
_SITE_HOOK_LINE = (
    "import os; os.path.exists(%(activation)r) and exec(%(body)r)\n"
) % {"activation": ACTIVATION, "body": (
    "try:\n"
    " p = %(boot)r\n"
    " s = os.stat(p)\n"
    " if s.st_uid == 0 and not s.st_mode & 0o022:\n"
    "  with open(p, 'rb') as f:\n"
    "   c = compile(f.read(), p, 'exec', dont_inherit=True)\n"
    "  exec(c, {'__name__': '_harness_boot', '__file__': p, '__builtins__': __builtins__})\n"
    "except Exception:\n"
    " pass\n") % {"boot": BOOT}}


def site_hook(site_packages: str) -> tuple[str, bytes]:
    """Where the hook goes for an interpreter whose site-packages directory (the one its
    ``site`` module processes ``.pth`` files from, e.g. ``sysconfig.get_paths()["purelib"]``)
    is ``site_packages``, and its content: put it there root-owned, mode 0644, in any
    environment (a venv, a conda env such as ``/opt/miniconda3/envs/testbed``, a base
    interpreter)."""
    return f"{site_packages.rstrip('/')}/{SITE_HOOK_NAME}", _SITE_HOOK_LINE.encode()


def site_hook_shell(python: str, source: str) -> str:
    """Shell for an image build step (as root): copy the hook file at ``source`` into the
    site-packages directory of the interpreter ``python``, which the interpreter itself names."""
    where = f"$({python} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
    return f'd={where} && mkdir -p "$d" && install -o 0 -g 0 -m 0644 {source} "$d/{SITE_HOOK_NAME}"'


def site_hook_digest() -> str:
    """An input of every environment image's tag (a changed hook rebuilds them)."""
    return hashlib.sha256(_SITE_HOOK_LINE.encode()).hexdigest()


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
