"""The harness's bootstrap for test processes (trusted; root-owned, read-only).

Run by the site hook (``harness.incontainer.site_hook``: a ``.pth`` file in every
site-packages directory of the environment, processed by ``site`` before the main module
and before any repository code) in every Python process of the environment, however it
was started and whatever environment its parent passed. It does nothing unless

* the activation file (``/harness/activation.json``, written by the launcher just before
  the test command and removed after it) is a regular file of root's that nobody else can
  write, and
* this process runs as the test user it names (the build, the re-install, the services
  and root's own steps run without it);

then it loads the harness's modules (``_harness_genuine``, ``_harness_monitor``,
``_harness_identity``, ``_harness_outcomes``) from the files beside it (never through ``sys.path``,
so no repository module can shadow them; from root's bytecode of those very files when the
launcher made it for this interpreter, ``bytecode_cache.py``, else compiled from source), and

* starts the runtime tamper monitor (``_harness_monitor``: a PEP 578 audit hook) writing to
  the evidence socket the activation file names;
* loads the runner-identity registry (``_harness_identity``), which the runners' set-up fills
  before any repository code runs and compares while and after the tests run;
* pre-imports the outcome-origin pytest plugin (``_harness_outcomes``) and has every pytest
  session of the process load it (``-p _harness_outcomes`` finds it in ``sys.modules``).

It imports nothing else (no ``json``, no ``re``, no ``pluggy``: a process that never runs pytest
pays for two compiled modules and a socket); should anything be imported meanwhile,
``sys.path`` holds only directories that only root can write. Nothing is added to
``sys.path`` or to the environment.
"""

import os
import sys

_ACTIVATION = globals().get("_HARNESS_ACTIVATION", "/harness/activation.json")
#: the owner the activation file and the modules must have (root; a host-side test runs
#: the bootstrap with its own uid)
_OWNER = globals().get("_HARNESS_OWNER", 0)
_NAMES = ("_harness_genuine", "_harness_monitor", "_harness_identity", "_harness_outcomes")


def _owned(fd):
    st = os.fstat(fd)
    return (st.st_mode & 0o170000) == 0o100000 and st.st_uid == _OWNER and not st.st_mode & 0o022


def _activation():
    """The activation file's bytes when it is root's, else None."""
    try:
        fd = os.open(_ACTIVATION, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return os.read(fd, 1 << 16) if _owned(fd) else None
    finally:
        os.close(fd)


def parse_activation(text):
    """The launcher's flat JSON object of strings and integers (paths the harness chose:
    no escapes, no commas), read without importing anything; None for anything else."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    out = {}
    for item in text[1:-1].split(","):
        key, sep, value = item.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not sep or len(key) < 2 or key[0] != '"' or key[-1] != '"' or "\\" in item:
            return None
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            out[key[1:-1]] = value[1:-1]
        elif value.lstrip("-").isdigit():
            out[key[1:-1]] = int(value)
        else:
            return None
    return out


def _read_owned(path):
    """(the bytes, the fstat) of ``path`` when it is a regular file of root's that nobody else
    can write (never through a symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not _owned(fd):
            return None
        st = os.fstat(fd)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), st


def _bytecode_dir(options):
    """The directory of root's bytecode the activation names, when it is root's and nobody
    else can write it, and this process can use bytecode made without ``-O``; else None."""
    directory = options.get("bytecode")
    if not isinstance(directory, str) or not directory.startswith("/") or sys.flags.optimize:
        return None
    try:
        st = os.lstat(directory)
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != _OWNER or st.st_mode & 0o022:
        return None
    return directory


def _cached(name, path, source_stat, cache):
    """The code object of ``path`` from root's bytecode (bytecode_cache.py) when it was made
    from this very file by an interpreter of this one's magic number; else None. The file's
    name and header are bytecode_cache's ``file_name`` and ``header``, spelled out here: the
    bootstrap imports nothing of the harness's before its modules are loaded."""
    magic = getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", None)
    if cache is None or not magic:
        return None
    found = _read_owned(os.path.join(cache, "{}.{}.bin".format(name, magic.hex())))
    if found is None:
        return None
    data = found[0]
    head = magic + source_stat.st_size.to_bytes(8, "little") + source_stat.st_mtime_ns.to_bytes(8, "little")
    if data[:len(head)] != head:
        return None
    import marshal
    try:
        code = marshal.loads(data[len(head):])
    except Exception:
        return None
    if type(code) is not type(_cached.__code__) or code.co_filename != path:
        return None
    return code


def _load(name, directory, cache=None):
    """Run the trusted module ``name`` from its file, as module ``name``: from root's bytecode
    of it in ``cache`` when there is one made from this very file, else compiled."""
    path = os.path.join(directory, name + ".py")
    found = _read_owned(path)
    if found is None:
        raise ImportError(path + " is not the harness's")
    source, st = found
    code = _cached(name, path, st, cache)
    cached = code is not None
    if code is None:
        code = compile(source, path, "exec", dont_inherit=True)
    module = type(sys)(name)
    module.__file__ = path
    spec_type = getattr(sys.modules.get("_frozen_importlib"), "ModuleSpec", None)
    if spec_type is not None:
        module.__spec__ = spec_type(name, None, origin=path)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return {"name": name, "code": code, "module": module, "cached": cached}


def _trusted_path():
    """``sys.path`` without what the test user could write (for the imports made here)."""
    kept = []
    for entry in sys.path:
        try:
            directory = os.path.abspath(entry or os.curdir)
            parts = directory.split(os.sep)
            ok = True
            for i in range(1, len(parts) + 1):
                st = os.lstat(os.sep + os.sep.join(p for p in parts[:i] if p))
                if (st.st_mode & 0o170000) != 0o040000 or st.st_uid not in (0, _OWNER) or st.st_mode & 0o022:
                    ok = False
                    break
        except OSError:
            ok = False
        if ok:
            kept.append(entry)
    return kept


def _boot():
    if any(name in sys.modules for name in _NAMES):
        return  # a second site directory with the hook (a venv with the system's packages)
    data = _activation()
    if data is None:
        return
    directory = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = _trusted_path()
    loaded = []
    try:
        options = parse_activation(data.decode("utf-8"))
        if options is None or options.get("uid") != os.getuid():
            return
        cache = _bytecode_dir(options)
        loaded.append(_load("_harness_genuine", directory, cache))
        loaded.append(_load("_harness_monitor", directory, cache))
        try:
            loaded.append(_load("_harness_identity", directory, cache))
        except Exception:
            pass  # the boot record says it is missing (runner_identity_unchecked on the host)
        try:
            outcomes = _load("_harness_outcomes", directory, cache)
            loaded.append(outcomes)
            outcomes["module"].install()
        except Exception:
            pass  # without pytest's plugin the monitor still runs
    finally:
        sys.path[:] = saved
    loaded[1]["module"].start(options, loaded)


try:
    _boot()
except Exception:  # never break the interpreter the tests run in (old Pythons, odd set-ups)
    pass
