"""Run a test command in this process and record each test's outcome as JUnit XML.

Installed root-owned and read-only into every sandbox at run time (under
harness.incontainer.PY_DIR); the harness starts the test command through it:

    python PY_DIR/junit_reporter.py --framework sympy|unittest \\
        --junit RESULTS.xml -- SCRIPT ARGS...        (or: -- -m MODULE ARGS...)

The command runs exactly as it would on its own (same argv, same exit code, same output);
outcomes are taken from the framework's own result objects, not from its printed text:

* ``unittest`` (plain unittest, Django's runtests.py): every ``unittest.TestResult`` add*
  call; the label the text runner prints (``getDescription``) is kept as a property;
* ``sympy`` (bin/test): sympy's ``SymPyTests.test_file`` and ``PyTestReporter`` callbacks,
  patched when sympy's runtests module is imported.

Outcome origins (the evidence the pytest plugin ``_harness_outcomes`` gives for pytest):
for every skip and expected failure that an exception caused, one ``raised`` record goes
through the harness's evidence channel (``_harness_monitor.emit``) with the test's native
id, the distinct working-copy files of that exception's traceback, innermost first
(``files``; the host asks whether one of them is a file the model changed, exactly as for
pytest) and the innermost of them (``where``, relative). A skip that no exception caused
(a ``@skip`` decorator) has no frames and no record. After writing the results file the reporter
emits its sha256 (``results_file``), so a file rewritten later (``atexit``) is detected.

Runner identity (``_harness_identity``): the patched result and reporter classes, the
classes of the runner that decide outcomes (unittest's ``TestCase``, ``_Outcome``; sympy's
``SymPyTests``, ``Reporter``, ``PyTestReporter``) and this module's own functions are
captured right after they are patched (unittest: before the command starts; sympy: as soon
as its runner module has executed), compared at every outcome with the result or reporter
object in hand (an instance attribute shadowing an outcome method, or a reporter whose class
was swapped, counts) and once more before the results file is written (``final``).

A test module that fails to import is written as a testcase with an ``error`` of type
``collection``; a class whose ``setUpClass`` (or a module whose ``setUpModule``) raised
``SkipTest`` has each of its tests written as skipped, with the skip's origin, never as a
collection failure. A sympy test that passed as an expected failure (``XPass``) is written
passed, and its ``raised`` record says ``xpass``. Only the process that started writes the file (a forked child does not).
Standard library only; runs on the environment's Python (3.6 or newer).
"""

import atexit
import importlib.abc
import inspect
import os
import re
import runpy
import sys
import time
import xml.etree.ElementTree as ElementTree

_MAIN_PID = os.getpid()
_CWD = os.getcwd()
_RECORDS = []           # dicts: file, cls, name, status, message, label, seconds
_COLLECTION = []        # dicts: file, message
_INVALID_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd]")
_state = {"junit": None, "written": False}


def _clean(text, limit=2000):
    text = text if isinstance(text, str) else repr(text)
    return _INVALID_XML.sub("?", text)[:limit]


def _relpath(path):
    if not path:
        return ""
    try:
        return os.path.relpath(os.path.abspath(path), _CWD).replace(os.sep, "/")
    except ValueError:
        return path


def _exc_message(exc_info):
    try:
        exc_type, value = exc_info[0], exc_info[1]
        return "%s: %s" % (getattr(exc_type, "__name__", exc_type), value)
    except Exception:  # a hostile __str__ must not stop the run
        return "<unprintable exception>"


def raised(test_id, status, exc_type, tb, marker=False):
    """Record where the exception behind a skip or an expected failure was raised: the
    working-copy files of its traceback, innermost first (``_harness_monitor.testbed_files``)."""
    try:
        import _harness_monitor
    except ImportError:  # no bootstrap, no evidence channel
        return
    files = _harness_monitor.testbed_files(tb)
    _harness_monitor.emit({"k": "raised", "id": test_id, "when": "call", "status": status,
                           "exc": getattr(exc_type, "__name__", "?")[:200], "files": files,
                           "where": _relpath(files[0]) if files else None, "xfail_marker": marker})


