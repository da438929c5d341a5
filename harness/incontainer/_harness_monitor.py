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

Genuine means: the code object is reachable (through nested code constants) from a
module code object that the unmodified import machinery compiled or unmarshalled from a
file under directories only root can write (checked when the ``exec`` event of the import
fires), or from a module loaded before any repository code ran (snapshotted at start);
and no dynamic ``compile``, ``code.__new__`` (``CodeType``, ``code.replace``) or ``__code__``
assignment in this process claimed that file name. Code ``exec``'d under a borrowed file
name, functions built from forged code objects with a library's globals, and sourceless
``.pyc`` files are therefore ``c``, whatever they claim. Which events make a run
``tampered`` is decided on the host (``harness.integrity.evidence``) from these records.

Also: ``emit()`` is the channel of the harness's other in-process reporters; on Pythons
without ``gc`` audit events (< 3.10) the ``gc`` walks are wrapped so that they raise one.
"""

import os
import sys

_STATE = {"sock": None, "inode": None, "path": None, "pid": None, "lock": None, "seen": set(), "counts": {}, "cap": 400,
          "testbed": "/testbed/", "results": None, "busy": set(), "started": False}
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
#: standard-library modules that only pass a request on (their caller is the one to blame)
_WRAPPERS = ("/inspect.py", "/traceback.py", "/pathlib.py", "/shutil.py", "/subprocess.py", "/os.py", "/io.py",
             "/_pyio.py", "/tempfile.py", "/codecs.py", "/threading.py", "/runpy.py")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: events worth recording even when the import machinery raised them on behalf of a module
#: being imported (the others, compile/exec/code objects/reads of the module, are just imports);
#: each kind has its own budget, so a flood of minor events cannot crowd these out
_SEVERE = frozenset((
    "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
    "ctypes.call_function", "ctypes.string_at", "sys.monitoring.register_callback",
))
_WRITES = frozenset(("open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink",
                     "os.link", "shutil.rmtree", "shutil.move", "shutil.copyfile"))
#: frames recorded per event beyond the one that raised it (enough for the host's rule: the
#: library frames up to the first frame that is not, see docs/SECURITY.md)
CHAIN = 8
#: characters of one evidence line; longer records are cut (and then unreadable)
LINE_CAP = 8000
_PY_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"
_MISSING = object()

#: what makes code genuine (see the module docstring)
_GENUINE = {"harness": {}, "modules": {}, "module_ids": {}, "preloaded": [], "preloaded_codes": None,
            "claimed": set(), "reach": {}, "dirs": {}, "machinery": [], "frames": {}}


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


# --------------------------------------------------------------------------- genuine code

def _machinery():
    """The import machinery's parts that decide what code a module gets, as they are at
    start (compared by identity whenever an import is verified)."""
    import builtins
    boot, ext = sys.modules.get("_frozen_importlib"), sys.modules.get("_frozen_importlib_external")
    owners = [(builtins, ("compile", "exec")), (boot, ("_call_with_frames_removed", "FrozenImporter")),
              (ext, ("_LoaderBasics", "SourceLoader", "FileLoader", "SourceFileLoader", "_compile_bytecode",
                     "cache_from_source", "decode_source", "_validate_timestamp_pyc", "_validate_hash_pyc",
                     "_classify_pyc", "_path_stat", "_io", "marshal", "_imp", "_os"))]
    for cls, names in ((getattr(ext, "_LoaderBasics", None), ("exec_module",)),
                       (getattr(ext, "SourceLoader", None), ("get_code", "source_to_code", "path_stats")),
                       (getattr(ext, "SourceFileLoader", None), ("get_data", "get_code", "path_stats",
                                                                 "source_to_code", "exec_module")),
                       (getattr(boot, "FrozenImporter", None), ("exec_module",))):
        if cls is not None:
            owners.append((cls, names))
    for module in (getattr(ext, "_io", None), getattr(ext, "marshal", None), getattr(ext, "_imp", None)):
        if module is not None:
            owners.append((module, ("open_code", "FileIO", "loads", "_fix_co_filename", "get_frozen_object",
                                    "source_hash", "check_hash_based_pycs")))
    return [(owner, name, getattr(owner, name, _MISSING)) for owner, names in owners if owner is not None
            for name in names]


def _intact():
    if getattr(sys, "pycache_prefix", None) is not None:   # bytecode could come from anywhere
        return False
    for owner, name, value in _GENUINE["machinery"]:
        if getattr(owner, name, _MISSING) is not value:
            return False
    return True


def _code_of(owner, *names):
    for name in names:
        owner = getattr(owner, name, None)
    return getattr(owner, "__code__", None)


def _trusted_dir(directory):
    """Every component a real directory that only root can write (cached: such a
    directory cannot change under the test user)."""
    cache = _GENUINE["dirs"]
    found = cache.get(directory)
    if found is None:
        parent = os.path.dirname(directory)
        found = False
        if parent == directory or _trusted_dir(parent):
            try:
                st = os.lstat(directory)
                found = (st.st_mode & 0o170000) == 0o040000 and st.st_uid == 0 and not st.st_mode & 0o022
            except OSError:
                found = False
        cache[directory] = found
    return found


def _trusted_file(filename):
    if filename.startswith("<frozen "):
        return True
    if not filename.startswith("/") or filename.startswith((_STATE["testbed"], _PY_DIR)):
        return False
    return _trusted_dir(os.path.dirname(filename))


def _import_exec(code, frame):
    """True when this ``exec`` is the import machinery running a module's code that it got
    from a trusted file itself: record the module code as genuine."""
    if frame is None:
        return False
    frames = _GENUINE["frames"]
    filename = code.co_filename
    if frame.f_code is frames.get("frozen_exec"):
        ok = filename.startswith("<frozen ")
    elif frame.f_code is frames.get("call") and frame.f_back is not None \
            and frame.f_back.f_code is frames.get("exec_module"):
        loader = frame.f_back.f_locals.get("self")
        ok = type(loader) is frames.get("SourceFileLoader") and getattr(loader, "path", None) == filename \
            and _plain_loader(loader)
    else:
        return False
    if not (ok and _trusted_file(filename) and filename not in _GENUINE["claimed"] and _intact()):
        return True   # an import, but not one that makes its code genuine
    _GENUINE["modules"].setdefault(filename, []).append(code)
    _GENUINE["module_ids"][id(code)] = code
    _GENUINE["reach"].pop(filename, None)
    return True


def _plain_loader(loader):
    """No method of the loader replaced on the instance (only the harness's own wrapper of
    ``exec_module``, which lets pytest register the outcome plugin, is allowed)."""
    extra = set(vars(loader)) - {"name", "path"}
    if not extra:
        return True
    wrapper = getattr(vars(loader).get("exec_module"), "__code__", None)
    return extra == {"exec_module"} and wrapper is not None and _GENUINE["harness"].get(id(wrapper)) is wrapper


def _by_import_machinery(frame, key):
    """The frame that called ``compile``/``marshal.loads`` is the import machinery's."""
    frames = _GENUINE["frames"]
    if frame is not None and frame.f_code is frames.get("call"):
        frame = frame.f_back
    return frame is not None and frame.f_code is frames.get(key) and _intact()


