"""The runtime tamper monitor: a PEP 578 audit hook in the test process (trusted).

Installed by the bootstrap (``sitecustomize``) before any repository code is imported;
audit hooks cannot be removed. For a watched event it finds the Python frame that
caused it (the first frame outside the harness and outside thin standard-library
wrappers) and the working-copy files on the stack; when there is at least one, it
records one JSON line ``{"k": "event", "event", "file", "line", "stack", "detail"}`` on
the evidence fd (deduplicated by event, culprit and innermost working-copy file; capped). Which file is code under test, which events make a
run ``tampered`` and which only flag it, is decided on the host
(``harness.integrity.evidence``), with the tree truth at hand.

Also: ``emit()`` is the evidence channel of the harness's other in-process reporters
(the outcome-origin plugin), and on Pythons without ``gc`` audit events (< 3.10) the
``gc`` walks are wrapped so that they raise one.
"""

import json
import os
import sys

_STATE = {"fd": None, "seen": set(), "count": 0, "busy": False, "cap": 400, "testbed": "/testbed/"}
#: events raised by a C function called straight from the offending frame
WATCHED = frozenset((
    "sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "exec", "compile", "ctypes.dlopen", "ctypes.dlsym",
    "ctypes.cdata", "ctypes.addressof", "ctypes.call_function", "ctypes.string_at", "ctypes.set_exception",
    "open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink", "os.link",
    "shutil.rmtree", "shutil.move", "shutil.copyfile", "subprocess.Popen", "os.system", "os.exec",
    "os.posix_spawn", "os.spawn", "os.fork", "os.kill", "os.killpg", "marshal.loads", "code.__new__",
    "sys.monitoring.register_callback", "cpython.remote_debugger_script",
))
#: standard-library modules that only pass a request on (their caller is the one to blame)
_WRAPPERS = ("inspect.py", "traceback.py", "pathlib.py", "shutil.py", "subprocess.py", "os.py", "io.py",
             "_pyio.py", "tempfile.py", "codecs.py", "gc.py", "threading.py", "runpy.py")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: events worth recording even when the import machinery raised them on behalf of a module
#: being imported (the others, compile/exec/code objects/reads of the module, are just imports)
_EVEN_DURING_IMPORT = frozenset((
    "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
    "ctypes.call_function", "ctypes.string_at", "sys.monitoring.register_callback",
))
_HERE = os.path.dirname(os.path.abspath(__file__))


def emit(record):
    """Write one evidence record (a dict) as a JSON line; never raises."""
    fd = _STATE["fd"]
    if fd is None:
        return
    try:
        os.write(fd, (json.dumps(record, default=str)[:LINE_CAP] + "\n").encode("utf-8", "replace"))
    except Exception:
        pass


#: characters of one evidence line; longer records are cut (and then unreadable)
LINE_CAP = 8000


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
        cost = len(json.dumps(name)) + 2
        if len(files) >= limit or used + cost > budget:
            break
        files.append(name)
        used += cost
    return files


def _writes(args):
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _culprit(frame):
    """The first frame that is neither the harness's nor a thin stdlib wrapper, and the
    distinct working-copy files on the whole stack (innermost first): code exec'd under
    a made-up file name still has its caller on the stack."""
    culprit, stack, via_import = None, [], False
    testbed = _STATE["testbed"]
    while frame is not None:
        name = frame.f_code.co_filename
        if culprit is None:
            if name.startswith("<frozen importlib"):
                via_import = True
            if not (name.startswith(_HERE) or name.endswith(_WRAPPERS) or name.startswith("<frozen")):
                culprit = frame
        if name.startswith(testbed) and name not in stack and len(stack) < 10:
            stack.append(name)
        frame = frame.f_back
    return culprit, stack, via_import


def _hook(event, args):
    if event not in WATCHED or _STATE["busy"]:
        return
    if event == "open" and not _writes(args):
        return
    if event == "compile" and isinstance(args[1], str) and args[1].endswith(".py"):
        return  # a module being imported
    if event == "exec" and getattr(args[0], "co_filename", "<").endswith(".py"):
        return
    _STATE["busy"] = True
    try:
        frame, stack, via_import = _culprit(sys._getframe(1))
        if frame is None or not stack or (via_import and event not in _EVEN_DURING_IMPORT):
            return
        filename = frame.f_code.co_filename
        key = (event, filename, frame.f_lineno, stack[0])
        if key in _STATE["seen"] or _STATE["count"] >= _STATE["cap"]:
            return
        _STATE["seen"].add(key)
        _STATE["count"] += 1
        emit({"k": "event", "event": event, "file": filename, "line": frame.f_lineno, "stack": stack,
              "detail": _detail(event, args)})
    except Exception:
        pass
    finally:
        _STATE["busy"] = False


def _detail(event, args):
    try:
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


def start(fd, options):
    """Called once by the bootstrap."""
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return
    _STATE["fd"] = fd
    _STATE["testbed"] = options.get("testbed", "/testbed").rstrip("/") + "/"
    _STATE["results"] = options.get("results")
    # sys.argv does not exist yet while site runs on Pythons before 3.8
    emit({"k": "boot", "python": sys.version.split()[0], "pid": os.getpid(), "argv": getattr(sys, "argv", [])[:3],
          "monitor": bool(options.get("monitor")) and hasattr(sys, "addaudithook")})
    if options.get("monitor") and hasattr(sys, "addaudithook"):
        _wrap_gc()
        sys.addaudithook(_hook)
