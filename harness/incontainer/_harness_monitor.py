"""The runtime tamper monitor and the evidence channel of a test process (trusted).

Started by the bootstrap (``_harness_boot``) while ``site`` initialises, before any
repository code; audit hooks cannot be removed. Every record goes as one JSON line over
a unix socket to the launcher's collector (``evidence_channel.py``, root), which tags it
with the sender's pid as the kernel reports it: a process can add records but never
take back or rewrite what another process (or itself) sent. A forked child reconnects.

For a watched event the hook records the frames that led to it, innermost first, each
with its *kind* (:func:`kind`):

* ``h`` the harness's own code (dropped), ``w`` genuine thin standard-library wrappers and
  the import machinery (transparent: their caller is the one to blame);
* ``m`` genuine module code of an installed library being imported, ``l`` genuine
  installed library code (the standard library included);
* ``c`` anything else: the working copy, and any code this process cannot prove genuine.

A record the host's rule would discard as a genuine library's own work (``blamed``, the
rule the host judges with) is not sent, and its walk stops at the frames that decide it:
what genuine libraries generate while an importer imports them (namedtuples, dataclasses,
attrs classes) costs a few frames, not a record.

Genuine is decided in the process by ``_harness_genuine`` (never from a name): code
``exec``'d under a borrowed file name, functions built from forged code objects with a
library's globals, and sourceless ``.pyc`` files are ``c``, whatever they claim. Which
events make a run ``tampered`` is decided on the host (``harness.integrity.evidence``,
``harness.integrity.attribution``) from these records.

Also: ``emit()`` is the channel of the harness's other in-process reporters; on Pythons
without ``gc`` audit events (< 3.10) the ``gc`` walks are wrapped so that they raise one.
"""

import os
import sys

from _harness_genuine import (CodeType, blamed, by_import_machinery, claim, forget_machinery_call, import_exec, kind,
                              library_own_already, machinery_target, made_by_import_machinery, reads_a_name_only,
                              snapshot)

_STATE = {"sock": None, "inode": None, "path": None, "pid": None, "lock": None, "seen": set(), "counts": {}, "cap": 400,
          "testbed": "/testbed/", "results": None, "busy": set(), "started": False, "rebind_watch": {},
          "rebind_code": {}}
#: the event the hook records for a change the audit hook can see (CPython raises
#: ``object.__setattr__`` for ``__class__`` and ``__code__`` assignments, never for a class's
#: other attributes) of an outcome-deciding binding of the runner (``_harness_identity``): an
#: instance of a watched class (``_STATE["rebind_watch"]``) given another class, a captured
#: function (``_STATE["rebind_code"]``) given other code
REBIND = "runner.rebind"
#: events raised by a C function called straight from the offending frame
WATCHED = frozenset((
    "sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "exec", "compile", "ctypes.dlopen", "ctypes.dlsym",
    "ctypes.cdata", "ctypes.addressof", "ctypes.call_function", "ctypes.string_at", "ctypes.set_exception",
    "open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink", "os.link",
    "shutil.rmtree", "shutil.move", "shutil.copyfile", "subprocess.Popen", "os.system", "os.exec",
    "os.posix_spawn", "os.spawn", "os.fork", "os.kill", "os.killpg", "marshal.loads", "code.__new__",
    "sys.monitoring.register_callback", "cpython.remote_debugger_script", "object.__setattr__",
))
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: events worth recording even when the import machinery raised them on behalf of a module
#: being imported (the others, compile/exec/code objects/reads of the module, are just imports);
#: each kind has its own budget, so a flood of minor events cannot crowd these out
_SEVERE = frozenset((
    "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
    "ctypes.call_function", "ctypes.string_at", "sys.monitoring.register_callback", REBIND,
))
_WRITES = frozenset(("open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink",
                     "os.link", "shutil.rmtree", "shutil.move", "shutil.copyfile"))
#: frames recorded per event beyond the one that raised it (enough for the host's rule: the
#: library frames up to the first frame that is not, see docs/SECURITY.md)
CHAIN = 8
#: characters of one evidence line; longer records are cut (and then unreadable)
LINE_CAP = 8000

def emit(record):
    """Send one evidence record (a dict) as a JSON line; never raises."""
    if _STATE["sock"] is None:
        return
    try:
        if os.getpid() != _STATE["pid"]:
            _reconnect()
        line = (dumps(record)[:LINE_CAP] + "\n").encode("utf-8", "replace")
        with _STATE["lock"]:
            fd = _STATE["sock"]
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != _STATE["inode"]:   # closed, and the number reused by the tests
                _STATE["sock"] = None
                return
            while line:
                line = line[os.write(fd, line):]
    except Exception:
        pass


