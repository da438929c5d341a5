"""Runner identity: the bindings that decide test outcomes, kept (trusted; loaded by the bootstrap).

The runner's and the reporter's classes and functions that turn a test's run into its
outcome live in the process under test, beside the code under test: library code that
rebinds a reporter's ``test_fail`` to its ``test_pass`` (sympy's ``PyTestReporter``),
unittest's ``TestResult.addFailure`` to ``addSuccess``, or pytest's
``TestReport.from_item_and_call`` turns failures into passes through the runner's own
records. The outcome-deciding bindings are therefore captured before any repository code
runs and compared again while and after the tests run:

* :func:`capture` (the runner's set-up calls it: the pytest plugin when pytest has made its
  config and imported its own plugins, before any ``conftest.py`` or plugin of the
  environment; the JUnit reporter right after it patched unittest, and right after sympy's
  runner module executed) records, for each owner (a class or a module), the object bound
  to each outcome-deciding name and, for a function (or the function of a classmethod,
  staticmethod or property), its code, defaults and closure contents;
* :func:`check` compares the bound objects and their code (a few hundred identity tests;
  the reporters call it at every outcome, with the reporter or result object in hand: an instance attribute shadowing an
  outcome method, or an instance whose class was swapped, is a change too) and sends each
  change it has not sent before as an ``identity`` record ``changed``;
* :func:`final` compares them in full (defaults and closure contents too) when the suite ends (the pytest session that writes the
  results file, at ``unconfigure``; the JUnit reporter, before writing the file) and sends
  the ``identity`` record ``final`` with how many bindings it compared and every changed one;
* the audit hook (``_harness_monitor``, Python 3.8+) sees, when it happens, what CPython
  raises an audit event for: an instance of a watched class given another ``__class__``
  (``_STATE["rebind_watch"]``) and a captured function given other ``__code__``
  (``_STATE["rebind_code"]``); a class's other attributes and a module's names raise none,
  so those are seen by the comparisons only.

Namespaces are read through the descriptors of ``type`` and ``module`` themselves, never
through an attribute of the owner, and compared by identity only: nothing here calls code
of the owners. Python 3.6+, standard library only, imports nothing.
"""

import sys

from _harness_monitor import _STATE, emit

_ABSENT = object()
_FUNCTION = type(lambda: None)
_CLASS_DICT = type.__dict__["__dict__"].__get__
_MODULE_DICT = type(sys).__dict__["__dict__"].__get__
_TYPE_MRO = type.__dict__["__mro__"].__get__
#: [label, namespace, name, snapshot]
_ENTRIES = []
#: id(owner) -> owner: owners captured (kept alive, so an id is never reused)
_OWNERS = {}
#: id(type) -> (type, label, frozenset of watched names) for the audit hook and instance checks
_WATCH = _STATE.setdefault("rebind_watch", {})
#: id(function) -> (function, label) of every captured function, for the audit hook
_CODE = _STATE.setdefault("rebind_code", {})
_REPORTED = set()
_RUNNERS = []


def _function_of(value):
    """The function whose code decides what ``value`` does when looked up (None for data)."""
    if type(value) is _FUNCTION:
        return value
    kind = type(value)
    if kind is classmethod or kind is staticmethod:
        inner = value.__func__
    elif kind is property:
        inner = value.fget
    else:
        return None
    return inner if type(inner) is _FUNCTION else None


def _cells(function):
    out = []
    for cell in function.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:   # an empty cell
            out.append(_ABSENT)
    return tuple(out)


def _snapshot(value):
    function = _function_of(value)
    if function is None:
        return (value, None, None, None, None, ())
    return (value, function, function.__code__, function.__defaults__, function.__kwdefaults__, _cells(function))


def _rest_same(before):
    """The function's defaults and closure contents are the captured ones."""
    function = before[1]
    if function.__defaults__ is not before[3] or function.__kwdefaults__ is not before[4]:
        return False
    cells = _cells(function)
    return len(cells) == len(before[5]) and all(a is b for a, b in zip(cells, before[5]))


def _namespace(owner):
    if isinstance(owner, type):
        return _CLASS_DICT(owner)
    if isinstance(owner, type(sys)):
        return _MODULE_DICT(owner)
    if type(owner) is dict:   # a module's globals (the reporter runs as __main__)
        return owner
    return None


