"""Outcome evidence from inside pytest (trusted; loaded as ``-p _harness_outcomes``).

Passive by design: it prints nothing, adds nothing to reports or to the JUnit file, and
returns None from every hook, so the repository's own tests (pytest's included) see no
difference. Through the evidence fd (``_harness_monitor.emit``) it records:

* ``report``: every test report pytest produced (id, phase, outcome, whether xfailed), so
  the host can check the results file against what the runner itself concluded;
* ``raised``: for a report that is a skip or an xfail, where it was raised: the file of
  every frame of the exception's traceback (the host asks whether one of them is code
  the model changed), and whether the test carries an ``xfail`` marker;
* ``session``: the exit status, and at ``unconfigure`` (after the JUnit writer ran) the
  sha256 of the results file, so a file rewritten later (``atexit``) is detected.

Works with pytest 4 to 8 (plain hooks, no hook-wrapper markers). The bootstrap imports this
module before pytest starts, so pytest must not try to rewrite its asserts (it has none;
pytest would warn that it cannot, and a repository's ``filterwarnings = error`` would make
that fatal): PYTEST_DONT_REWRITE.
"""

import hashlib
import os

from _harness_monitor import _STATE, emit

_SKIP_TYPES = ("Skipped", "XFailed", "SkipTest", "skip.Exception", "OutcomeException")
_MAX_FRAMES = 64


def _frames(tb):
    files = []
    while tb is not None and len(files) < _MAX_FRAMES:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def _has_xfail_marker(item):
    try:
        return any(True for _ in item.iter_markers(name="xfail"))
    except Exception:
        return getattr(item, "get_closest_marker", lambda name: None)("xfail") is not None


def pytest_runtest_makereport(item, call):
    excinfo = call.excinfo
    if excinfo is None:
        return None
    exc_type = type(excinfo.value)
    names = {cls.__name__ for cls in exc_type.__mro__}
    if names.isdisjoint(_SKIP_TYPES) and not _has_xfail_marker(item):
        return None
    emit({"k": "raised", "id": item.nodeid, "when": call.when, "exc": exc_type.__name__,
          "files": _frames(excinfo.tb), "xfail_marker": _has_xfail_marker(item)})
    return None


def pytest_runtest_logreport(report):
    emit({"k": "report", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
          "xfail": hasattr(report, "wasxfail")})


def pytest_sessionfinish(session, exitstatus):
    emit({"k": "session", "exitstatus": int(exitstatus)})


def pytest_unconfigure(config):
    path = _STATE.get("results")
    if not path:
        return
    try:
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        digest = None
    emit({"k": "results_file", "sha256": digest, "pid": os.getpid()})
