"""Outcome evidence from inside pytest (trusted; loaded as ``-p _harness_outcomes``).

Passive by design: it prints nothing, adds nothing to reports or to the JUnit file, and
returns None from every hook, so the repository's own tests (pytest's included) see no
difference. The bootstrap imports it before pytest starts and has every pytest session of
the process register it (:func:`install`; ``-p _harness_outcomes`` of the test command
finds the same module), so a session started by tox, by a test through ``subprocess`` or
in-process by ``pytester`` reports too. Each session is numbered in its process (``s``);
through the evidence channel (``_harness_monitor.emit``) it records:

* ``start``: whether this session writes the run's results file (``graded``: its
  ``--junitxml`` is the file the harness reads); the host grades with those sessions only;
* ``report``: every test report pytest produced (id, phase, outcome, whether xfailed), so
  the host can check the results file against what the runner itself concluded;
* ``raised``: for a report that is a skip or an xfail, where it was raised: the distinct
  working-copy files of the exception's traceback, innermost first (the host asks whether
  one of them is code the model changed), and whether the test carries an ``xfail`` marker;
* ``session``: the exit status, and at ``unconfigure`` (after the JUnit writer ran) the
  sha256 of the results file, so a file rewritten later (``atexit``) is detected;
* ``plugin_refused``: an entry point of pytest's plugin group (``pytest11``) that plugin
  autoloading found but the environment did not have when it was built (see
  :func:`guard_autoload`): it is not loaded;
* ``identity`` (``_harness_identity``): the outcome-deciding bindings of pytest, pluggy and
  this plugin (:data:`PYTEST_BINDINGS`), captured when pytest has made its first config and
  imported its own plugins (before any ``conftest.py`` or installed plugin runs), compared
  at every test's call report and, by the session that writes the results file, at
  ``unconfigure`` (``final``).

The report hook runs *first* (``tryfirst``, marked through pluggy once pytest runs):
pytest's own unittest plugin, also ``tryfirst``, replaces a ``unittest.SkipTest`` raised in
a plain test with a skip raised from pytest's code, which would hide where it came from.

Works with pytest 4 to 8 (no hook wrappers). The bootstrap imports this
module before pytest starts, so pytest must not try to rewrite its asserts (it has none;
pytest would warn that it cannot, and a repository's ``filterwarnings = error`` would make
that fatal): PYTEST_DONT_REWRITE.
"""

import os
import sys

from _harness_monitor import _STATE, emit, testbed_files