def _harness_owners():
    """The harness's own functions that carry the evidence and make the comparisons."""
    monitor = sys.modules.get("_harness_monitor")
    return [("_harness_monitor", monitor, ("emit", "dumps", "testbed_files", "_STATE", "_hook", "_handle", "_record",
                                           "_walk", "_rebinding")),
            ("_harness_identity", sys.modules.get(__name__), ("changes", "check", "final", "_rest_same", "_snapshot",
                                                             "_cells", "_function_of", "_ENTRIES", "_WATCH", "_CODE",
                                                             "_REPORTED"))]


def capture(runner, owners):
    """Record the bindings of ``owners``: ``(label, owner, names)`` with ``owner`` a class, a
    module or a globals dict and ``names`` the outcome-deciding names (None: every function,
    classmethod, staticmethod and property of a class's own namespace). An owner is captured
    once per process; one that does not exist (None) is left out. The harness's own monitor
    and this module are captured with the first runner."""
    count = 0
    for label, owner, names in list(owners) + _harness_owners():
        namespace = _namespace(owner) if owner is not None else None
        if namespace is None or id(owner) in _OWNERS:
            continue
        _OWNERS[id(owner)] = owner
        if names is None:
            names = [n for n, v in list(namespace.items()) if _function_of(v) is not None]
        kept = []
        for name in names:
            value = namespace.get(name, _ABSENT)
            if value is _ABSENT:
                continue
            snapshot = _snapshot(value)
            _ENTRIES.append((label, namespace, name, snapshot))
            if snapshot[1] is not None:
                _CODE.setdefault(id(snapshot[1]), (snapshot[1], label + "." + name))
            kept.append(name)
            count += 1
        if isinstance(owner, type) and kept:
            _WATCH[id(owner)] = (owner, label, frozenset(kept))
    _RUNNERS.append(runner)
    emit({"k": "identity", "what": "captured", "runner": runner, "count": count, "total": len(_ENTRIES)})
    return count


def changes(instance=None, exact=False, full=True):
    """Every captured binding that differs now, as ``label.name``: another object bound, or
    the function given other code (and, ``full``, other defaults or closure contents); with
    ``instance`` (a reporter or result object) also a watched name in its own ``__dict__``
    and, with ``exact``, a class that is not the one captured."""
    out = []
    absent = _ABSENT
    for label, namespace, name, before in _ENTRIES:
        function = before[1]
        if namespace.get(name, absent) is not before[0] or (function is not None and (
                function.__code__ is not before[2] or (full and not _rest_same(before)))):
            out.append(label + "." + name)
    if instance is not None:
        cls = type(instance)
        if exact and id(cls) not in _WATCH:
            out.append("instance of %s.%s" % (getattr(cls, "__module__", "?"), getattr(cls, "__qualname__", "?")))
        try:
            own = object.__getattribute__(instance, "__dict__")
        except AttributeError:
            own = {}
        if type(own) is dict and own:
            for klass in _TYPE_MRO(cls):
                entry = _WATCH.get(id(klass))
                if entry is not None and entry[0] is klass:
                    out.extend("%s.%s (instance attribute)" % (entry[1], n) for n in entry[2] if n in own)
    return out


def check(point, instance=None, exact=False):
    """Compare now (the bound objects and their code: cheap enough for every outcome); send
    what changed since the last record (nothing when nothing did)."""
    try:
        found = changes(instance, exact, full=False)
    except Exception as exc:   # an owner made unreadable is a change, never a pass
        found = ["unreadable: %s" % type(exc).__name__]
    new = [c for c in found if c not in _REPORTED]
    if new:
        _REPORTED.update(new)
        emit({"k": "identity", "what": "changed", "at": point, "changed": new[:50]})
    return found


def final(point, session=None):
    """The comparison when the suite ends: how many bindings, and every changed one."""
    try:
        found = changes()
    except Exception as exc:
        found = ["unreadable: %s" % type(exc).__name__]
    record = {"k": "identity", "what": "final", "at": point, "checked": len(_ENTRIES), "runners": _RUNNERS[:8],
              "changed": found[:50]}
    if session is not None:
        record["s"] = session
    emit(record)
    return found