def record(file, cls, name, status, message="", label=None, seconds=0.0):
    _RECORDS.append({"file": file, "cls": cls, "name": name, "status": status, "message": message,
                     "label": label, "seconds": seconds})


def _identity():
    return sys.modules.get("_harness_identity")


def _check_identity(instance, exact=False):
    """At an outcome: compare the runner's bindings (never stops the run)."""
    identity = _identity()
    if identity is not None:
        try:
            identity.check("outcome", instance, exact)
        except Exception:
            pass


def _capture(runner, owners):
    identity = _identity()
    if identity is None:
        return
    own = ("record", "raised", "write_junit", "_exc_message", "_relpath", "_clean", "_check_identity", "_identity",
           "_RECORDS", "_COLLECTION", "_state")
    try:
        identity.capture(runner, list(owners) + [("junit_reporter", globals(), own)])
    except Exception:
        pass


def write_junit():
    path = _state["junit"]
    if path is None or os.getpid() != _MAIN_PID or _state["written"]:
        return
    _state["written"] = True
    identity = _identity()
    if identity is not None:
        try:
            identity.final("write_junit")
        except Exception:
            pass
    suite = ElementTree.Element("testsuite", name="harness", tests=str(len(_RECORDS)))
    for rec in _COLLECTION:
        case = ElementTree.SubElement(suite, "testcase", classname="", name="", file=_clean(rec["file"]))
        ElementTree.SubElement(case, "error", type="collection", message=_clean(rec["message"]))
    for rec in _RECORDS:
        module = rec["file"][:-3].replace("/", ".") if rec["file"].endswith(".py") else rec["file"]
        classname = ".".join(p for p in (module, rec["cls"]) if p)
        case = ElementTree.SubElement(suite, "testcase", classname=_clean(classname), name=_clean(rec["name"]),
                                      file=_clean(rec["file"]), time="%.3f" % rec["seconds"])
        if rec["label"] is not None:
            props = ElementTree.SubElement(case, "properties")
            ElementTree.SubElement(props, "property", name="label", value=_clean(rec["label"]))
        status, message = rec["status"], _clean(rec["message"])
        if status == "failed":
            ElementTree.SubElement(case, "failure", message=message)
        elif status == "error":
            ElementTree.SubElement(case, "error", message=message)
        elif status == "skipped":
            ElementTree.SubElement(case, "skipped", message=message)
        elif status == "xfail":
            ElementTree.SubElement(case, "skipped", type="pytest.xfail", message=message)
    data = ElementTree.tostring(suite, encoding="utf-8")
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    try:  # the evidence channel, when the harness's bootstrap provides it
        import hashlib
        import _harness_monitor
        _harness_monitor.emit({"k": "results_file", "sha256": hashlib.sha256(data).hexdigest(), "pid": os.getpid()})
    except Exception:  # at exit: never change the command's exit status
        pass


# --------------------------------------------------------------------------- unittest