_SKIP_TYPES = ("Skipped", "XFailed", "SkipTest", "skip.Exception", "OutcomeException")
_SESSIONS = [0]
#: module -> (its names that decide outcomes or None, its classes whose methods do): what
#: runs a test, makes its report and writes the JUnit file, in pytest 3 to 8 and pluggy
#: (names a version lacks are left out)
PYTEST_BINDINGS = (
    ("_pytest.runner", ("runtestprotocol", "call_and_report", "call_runtest_hook", "check_interactive_exception",
                        "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                        "pytest_runtest_teardown", "pytest_runtest_makereport", "CallInfo", "TestReport"),
     ("CallInfo", "TestReport", "BaseReport")),
    ("_pytest.reports", ("TestReport", "BaseReport", "CollectReport"), ("TestReport", "BaseReport")),
    ("_pytest.junitxml", ("LogXML", "_NodeReporter", "bin_xml_escape"), ("LogXML", "_NodeReporter")),
    ("_pytest.skipping", ("pytest_runtest_makereport", "pytest_runtest_setup", "pytest_runtest_call",
                          "evaluate_xfail_marks", "evaluate_skip_marks", "check_xfail_no_run", "check_strict_xfail",
                          "MarkEvaluator"), ("MarkEvaluator",)),
    ("_pytest.python", ("pytest_pyfunc_call", "Function"), ("Function",)),
    ("_pytest.unittest", ("TestCaseFunction", "pytest_runtest_makereport"), ("TestCaseFunction",)),
    ("_pytest.outcomes", ("fail", "skip", "xfail", "exit", "importorskip", "Failed", "Skipped", "XFailed",
                          "OutcomeException"), ()),
    ("_pytest.main", ("pytest_runtestloop", "wrap_session"), ()),
    ("pluggy._callers", ("_multicall",), ()),
    ("pluggy.callers", ("_multicall",), ("_Result", "_LegacyMultiCall")),
    ("pluggy._result", (), ("Result", "_Result")),
    ("pluggy._hooks", (), ("HookCaller", "_HookCaller", "HookImpl")),
    ("pluggy.hooks", (), ("_HookCaller", "HookImpl")),
    ("pluggy._manager", (), ("PluginManager",)),
    ("pluggy.manager", (), ("PluginManager",)),
    ("_pytest.vendored_packages.pluggy", ("_multicall",), ("_MultiCall", "_HookCaller", "HookImpl", "_CallOutcome",
                                                           "PluginManager")),
)


def _capture_pytest():
    """Once per process, when pytest has made its first config (called from ``get_config``)."""
    identity = sys.modules.get("_harness_identity")
    if identity is None or _CAPTURED[0]:
        return
    _CAPTURED[0] = True
    owners = []
    for module_name, names, classes in PYTEST_BINDINGS:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        owners.append((module_name, module, names))
        for cls_name in classes:
            cls = getattr(module, cls_name, None)
            if isinstance(cls, type):
                owners.append((module_name + "." + cls_name, cls, None))
    owners += [("_harness_outcomes", globals(), ("emit", "testbed_files", "_has_xfail_marker", "_writes_results",
                                                 "_Session", "_STATE", "_SKIP_TYPES")),
               ("_harness_outcomes._Session", _Session, None)]
    identity.capture("pytest", owners)


_CAPTURED = [False]


def _mark_first():
    """Mark the report hook ``tryfirst`` with pytest's own marker (pytest.hookimpl is this),
    once pytest runs: pluggy is imported by then, and a process that never runs pytest
    never imports it."""
    function = _Session.__dict__["pytest_runtest_makereport"]
    if getattr(function, "pytest_impl", None) is None:
        try:
            from pluggy import HookimplMarker
            HookimplMarker("pytest")(tryfirst=True)(function)
        except Exception:   # pytest without pluggy (3.x vendored it): the order is then pytest's
            pass


def _has_xfail_marker(item):
    try:
        return any(True for _ in item.iter_markers(name="xfail"))
    except Exception:
        return getattr(item, "get_closest_marker", lambda name: None)("xfail") is not None


def _writes_results(config):
    """This session's JUnit writer writes the run's results file (an xdist worker has the
    controller's options but writes nothing)."""
    results = _STATE.get("results")
    xml = getattr(getattr(config, "option", None), "xmlpath", None)
    worker = hasattr(config, "workerinput") or hasattr(config, "slaveinput")
    return bool(results and isinstance(xml, str) and not worker
                and os.path.abspath(xml) == os.path.abspath(results))


def pytest_configure(config):
    _mark_first()
    _SESSIONS[0] += 1
    session = _Session(_SESSIONS[0], _writes_results(config))
    emit({"k": "start", "s": session.number, "graded": session.graded, "pid": os.getpid()})
    config.pluginmanager.register(session, "_harness_outcomes_session")


class _Session:
    """The hooks of one pytest session (one config)."""

    def __init__(self, number, graded):
        self.number = number
        self.graded = graded

    def pytest_runtest_makereport(self, item, call):   # tryfirst: _mark_first
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
        emit({"k": "raised", "s": self.number, "id": item.nodeid, "when": call.when,
              "exc": exc_type.__name__[:200], "files": files, "xfail_marker": _has_xfail_marker(item)})
        return None

    def pytest_runtest_logreport(self, report):
        emit({"k": "report", "s": self.number, "id": report.nodeid, "when": report.when,
              "outcome": report.outcome, "xfail": hasattr(report, "wasxfail")})
        if report.when == "call" or report.outcome != "passed":
            identity = sys.modules.get("_harness_identity")
            if identity is not None:
                identity.check(report.nodeid[:300])

    def pytest_sessionfinish(self, session, exitstatus):
        emit({"k": "session", "s": self.number, "exitstatus": int(exitstatus)})

    def pytest_unconfigure(self, config):
        if not self.graded:
            return
        identity = sys.modules.get("_harness_identity")
        if identity is not None:
            identity.final("unconfigure", self.number)
        import hashlib
        try:
            with open(_STATE["results"], "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
        except OSError:
            digest = None
        emit({"k": "results_file", "s": self.number, "sha256": digest, "pid": os.getpid()})


# --------------------------------------------------------------------------- plugin autoloading

PLUGIN_GROUP = "pytest11"
_GUARDED: list = []   # the plugin manager of the process's first config, once guarded


def guard_autoload(pluginmanager):
    """Plugin autoloading admits only the entry points the environment had when it was built.

    pytest loads every ``pytest11`` entry point of every distribution on ``sys.path``; the
    working copy is on it, and importlib.metadata and pkg_resources find a distribution's
    metadata there under any spelling (``Evil.EGG-INFO``). The built environment is what
    the test user cannot write: ``sys.path``'s directories outside the working copy that
    this user cannot write (site-packages; not the user site, not ``/tmp``), and the
    pristine tree (``_STATE["pristine"]``, root's) for the working copy's own (the
    repository's egg-info of an editable install). While pytest's own
    ``load_setuptools_entrypoints`` runs, the discovery it calls (importlib.metadata,
    importlib_metadata or pkg_resources, whichever its pluggy uses) yields only entry points
    whose name and value the built environment has; each other is named in a
    ``plugin_refused`` record and not loaded."""
    original = pluginmanager.load_setuptools_entrypoints

    def load_setuptools_entrypoints(group, *args, **kwargs):   # pluggy before 0.6 takes no name
        if group != PLUGIN_GROUP:
            return original(group, *args, **kwargs)
        code = getattr(getattr(original, "__func__", original), "__code__", None)
        if code is not None and "pkg_resources" in code.co_names:
            import pkg_resources  # noqa: F401  (pluggy before 0.12 imports it inside the call: filter it first)
        allowed = _built_entry_points(group)
        restore = _filter_discovery(group, allowed)
        try:
            return original(group, *args, **kwargs)
        finally:
            for module, attribute, value in restore:
                setattr(module, attribute, value)
    pluginmanager.load_setuptools_entrypoints = load_setuptools_entrypoints


def _ep_key(name, value):
    return str(name).strip(), str(value).split("[")[0].replace(" ", "")


def _pkg_ep_value(ep):
    return ep.module_name + (":" + ".".join(ep.attrs) if getattr(ep, "attrs", None) else "")


def _built_paths():
    testbed = _STATE.get("testbed") or "/testbed/"
    pristine = _STATE.get("pristine")
    paths = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.curdir)
        if (path + "/").startswith(testbed):
            if pristine:
                paths.append(pristine.rstrip("/") + "/" + (path + "/")[len(testbed):].rstrip("/"))
        elif os.path.isdir(path) and not os.access(path, os.W_OK):
            paths.append(path)
    return [p.rstrip("/") or "/" for p in paths]


def _built_entry_points(group):
    """(name, value) of every ``group`` entry point the built environment holds."""
    paths, found = _built_paths(), set()
    try:
        import importlib.metadata as metadata
    except ImportError:
        metadata = sys.modules.get("importlib_metadata")
    if metadata is not None:
        for dist in metadata.distributions(path=paths):
            for ep in dist.entry_points:
                if ep.group == group:
                    found.add(_ep_key(ep.name, ep.value))
    resources = sys.modules.get("pkg_resources")
    if resources is None and metadata is None:
        try:
            import pkg_resources as resources
        except Exception:
            resources = None
    if resources is not None:
        for path in paths:
            for dist in resources.find_distributions(path):
                for ep in dist.get_entry_map(group).values():
                    found.add(_ep_key(ep.name, _pkg_ep_value(ep)))
    return found


class _BuiltOnly:
    """A distribution whose ``entry_points`` of the guarded group are only the built ones."""

    def __init__(self, dist, group, allowed):
        self._dist, self._group, self._allowed = dist, group, allowed

    def __getattr__(self, attribute):
        return getattr(self._dist, attribute)

    @property
    def entry_points(self):
        kept = []
        for ep in self._dist.entry_points:
            if ep.group == self._group and _ep_key(ep.name, ep.value) not in self._allowed:
                _refused(ep.name, ep.value, getattr(self._dist, "_path", None))
                continue
            kept.append(ep)
        return kept


def _refused(name, value, where):
    emit({"k": "plugin_refused", "group": PLUGIN_GROUP, "name": str(name)[:200], "value": str(value)[:300],
          "where": str(where)[:300]})


def _filter_discovery(group, allowed):
    """Swap the discovery functions pluggy calls for filtered ones; returns what to put back."""
    restore = []
    for module_name in ("importlib.metadata", "importlib_metadata"):
        module = sys.modules.get(module_name)
        distributions = getattr(module, "distributions", None)
        if distributions is None:
            continue

        def filtered(*args, _distributions=distributions, **kwargs):
            for dist in _distributions(*args, **kwargs):
                yield _BuiltOnly(dist, group, allowed)
        restore.append((module, "distributions", distributions))
        module.distributions = filtered
    resources = sys.modules.get("pkg_resources")
    iterate = getattr(resources, "iter_entry_points", None)
    if iterate is not None:
        def iter_entry_points(group_name, name=None, _iterate=iterate):
            for ep in _iterate(group_name, name):
                if group_name == group and _ep_key(ep.name, _pkg_ep_value(ep)) not in allowed:
                    _refused(ep.name, _pkg_ep_value(ep), getattr(getattr(ep, "dist", None), "location", None))
                    continue
                yield ep
        restore.append((resources, "iter_entry_points", iterate))
        resources.iter_entry_points = iter_entry_points
    return restore


def _register_in(config_module):
    """Every config pytest makes registers this module (as pytest's own default plugins are)."""
    original = getattr(config_module, "get_config", None)
    if original is None or getattr(original, "_harness", False):
        return

    def get_config(*args, **kwargs):
        config = original(*args, **kwargs)
        try:   # pytest's own plugins are imported by now; no conftest.py, no installed plugin yet
            _capture_pytest()
        except Exception:
            pass
        try:   # before pytest's _preparse autoloads the installed plugins; only the process's
            # first config, the graded session's: a nested in-process run (pytester's inline
            # runs in pytest's own suite) autoloads inside a test, where the code under test
            # already runs, and fabricates its own entry points (pytest-11148's test
            # monkeypatches importlib.metadata.distributions with a function taking no path)
            if not _GUARDED:
                _GUARDED.append(config.pluginmanager)
                guard_autoload(config.pluginmanager)
        except Exception:
            pass
        try:
            config.pluginmanager.import_plugin(__name__)
        except Exception:
            pass
        return config
    get_config.__doc__, get_config.__wrapped__, get_config._harness = original.__doc__, original, True
    config_module.get_config = get_config


class _PytestWatcher:
    """A meta-path entry that finds nothing itself: when ``_pytest.config`` is first
    imported, it lets the usual finders find it and registers this plugin once it ran."""

    def find_spec(self, name, path=None, target=None):
        if name != "_pytest.config":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module):
            run(module)
            _register_in(module)
        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def install():
    """Called by the bootstrap."""
    if "_pytest.config" in sys.modules:
        _register_in(sys.modules["_pytest.config"])
    else:
        sys.meta_path.insert(0, _PytestWatcher())
