"""Outcome evidence from inside pytest (trusted; loaded as ``-p _harness_outcomes``).

Passive by design: it prints nothing, adds nothing to reports or to the JUnit file, and
returns None from every hook, so the repository's own tests (pytest's included) see no
difference. Through the evidence fd (``_harness_monitor.emit``) it records:

* ``report``: every test report pytest produced (id, phase, outcome, whether xfailed), so
  the host can check the results file against what the runner itself concluded;
* ``raised``: for a report that is a skip or an xfail, where it was raised: the distinct
  working-copy files of the exception's traceback, innermost first (the host asks whether
  one of them is code the model changed), and whether the test carries an ``xfail`` marker;
* ``session``: the exit status, and at ``unconfigure`` (after the JUnit writer ran) the
  sha256 of the results file, so a file rewritten later (``atexit``) is detected.

The report hook runs *first* (``tryfirst``, marked through pluggy when it is importable):
pytest's own unittest plugin, also ``tryfirst``, replaces a ``unittest.SkipTest`` raised in
a plain test with a skip raised from pytest's code, which would hide where it came from.

Works with pytest 4 to 8 (no hook wrappers). The bootstrap imports this
module before pytest starts, so pytest must not try to rewrite its asserts (it has none;
pytest would warn that it cannot, and a repository's ``filterwarnings = error`` would make
that fatal): PYTEST_DONT_REWRITE.
"""

import hashlib
import os

from _harness_monitor import _STATE, emit, testbed_files

_SKIP_TYPES = ("Skipped", "XFailed", "SkipTest", "skip.Exception", "OutcomeException")

try:  # pytest's own marker (pytest.hookimpl is this); without pluggy, no pytest to load us
    from pluggy import HookimplMarker
    _first = HookimplMarker("pytest")(tryfirst=True)
except Exception:
    def _first(function):
        return function


def _has_xfail_marker(item):
    try:
        return any(True for _ in item.iter_markers(name="xfail"))
    except Exception:
        return getattr(item, "get_closest_marker", lambda name: None)("xfail") is not None


@_first
def pytest_runtest_makereport(item, call):
    excinfo = call.excinfo
    if excinfo is None and getattr(item, "_excinfo", None):
        excinfo = item._excinfo[0]   # a unittest TestCase's outcome, before pytest moves it to call
    if excinfo is None:
        return None
    exc_type = type(excinfo.value)
    names = {cls.__name__ for cls in exc_type.__mro__}
    if names.isdisjoint(_SKIP_TYPES) and not _has_xfail_marker(item):
        return None
    files = testbed_files(excinfo.tb)
    # a unittest TestCase's skip reaches pytest re-raised as pytest's own skip, from inside
    # the handler of the original (Python 3.11+): the original's frames say where it came from
    context = getattr(excinfo.value, "__context__", None)
    if context is not None and not {c.__name__ for c in type(context).__mro__}.isdisjoint(_SKIP_TYPES):
        files = testbed_files(context.__traceback__) + [f for f in files if f]
        files = list(dict.fromkeys(files))[:64]
    emit({"k": "raised", "id": item.nodeid, "when": call.when, "exc": exc_type.__name__[:200],
          "files": files, "xfail_marker": _has_xfail_marker(item)})
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