def install_unittest():
    import contextlib
    import unittest.case
    import unittest.result

    base = unittest.result.TestResult
    started = {}
    pending = {}   # id(test) -> (type, traceback) of the SkipTest one of its parts raised

    # Every part of a test (setUp, the method, tearDown, cleanups) runs inside
    # _Outcome.testPartExecutor, which swallows SkipTest; before Python 3.11 addSkip is
    # called only after the exception is gone, so its traceback is taken here, on its way.
    outcome_cls = getattr(unittest.case, "_Outcome", None)
    original_executor = getattr(outcome_cls, "testPartExecutor", None)
    if original_executor is not None:
        @contextlib.contextmanager
        def part_executor(self, test_case, *args, **kwargs):
            with original_executor(self, test_case, *args, **kwargs):
                try:
                    yield
                except unittest.case.SkipTest as exc:
                    pending[id(test_case)] = (type(exc), exc.__traceback__)
                    raise
        outcome_cls.testPartExecutor = part_executor

    def ident(test):
        cls = type(test)
        if cls.__name__ == "_FailedTest":  # unittest.loader: the module did not import
            return None
        try:
            source = inspect.getsourcefile(cls) or sys.modules[cls.__module__].__file__
        except (TypeError, KeyError, AttributeError):
            source = ""
        name = getattr(test, "_testMethodName", None) or str(test)
        return _relpath(source), cls.__qualname__.replace(".", "::"), name

    def wrap(method_name, status_of):
        original = getattr(base, method_name)

        def patched(self, test, *args):
            _check_identity(self)
            try:
                _note(self, test, status_of(test, *args), args)
            except Exception:
                pass
            return original(self, test, *args)
        setattr(base, method_name, patched)

    def _note(result, test, status, args):
        if status is None:
            return
        key = id(test)
        skip_exc = pending.pop(key, None)
        begun, label = started.pop(key, (time.time(), None))
        if label is None:
            label = _label(result, test)
        message = _exc_message(args[0]) if args and isinstance(args[0], tuple) else (
            _clean(args[0]) if args else "")
        if type(test).__name__ == "_ErrorHolder" and status == "skipped" and fixture["of"] is not None:
            # a setUpClass/setUpModule that raised SkipTest skips its tests: each is recorded
            # as skipped when the suite passes it by (_handleClassSetUp/_handleModuleFixture)
            exc_type, _, tb = sys.exc_info()
            fixture_skips[fixture["of"]] = (message, exc_type, tb)
            return
        found = ident(test)
        if found is None or type(test).__name__ == "_ErrorHolder":
            # an import failure (_FailedTest) or a setUpClass/setUpModule error (_ErrorHolder)
            where = getattr(test, "_testMethodName", None) or getattr(test, "description", str(test))
            _COLLECTION.append({"file": str(where), "message": message})
            return
        file, cls, name = found
        record(file, cls, name, status, message, label, time.time() - begun)
        test_id = "::".join(p for p in (file, cls, name) if p)
        if status == "skipped":
            # Python 3.11+ calls addSkip while handling the SkipTest; older ones later
            current = sys.exc_info()
            if skip_exc is None and current[0] is not None and issubclass(current[0], unittest.case.SkipTest):
                skip_exc = current[0], current[2]
            if skip_exc is not None:
                raised(test_id, status, skip_exc[0], skip_exc[1])
        elif status == "xfail" and args and isinstance(args[0], tuple) and len(args[0]) == 3:
            raised(test_id, status, args[0][0], args[0][2], marker=True)

    def _label(result, test):
        try:
            describe = getattr(result, "getDescription", None)
            return describe(test) if describe else str(test)
        except Exception:
            return None

    # A class whose setUpClass (or a module whose setUpModule) raised SkipTest: unittest
    # reports one skip for an _ErrorHolder and then passes each of its tests by without a
    # word; each is a skipped test (never a collection failure: a skip is a skip).
    import unittest.suite
    suite_cls = unittest.suite.TestSuite
    fixture = {"of": None}
    fixture_skips = {}     # class or ("module", name) -> (message, exception type, traceback)
    skipped_by_fixture = set()

    def skip_passed_by(result, test, owner):
        if owner not in fixture_skips or id(test) in skipped_by_fixture:
            return
        found = ident(test)
        if found is None:
            return
        skipped_by_fixture.add(id(test))
        message, exc_type, tb = fixture_skips[owner]
        file, cls, name = found
        record(file, cls, name, "skipped", message, _label(result, test), 0.0)
        if exc_type is not None:
            raised("::".join(p for p in (file, cls, name) if p), "skipped", exc_type, tb)

    original_class_setup = getattr(suite_cls, "_handleClassSetUp", None)
    original_module_fixture = getattr(suite_cls, "_handleModuleFixture", None)
    if original_class_setup is not None and original_module_fixture is not None:
        def handle_class_setup(self, test, result):
            fixture["of"] = test.__class__
            try:
                return original_class_setup(self, test, result)
            finally:
                fixture["of"] = None
                try:
                    if getattr(test.__class__, "_classSetupFailed", False):
                        skip_passed_by(result, test, test.__class__)
                except Exception:
                    pass

        def handle_module_fixture(self, test, result):
            owner = ("module", test.__class__.__module__)
            fixture["of"] = owner
            try:
                return original_module_fixture(self, test, result)
            finally:
                fixture["of"] = None
                try:
                    if getattr(result, "_moduleSetUpFailed", False):
                        skip_passed_by(result, test, owner)
                except Exception:
                    pass
        suite_cls._handleClassSetUp = handle_class_setup
        suite_cls._handleModuleFixture = handle_module_fixture

    original_start = base.startTest

    def start_test(self, test):
        started[id(test)] = (time.time(), _label(self, test))
        return original_start(self, test)
    base.startTest = start_test

    wrap("addSuccess", lambda test: "passed")
    wrap("addFailure", lambda test, err: "failed")
    wrap("addError", lambda test, err: "error")
    wrap("addSkip", lambda test, reason: "skipped")
    wrap("addExpectedFailure", lambda test, err: "xfail")
    wrap("addUnexpectedSuccess", lambda test: "failed")

    original_subtest = base.addSubTest

    def add_subtest(self, test, subtest, err):
        _check_identity(self)
        try:
            if err is not None:
                kind = "failed" if issubclass(err[0], test.failureException) else "error"
                started.setdefault(id(test), (time.time(), _label(self, test)))
                file_cls_name = ident(test)
                if file_cls_name is not None:
                    file, cls, name = file_cls_name
                    record(file, cls, name, kind, "subtest %s: %s" % (subtest, _exc_message(err)),
                           started[id(test)][1], 0.0)
        except Exception:
            pass
        return original_subtest(self, test, subtest, err)
    base.addSubTest = add_subtest

    import unittest.runner
    case = unittest.case
    _capture("unittest", [
        ("unittest.result.TestResult", base, None),
        ("unittest.runner.TextTestResult", getattr(unittest.runner, "TextTestResult", None), None),
        ("unittest.case.TestCase", case.TestCase, None),
        ("unittest.case._Outcome", outcome_cls, None),
        ("unittest.suite.TestSuite", suite_cls, None),
        ("unittest.case", case, ("SkipTest", "_Outcome", "_ShouldStop", "_UnexpectedSuccess", "expectedFailure",
                                 "skip", "skipIf", "skipUnless", "_addSkip")),
        ("unittest.result", unittest.result, ("TestResult", "failfast")),
    ])


