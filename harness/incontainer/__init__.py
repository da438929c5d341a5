"""Trusted files the harness puts into every sandbox (they never run on the host).

Installed by :func:`harness.integrity.sandboxing.trusted_files` through the engine's
archive API, root-owned and read-only, where the test user can neither change nor
shadow them::

    /harness/trusted/prepare.py        set-up step (test user): reset, apply, tree truth
    /harness/trusted/launcher.py       test step (root): delete, seal, re-install, services, tests
    /harness/trusted/py/               on PYTHONPATH of the test command only
        sitecustomize.py               bootstrap: audit hook, plugin pre-import, then leaves sys.path
        _harness_monitor.py            the PEP 578 tamper monitor and the evidence channel (emit)
        _harness_outcomes.py           pytest plugin: reports, where skips/xfails were raised,
                                       the results file's hash after the JUnit writer ran

Every ``*.py`` file of this package except this one goes to ``/harness/trusted/py/``;
``prepare.py`` and ``launcher.py`` also to ``/harness/trusted/``. Runner reporters (the
runners stream) may be added here the same way. Files here must run on the sandbox's
Pythons (3.6+ syntax, standard library only).
"""

import functools

from harness import resources

SCRIPTS = ("prepare.py", "launcher.py")


@functools.lru_cache(maxsize=1)
def files() -> dict[str, bytes]:
    """Relative path under /harness/trusted -> bytes, for every trusted file (read once per
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
