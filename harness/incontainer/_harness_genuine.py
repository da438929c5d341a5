"""Which code objects of a test process are genuine (trusted; loaded by the bootstrap).

Genuine means: the code object is reachable (through nested code constants) from a module
code object that the unmodified import machinery compiled or unmarshalled from a file under
directories only root can write (:func:`import_exec`, called when that module's ``exec``
event fires: the machinery's functions, ``compile``, ``marshal``, ``_io`` and
``sys.pycache_prefix`` are compared by identity with what they were at start, and no
method of the loader may have been replaced on the instance), or from a module already
loaded when the bootstrap ran, before any repository code (:func:`snapshot`); and no
dynamic ``compile``, ``code.__new__`` (``CodeType``, ``code.replace``) or ``__code__``
assignment in this process claimed that file name (:func:`claim`). Code ``exec``'d under a
borrowed file name, functions built from forged code objects with a library's globals and
sourceless ``.pyc`` files therefore never are, whatever they claim.

:func:`kind` classifies a frame's code for the monitor (harness/incontainer/_harness_monitor.py).
"""

import os
import sys

#: standard-library modules that only pass a request on (their caller is the one to blame)
WRAPPERS = ("/inspect.py", "/traceback.py", "/pathlib.py", "/shutil.py", "/subprocess.py", "/os.py", "/io.py",
            "/_pyio.py", "/tempfile.py", "/codecs.py", "/threading.py", "/runpy.py")
_PY_DIR = os.path.dirname(os.path.abspath(__file__)) + "/"
_MISSING = object()
#: no machinery call remembered (:func:`by_import_machinery`)
_NO_CALL = (None, False)
_GENUINE = {"harness": {}, "modules": {}, "module_ids": {}, "preloaded": [], "preloaded_codes": None,
            "claimed": set(), "reach": {}, "dirs": {}, "machinery": [], "frames": {}, "testbed": "/testbed/",
            "generations": {}, "intact": _NO_CALL}
#: id(code) -> (code, its file's generation, its file name, kind): the code object is held, so its id is not reused
_KINDS = {}


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
    if not filename.startswith("/") or filename.startswith((_GENUINE["testbed"], _PY_DIR)):
        return False
    return _trusted_dir(os.path.dirname(filename))


def import_exec(code, frame):
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
    _changed(filename)
    _GENUINE["module_ids"][id(code)] = code
    return True


def _plain_loader(loader):
    """No method of the loader replaced on the instance (only the harness's own wrapper of
    ``exec_module``, which lets pytest register the outcome plugin, is allowed)."""
    extra = set(vars(loader)) - {"name", "path"}
    if not extra:
        return True
    wrapper = getattr(vars(loader).get("exec_module"), "__code__", None)
    return extra == {"exec_module"} and wrapper is not None and _GENUINE["harness"].get(id(wrapper)) is wrapper


def by_import_machinery(frame, *keys):
    """The frame that called ``compile``/``marshal.loads`` is the import machinery's (one of
    ``keys``: ``source_to_code``, ``compile_bytecode``), and the machinery is intact.

    The answer is remembered for that frame (held, so no other frame can take its id) until
    the monitor's next event of another kind (:func:`forget_machinery_call`): Pythons 3.8 and
    3.9 raise ``code.__new__`` for every code object such a call makes (83,000 in one
    pytest-5103 run; Debian's 3.9.2 raises no ``marshal.loads`` before them), and
    :func:`made_by_import_machinery` answers the rest of them from the first."""
    if not _machinery_frame(frame, keys):
        return False
    ok = _intact()
    _GENUINE["intact"] = (frame, ok)
    return ok


def made_by_import_machinery(frame):
    """For ``code.__new__``: the frame is the import machinery's ``compile`` or ``marshal``
    call, and the machinery was intact at that call's first event.

    Nothing of Python runs inside those C calls but audit hooks (a hook added after ours is
    itself a severe event), and what they make was decided by the bytes and the machinery at
    the call: the state at its first event is the state for all its code objects. The
    module's ``exec``, which decides what is genuine, still compares the whole machinery."""
    seen, ok = _GENUINE["intact"]
    if seen is frame:   # only a machinery frame is ever remembered
        return ok
    return by_import_machinery(frame, "source_to_code", "compile_bytecode")


def forget_machinery_call():
    """Drop the remembered frame (the monitor calls it at each event that is not one of a
    machinery call's code objects: the call has ended, and its frame is not kept alive)."""
    _GENUINE["intact"] = _NO_CALL


def machinery_target(frame):
    """The source file an import machinery's ``_compile_bytecode`` frame is loading for, or None."""
    if frame is None or frame.f_code is not _GENUINE["frames"].get("compile_bytecode"):
        return None
    target = frame.f_locals.get("source_path")
    return target if isinstance(target, str) else None