# --------------------------------------------------------------------------- sympy

_SYMPY_RUNTESTS = ("sympy.utilities.runtests", "sympy.testing.runtests")


def _patch_sympy(module):
    tests_cls = getattr(module, "SymPyTests", None)
    reporter_cls = getattr(module, "PyTestReporter", None)
    if tests_cls is None or reporter_cls is None or getattr(reporter_cls, "_harness_patched", False):
        return
    reporter_cls._harness_patched = True
    current = {"file": None, "test": None, "start": 0.0}

    original_test_file = tests_cls.test_file

    def test_file(self, filename, *args, **kwargs):
        _check_identity(self, exact=True)
        current["file"], current["test"] = _relpath(filename), None
        try:
            return original_test_file(self, filename, *args, **kwargs)
        finally:
            current["file"], current["test"] = None, None
    tests_cls.test_file = test_file

    def hook(method_name, status, takes_exc=False):
        original = getattr(reporter_cls, method_name)

        def patched(self, *args, **kwargs):
            _check_identity(self, exact=True)
            try:
                message = _exc_message(args[0]) if (takes_exc and args) else (str(args[0]) if args else "")
                if current["file"] is not None:
                    if current["test"] is None:
                        if status in ("error", "failed"):  # the module itself raised while loading
                            _COLLECTION.append({"file": current["file"], "message": message})
                    else:
                        record(current["file"], "", current["test"], status, message, None,
                               time.time() - current["start"])
                        if status in ("skipped", "xfail") or method_name == "test_xpass":
                            # SymPyTests.test_file reports a Skipped/XFail/XPass from its except
                            # clause; an xpass is recorded passed, and said to be one here
                            exc_type, _, tb = sys.exc_info()
                            if exc_type is not None:
                                raised("%s::%s" % (current["file"], current["test"]),
                                       "xpass" if method_name == "test_xpass" else status, exc_type, tb,
                                       marker=status == "xfail")
                        current["test"] = None
            except Exception:
                pass
            return original(self, *args, **kwargs)
        setattr(reporter_cls, method_name, patched)

    original_entering = reporter_cls.entering_test

    def entering_test(self, f):
        current["test"] = getattr(f, "__name__", str(f))
        current["start"] = time.time()
        return original_entering(self, f)
    reporter_cls.entering_test = entering_test

    original_import_error = reporter_cls.import_error

    def import_error(self, filename, exc_info):
        _COLLECTION.append({"file": _relpath(filename), "message": _exc_message(exc_info)})
        return original_import_error(self, filename, exc_info)
    reporter_cls.import_error = import_error

    hook("test_pass", "passed")
    hook("test_fail", "failed", takes_exc=True)
    hook("test_exception", "error", takes_exc=True)
    hook("test_skip", "skipped")
    hook("test_xfail", "xfail")
    hook("test_xpass", "passed")

    names = ("SymPyTests", "PyTestReporter", "Reporter", "Skipped", "XFail", "XPass", "test", "_test",
             "run_in_subprocess_with_hash_randomization", "run_all_tests", "convert_to_native_paths", "get_sympy_dir",
             "sys_normcase", "split_list")
    owners = [(module.__name__, module, names), (module.__name__ + ".SymPyTests", tests_cls, None),
              (module.__name__ + ".PyTestReporter", reporter_cls, None)]
    base = getattr(module, "Reporter", None)
    if isinstance(base, type) and base is not object:
        owners.append((module.__name__ + ".Reporter", base, None))
    _capture("sympy", owners)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch a module right after it is first executed."""

    def __init__(self, names, patch):
        self.names, self.patch = set(names), patch

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, patch = spec.loader, self.patch
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            patch(module)
        loader.exec_module = exec_module
        return spec


def install_sympy():
    for name in _SYMPY_RUNTESTS:
        if name in sys.modules:
            _patch_sympy(sys.modules[name])
    sys.meta_path.insert(0, _PatchOnImport(_SYMPY_RUNTESTS, _patch_sympy))


# --------------------------------------------------------------------------- main

def main(argv):
    usage = "usage: junit_reporter.py --framework sympy|unittest --junit PATH -- SCRIPT|-m MODULE ARGS..."
    if "--" not in argv:
        sys.exit(usage)
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    values = dict(zip(options[::2], options[1::2]))
    framework, junit = values.get("--framework"), values.get("--junit")
    if framework not in ("sympy", "unittest") or not junit or not command:
        sys.exit(usage)
    if os.path.basename(command[0]).startswith("python") and len(command) > 1:
        command = command[1:]  # "python SCRIPT ..." / "python -m MODULE ...": this interpreter runs it
    _state["junit"] = junit
    atexit.register(write_junit)
    (install_sympy if framework == "sympy" else install_unittest)()
    try:
        if command[0] == "-m" and len(command) > 1:
            sys.argv = [command[1], *command[2:]]
            sys.path[0] = os.getcwd()  # what "python -m" puts first
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        else:
            script = command[0]
            sys.argv = list(command)
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    finally:
        write_junit()


if __name__ == "__main__":
    main(sys.argv[1:])