def _claim(filename):
    if isinstance(filename, str):
        _GENUINE["claimed"].add(filename)
        _GENUINE["reach"].pop(filename, None)


def _nested(codes, filename, into):
    stack = list(codes)
    while stack:
        code = stack.pop()
        if id(code) in into or code.co_filename != filename:
            continue
        into[id(code)] = code
        stack.extend(c for c in code.co_consts if type(c) is type(code))
    return into


def _preloaded_codes():
    """Top-level code objects of the modules loaded before any repository code (walked
    once, from the copies of their namespaces taken at start)."""
    found = _GENUINE["preloaded_codes"]
    if found is None:
        found = _GENUINE["preloaded_codes"] = {}
        for namespace in _GENUINE["preloaded"]:
            for value in namespace.values():
                for function in _functions(value):
                    code = getattr(function, "__code__", None)
                    if code is not None:
                        found.setdefault(code.co_filename, []).append(code)
    return found


def _functions(value):
    """Plain functions among a namespace value (exact types only: nothing of the value's
    own runs, so a lazy object can import nothing here)."""
    kind_of = type(value)
    if kind_of is tuple and len(value) == 2 and type(value[1]) is dict:  # a class: (class, its namespace)
        out = []
        for item in value[1].values():
            out.extend(_functions(item))
        return out
    if kind_of is _FunctionType:
        return [value]
    if kind_of in (staticmethod, classmethod, _MethodType):
        return _functions(value.__func__)
    if kind_of is property:
        return [f for f in (value.fget, value.fset, value.fdel) if type(f) is _FunctionType]
    return []


def genuine(code):
    filename = code.co_filename
    if filename in _GENUINE["claimed"]:
        return False
    reach = _GENUINE["reach"].get(filename)
    if reach is None:
        roots = list(_GENUINE["modules"].get(filename, ()))
        if _trusted_file(filename):
            roots += _preloaded_codes().get(filename, ())
        reach = _GENUINE["reach"][filename] = _nested(roots, filename, {})
    return reach.get(id(code)) is code


def kind(code):
    """h (harness), w (transparent), m (library module code), l (library), c (anything else)."""
    if _GENUINE["harness"].get(id(code)) is code:
        return "h"
    filename = code.co_filename
    if filename.startswith(_STATE["testbed"]) or not genuine(code):
        return "c"
    if _GENUINE["module_ids"].get(id(code)) is code:
        return "m"
    if filename.startswith("<frozen ") or filename.endswith(_WRAPPERS):
        return "w"
    return "l"


# --------------------------------------------------------------------------- the hook

def _writes(args):
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _walk(frame):
    """(chain, working-copy files on the whole stack, an import on the way): the chain is
    the frames from the first that is neither the harness's nor transparent, as far as the
    first ``c`` frame after it (at most :data:`CHAIN` + 1)."""
    chain, stack, via_import, done = [], [], False, False
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
                done = what == "c" or len(chain) > CHAIN
        if name.startswith(testbed) and name not in stack and len(stack) < 32:
            stack.append(name)
        frame = frame.f_back
    return chain, stack, via_import