#: JSON string escapes: the quote, the backslash and every control character
_ESCAPES = {c: "\\u%04x" % c for c in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def dumps(value):
    """JSON text of an evidence record (dicts, lists, strings, numbers, booleans, None;
    anything else as its ``str``), without importing ``json`` into every test process."""
    kind = type(value)
    if kind is str:
        return '"' + value.translate(_ESCAPES) + '"'
    if kind is dict:   # the records: mostly flat, mostly strings
        return "{" + ",".join('"' + (k if type(k) is str else str(k)).translate(_ESCAPES) + '":' + (
            '"' + v.translate(_ESCAPES) + '"' if type(v) is str else dumps(v)) for k, v in value.items()) + "}"
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    if kind is int:
        return repr(value)
    if kind is float:
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "null"
    if kind in (list, tuple):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    try:
        return dumps(str(value))
    except Exception:
        return '"?"'


def _connect(path):
    """The connected socket's fd (close-on-exec). A bare fd, not a socket object: nothing
    of ours is left for the interpreter to warn about at exit (``-X dev`` would print a
    ResourceWarning into the tests' output)."""
    try:
        import _socket as sockets
    except ImportError:
        import socket as sockets
    sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        sock.connect(path)
    except Exception:
        sock.close()
        raise
    fd = sock.detach()
    st = os.fstat(fd)
    _STATE["inode"] = (st.st_dev, st.st_ino)
    return fd


def _reconnect():
    """A forked child: its own connection (the kernel names it), never its parent's."""
    _STATE["pid"] = os.getpid()
    _STATE["sock"] = None   # the parent's connection (left open: the child may have reused its number)
    try:
        import _thread
        _STATE["lock"] = _thread.RLock()
        _STATE["sock"] = _connect(_STATE["path"])
    except Exception:
        _STATE["sock"] = None
        return
    _STATE["seen"] = set()
    _STATE["counts"] = {}
    emit({"k": "boot", "forked": True, "pid": os.getpid(), "monitor": _STATE["started"]})


def testbed_files(tb, limit=64, budget=5000):
    """The distinct working-copy files among a traceback's frames, innermost first (the
    raising frame's file, then its callers'), at most ``limit`` of them and ``budget``
    characters in JSON. The whole traceback is walked: a raise buried under many frames
    still counts; and the record stays one readable evidence line (a record cut at
    :data:`LINE_CAP` is lost, which long names in code under test could otherwise arrange)."""
    testbed = _STATE["testbed"]
    seen = []
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.startswith(testbed) and name not in seen:
            seen.append(name)
        tb = tb.tb_next
    files, used = [], 0
    for name in reversed(seen):
        cost = len(dumps(name)) + 2
        if len(files) >= limit or used + cost > budget:
            break
        files.append(name)
        used += cost
    return files


# --------------------------------------------------------------------------- the hook

def _writes(args):
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _walk(frame):
    """(chain, working-copy files on the whole stack, an import on the way): the chain is
    the frames from the first that is neither the harness's nor transparent, as far as the
    first ``c`` frame after it (at most :data:`CHAIN` + 1). None as soon as the chain's first
    frames make the event a genuine library's own (``library_own_already``: the host's rule
    discards it, whatever the rest of the stack holds), without walking the rest."""
    chain, kinds, stack, via_import, done = [], [], [], False, False
    testbed = _STATE["testbed"]
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if not done:
            what = kind(code)
            if what == "w" and name.startswith("<frozen importlib"):
                via_import = via_import or not chain
            elif what not in ("h", "w"):
                chain.append([name, frame.f_lineno, what])
                kinds.append(what)
                if what != "c" and len(kinds) <= 2 and library_own_already(kinds):   # never so for a c frame
                    return None
                done = what == "c" or len(chain) > CHAIN
        if name.startswith(testbed) and name not in stack and len(stack) < 32:
            stack.append(name)
        frame = frame.f_back
    return chain, stack, via_import


def _rebinding(target, name):
    """A label when assigning ``name`` (``__class__``, ``__code__``) on ``target`` changes an
    outcome-deciding binding of the runner, else None."""
    if name == "__class__":
        entry = _STATE["rebind_watch"].get(id(type(target)))
        return None if entry is None or entry[0] is not type(target) else entry[1] + " instance.__class__"
    entry = _STATE["rebind_code"].get(id(target))
    return None if entry is None or entry[0] is not target else entry[1] + ".__code__"


def _hook(event, args):
    if event not in WATCHED:
        return
    if event == "object.__setattr__" and (len(args) < 2 or args[1] not in ("__code__", "__class__")):
        return
    if event == "open" and not _writes(args):
        return
    busy = _STATE["busy"]
    me = _ident()
    if me in busy:
        return
    busy.add(me)
    try:
        # Pythons 3.8 and 3.9 raise code.__new__ for every code object the compiler or marshal
        # makes, the import machinery's included: those claim nothing, and are answered first
        # (tens of thousands in an import-heavy run). Not before the guard above: sys._getframe
        # raises an event of its own, which would be handled in full (measured: 3x the cost)
        if event == "code.__new__" and made_by_import_machinery(sys._getframe(1)):
            return
        _handle(event, args)
    except Exception:
        pass
    finally:
        busy.discard(me)


def _handle(event, args):
    forget_machinery_call()
    caller = sys._getframe(2)  # _handle <- _hook <- the frame that called the C function raising the event
    if event == "exec":
        code = args[0] if args else None
        if type(code) is CodeType and import_exec(code, caller):
            return
        if getattr(code, "co_filename", "<").endswith(".py"):
            return
    elif event == "compile":
        if by_import_machinery(caller, "source_to_code"):
            return
        filename = args[1] if len(args) > 1 else None
        if isinstance(filename, str) and filename.startswith("/"):
            claim(filename)
        if isinstance(filename, str) and filename.endswith(".py"):
            return  # a module compiled by another loader (pytest's assertion rewriting)
    elif event == "code.__new__":   # not the import machinery's (``_hook`` answered those): claims its file
        claim(args[1] if len(args) > 1 else None)
    elif event == "object.__setattr__":
        if len(args) > 2 and args[1] == "__code__":
            claim(getattr(getattr(args[0], "__code__", None), "co_filename", None))
            claim(getattr(args[2], "co_filename", None))
        label = _rebinding(args[0], args[1])
        if label is None:
            return
        event, args = REBIND, (label,)
    elif event == "marshal.loads":
        if by_import_machinery(caller, "compile_bytecode"):
            return
        # the machinery's own function with the machinery changed: what it loads is not the file's
        claim(machinery_target(caller))
    elif event == "sys._getframe":
        if reads_a_name_only(caller.f_code):
            return  # typing/namedtuple/enum reading their caller's module name (_harness_genuine)
    _record(event, args, caller)


def _record(event, args, frame):
    """Send the event's record unless the host would certainly discard it: no frame of the
    working copy on the stack, an import's own minor event, or a genuine library's own work
    (``blamed``, the host's rule, on the same chain the record would carry)."""
    walked = _walk(frame)
    if walked is None:
        return
    chain, stack, via_import = walked
    if not chain or not stack or (via_import and event not in _SEVERE):
        return
    if chain[-1][2] != "c" and blamed([f[2] for f in chain]) is None:   # a chain that reaches a c frame is blamed
        return
    budget = "severe" if event in _SEVERE else "writes" if event in _WRITES else "other"
    key = (event, tuple(map(tuple, chain[:3])), stack[0])
    counts = _STATE["counts"]
    if key in _STATE["seen"] or counts.get(budget, 0) >= _STATE["cap"]:
        return
    _STATE["seen"].add(key)
    counts[budget] = counts.get(budget, 0) + 1
    emit({"k": "event", "event": event, "file": chain[0][0], "line": chain[0][1], "stack": stack,
          "chain": chain, "detail": _detail(event, args)})


def _detail(event, args):
    try:
        if event == REBIND:
            return str(args[0])[:300]
        if event in ("open", "os.remove", "os.rename", "os.truncate", "os.chmod", "shutil.rmtree"):
            return repr(args[:2])[:300]
        if event == "compile":
            return repr(args[0])[:300]
        if event == "exec":
            return getattr(args[0], "co_filename", "?")
        if event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"):
            return repr(args[:2])[:300]
        if event.startswith("ctypes."):
            return repr(args)[:200]
    except Exception:
        pass
    return ""


def _wrap_gc():
    """Pythons before 3.10 raise no audit event for gc walks: raise one ourselves."""
    if sys.version_info >= (3, 10):
        return
    import gc
    for name in ("get_objects", "get_referrers", "get_referents"):
        original = getattr(gc, name)

        def wrapper(*args, _original=original, _event="gc." + name, **kwargs):
            sys.audit(_event)
            return _original(*args, **kwargs)
        setattr(gc, name, wrapper)


def start(options, harness_modules=()):
    """Called once by the bootstrap: connect, say so, install the hook."""
    import _thread
    global _ident
    _ident = _thread.get_ident
    _STATE["lock"] = _thread.RLock()
    _STATE["testbed"] = str(options.get("testbed") or "/testbed").rstrip("/") + "/"
    _STATE["results"] = options.get("results")
    _STATE["pristine"] = options.get("pristine")
    _STATE["path"] = options.get("socket")
    _STATE["pid"] = os.getpid()
    try:
        _STATE["sock"] = _connect(_STATE["path"])
    except Exception:
        _STATE["sock"] = None
    monitor = bool(options.get("monitor")) and hasattr(sys, "addaudithook")
    # sys.argv does not exist yet while site runs on Pythons before 3.8
    emit({"k": "boot", "python": sys.version.split()[0], "pid": os.getpid(),
          "argv": list(getattr(sys, "orig_argv", getattr(sys, "argv", [])))[:4], "monitor": monitor,
          "identity": "_harness_identity" in sys.modules,
          "bytecode": sum(1 for module in harness_modules if module.get("cached"))})
    if monitor:
        _wrap_gc()
        snapshot(list(harness_modules), _STATE["testbed"])
        _STATE["started"] = True
        sys.addaudithook(_hook)


def _ident():
    return 0