def _machinery_frame(frame, keys):
    frames = _GENUINE["frames"]
    if frame is not None and frame.f_code is frames.get("call"):
        frame = frame.f_back
    if frame is None:
        return False
    code = frame.f_code
    for key in keys:
        if code is frames.get(key):
            return True
    return False


def claim(filename):
    if isinstance(filename, str) and filename not in _GENUINE["claimed"]:
        _GENUINE["claimed"].add(filename)
        _changed(filename)


def _changed(filename):
    """What is genuine under ``filename`` changed: its reach is recomputed, and the kinds of
    its code objects (a code object's kind depends on its own file's imports and claims only)."""
    _GENUINE["reach"].pop(filename, None)
    generations = _GENUINE["generations"]
    generations[filename] = generations.get(filename, 0) + 1


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


#: the kinds of frames of genuine installed library code (``m``: a library's module code
#: while it is imported; ``l``: any other)
LIBRARY_KINDS = ("l", "m")

#: standard-library files in which every ``sys._getframe`` call, in every Python from 3.6 to
#: 3.13, reads the calling module's name and nothing else (``sys._getframe(n).f_globals
#: .get('__name__', ...)`` or ``...f_globals['__name__']``): typing's TypeVar, NamedTuple,
#: TypedDict and ``_caller``, ``collections.namedtuple``, enum's functional API. The frame
#: never leaves the function, so such a call is the library's own work, not a proxy that
#: hands a frame to its caller (tests/unit/test_monitor_name_reads.py checks the premise on
#: every interpreter the host holds). Reference patches define TypeVars and named tuples
#: at module level; charged to them, each was a ``monitor_sys__getframe`` flag on an honest
#: run (19 Verified reference runs at 8376c12) and, unfiltered, most of the events a run sent.
NAME_READERS = ("typing.py", "collections/__init__.py", "enum.py")
#: the Pythons whose NAME_READERS were read (a later one may use a frame otherwise)
NAME_READERS_CHECKED = ((3, 6), (3, 13))
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + "/"


def reads_a_name_only(code):
    """True when ``code``, the frame that called ``sys._getframe``, is genuine code of one of
    this interpreter's :data:`NAME_READERS` (on a Python they were checked for)."""
    low, high = NAME_READERS_CHECKED
    if not low <= sys.version_info[:2] <= high:
        return False
    filename = code.co_filename
    if not filename.startswith(_STDLIB) or filename[len(_STDLIB):] not in NAME_READERS:
        return False
    return kind(code) in LIBRARY_KINDS


def blamed(kinds):
    """Which of an event's frames the event is charged to, as an index into ``kinds`` (the
    frames' kinds, innermost first, harness and transparent frames left out), or None when it
    is a library's own work. The one rule, shared by the monitor (which sends no record the
    host would discard) and the host (``harness.integrity.attribution``, whose docstring says
    why): a run of innermost library frames holding a library's module code, or two frames or
    more, is the library's own; so is a run with nothing outside it; a run of one frame is a
    proxy, charged to its caller."""
    run = 0
    while run < len(kinds) and kinds[run] in LIBRARY_KINDS:
        run += 1
    if run and (run >= 2 or kinds[0] == "m"):
        return None
    if run >= len(kinds):
        return None
    return run


def library_own_already(kinds):
    """True when the first frames' kinds make the event a library's own whatever frames
    follow (:func:`blamed` is None for every chain that starts so): the walk can stop."""
    return len(kinds) > 0 and kinds[0] in LIBRARY_KINDS and (
        kinds[0] == "m" or (len(kinds) > 1 and kinds[1] in LIBRARY_KINDS))


def kind(code):
    """h (harness), w (transparent), m (library module code), l (library), c (anything else);
    remembered per code object until a verified import or a claim of its own file changes what
    is genuine there."""
    known = _KINDS.get(id(code))
    filename = code.co_filename   # compared too: ``_imp._fix_co_filename`` renames a code object in place
    generation = _GENUINE["generations"].get(filename, 0)
    if known is not None and known[0] is code and known[1] == generation and known[2] == filename:
        return known[3]
    found = _kind(code)
    _KINDS[id(code)] = (code, generation, filename, found)
    return found


def _kind(code):
    if _GENUINE["harness"].get(id(code)) is code:
        return "h"
    filename = code.co_filename
    if filename.startswith(_GENUINE["testbed"]) or not genuine(code):
        return "c"
    if _GENUINE["module_ids"].get(id(code)) is code:
        return "m"
    if filename.startswith("<frozen ") or filename.endswith(WRAPPERS):
        return "w"
    return "l"


def snapshot(harness_modules, testbed):
    """What counts as genuine from the start: the harness's own code, the import
    machinery's, and every module already loaded (no repository code has run yet)."""
    _GENUINE["testbed"] = testbed
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


def _probe():
    return 0


class _Probe:
    def method(self):
        return self


CodeType = type(_probe.__code__)
_FunctionType = type(_probe)
_MethodType = type(_Probe().method)
