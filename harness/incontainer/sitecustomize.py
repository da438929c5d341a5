"""The harness's bootstrap for the test process (trusted; root-owned, read-only).

The launcher puts this directory on ``PYTHONPATH`` of the test command only, so the
interpreter imports this ``sitecustomize`` while ``site`` initialises: after the
environment's ``.pth`` files, before the main module and before any repository code.
It then

* installs the runtime tamper monitor (a PEP 578 audit hook, which cannot be removed)
  writing to the evidence fd the launcher passed (``HARNESS_EVIDENCE_FD``);
* pre-imports the outcome-origin pytest plugin, so that ``-p _harness_outcomes`` finds
  the trusted module in ``sys.modules`` whatever the repository puts on ``sys.path``;
* takes its own directory off ``sys.path`` and ``PYTHONPATH`` (subprocesses of the
  tests start clean) and makes the evidence fd non-inheritable;
* chains to the ``sitecustomize`` it shadows (the system's), if there is one.
"""

import os
import sys


def _boot():
    here = os.path.dirname(os.path.abspath(__file__))
    fd = os.environ.pop("HARNESS_EVIDENCE_FD", None)
    options = {"results": os.environ.pop("HARNESS_RESULTS_FILE", None),
               "testbed": os.environ.pop("HARNESS_TESTBED", "/testbed"),
               "monitor": os.environ.pop("HARNESS_MONITOR", "1") == "1"}
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p and os.path.abspath(p) != here]
    if parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    if fd is not None and fd.isdigit():
        import _harness_monitor
        _harness_monitor.start(int(fd), options)
        import _harness_outcomes  # noqa: F401  (found by -p from sys.modules)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    _chain(here)


def _chain(here):
    """Run the sitecustomize this one shadows (Debian's, for instance)."""
    for directory in sys.path:
        candidate = os.path.join(directory or os.curdir, "sitecustomize.py")
        if os.path.abspath(os.path.dirname(candidate)) == here or not os.path.isfile(candidate):
            continue
        if not os.path.abspath(candidate).startswith(("/usr/", "/opt/harness/", sys.prefix, sys.base_prefix)):
            return  # never a repository's
        with open(candidate, "rb") as handle:
            code = compile(handle.read(), candidate, "exec")
        exec(code, {"__name__": "sitecustomize", "__file__": candidate})
        return


try:
    _boot()
except Exception:  # never break the interpreter the tests run in (old Pythons, odd set-ups)
    pass