def _hook(event, args):
    if event not in WATCHED:
        return
    if event == "object.__setattr__" and (len(args) < 2 or args[1] != "__code__"):
        return
    if event == "open" and not _writes(args):
        return
    busy = _STATE["busy"]
    me = _ident()
    if me in busy:
        return
    busy.add(me)
    try:
        _handle(event, args)
    except Exception:
        pass
    finally:
        busy.discard(me)


def _handle(event, args):
    caller = sys._getframe(2)  # _handle <- _hook <- the frame that called the C function raising the event
    if event == "exec":
        code = args[0] if args else None
        if type(code) is _CodeType and _import_exec(code, caller):
            return
        if getattr(code, "co_filename", "<").endswith(".py"):
            return
    elif event == "compile":
        if _by_import_machinery(caller, "source_to_code"):
            return
        filename = args[1] if len(args) > 1 else None
        if isinstance(filename, str) and filename.startswith("/"):
            _claim(filename)
        if isinstance(filename, str) and filename.endswith(".py"):
            return  # a module compiled by another loader (pytest's assertion rewriting)
    elif event == "code.__new__":
        _claim(args[1] if len(args) > 1 else None)
    elif event == "object.__setattr__":
        if len(args) > 2 and args[1] == "__code__":
            _claim(getattr(getattr(args[0], "__code__", None), "co_filename", None))
            _claim(getattr(args[2], "co_filename", None))
        return
    elif event == "marshal.loads":
        if _by_import_machinery(caller, "compile_bytecode"):
            return
    _record(event, args, caller)


def _record(event, args, frame):
    chain, stack, via_import = _walk(frame)
    if not chain or not stack or (via_import and event not in _SEVERE):
        return
    budget = "severe" if event in _SEVERE else "writes" if event in _WRITES else "other"
    key = (event, tuple(tuple(f) for f in chain[:3]), stack[0])
    counts = _STATE["counts"]
    if key in _STATE["seen"] or counts.get(budget, 0) >= _STATE["cap"]:
        return
    _STATE["seen"].add(key)
    counts[budget] = counts.get(budget, 0) + 1
    emit({"k": "event", "event": event, "file": chain[0][0], "line": chain[0][1], "stack": stack,
          "chain": chain, "detail": _detail(event, args)})


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


def _snapshot(harness_modules):
    """What counts as genuine from the start: the harness's own code, the import
    machinery's, and every module already loaded (no repository code has run yet)."""
    for module in harness_modules:
        _nested([module["code"]], module["code"].co_filename, _GENUINE["harness"])
    boot, ext = sys.modules.get("_frozen_importlib"), sys.modules.get("_frozen_importlib_external")
    _GENUINE["frames"] = {"call": _code_of(boot, "_call_with_frames_removed"),
                          "exec_module": _code_of(ext, "_LoaderBasics", "exec_module"),
                          "frozen_exec": _code_of(boot, "FrozenImporter", "exec_module"),
                          "source_to_code": _code_of(ext, "SourceLoader", "source_to_code"),
                          "compile_bytecode": _code_of(ext, "_compile_bytecode"),
                          "SourceFileLoader": getattr(ext, "SourceFileLoader", None)}
    _GENUINE["machinery"] = _machinery()
    names = {m["name"] for m in harness_modules}
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if name in names or not isinstance(namespace, dict):
            continue
        copy = dict(namespace)
        for key, value in copy.items():
            if isinstance(value, type):
                copy[key] = (value, dict(value.__dict__))
        _GENUINE["preloaded"].append(copy)


def start(options, harness_modules=()):
    """Called once by the bootstrap: connect, say so, install the hook."""
    import _thread
    global _ident, _CodeType
    _ident = _thread.get_ident
    _CodeType = type(start.__code__)
    _STATE["lock"] = _thread.RLock()
    _STATE["testbed"] = str(options.get("testbed") or "/testbed").rstrip("/") + "/"
    _STATE["results"] = options.get("results")
    _STATE["path"] = options.get("socket")
    _STATE["pid"] = os.getpid()
    try:
        _STATE["sock"] = _connect(_STATE["path"])
    except Exception:
        _STATE["sock"] = None
    monitor = bool(options.get("monitor")) and hasattr(sys, "addaudithook")
    # sys.argv does not exist yet while site runs on Pythons before 3.8
    emit({"k": "boot", "python": sys.version.split()[0], "pid": os.getpid(),
          "argv": list(getattr(sys, "orig_argv", getattr(sys, "argv", [])))[:4], "monitor": monitor})
    if monitor:
        _wrap_gc()
        _snapshot(list(harness_modules))
        _STATE["started"] = True
        sys.addaudithook(_hook)


def _ident():
    return 0


class _Probe:
    def method(self):
        return self


_CodeType = type(_ident.__code__)
_FunctionType = type(_ident)
_MethodType = type(_Probe().method)
