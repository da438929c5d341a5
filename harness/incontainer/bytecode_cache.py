"""Root's bytecode of the bootstrap's modules (trusted; made once per sandbox, as root).

Every test process loads the harness's four modules (``_harness_boot``); compiling them from
source costs each process about 6.5 ms on Python 3.9 (pytest-5103's suite starts ten Python
processes). The launcher (root) starts this script with the test command's interpreter,
isolated (``-I -S``: no site, no ``.pth`` file, nothing of the working copy on ``sys.path``),
while the set-up step runs and before anything of the model has run (:func:`start`), and
waits for it at the first plan (:func:`finish`)::

    /harness/bytecode/                       BYTECODE_DIR    root, 0755
        _harness_genuine.<magic>.bin         magic, the source's size and mtime (ns), marshal data
        ...

The bootstrap (``_harness_boot._cached``) uses a file only when it is root's and nobody else
can write it, in a directory of the same kind, when its magic is the process's own
interpreter's, when the size and mtime recorded are those of the trusted source file the
process has just opened, when the process runs without ``-O``, and when the code object is
named after that source file; any other process compiles the source as before. The files
are named by the interpreter's magic number: the sandbox's other Pythons (tox's, a child of
another version) find none of theirs and compile.

    python3 -I -S bytecode_cache.py OUT_DIR SOURCE_DIR
"""

import os
import sys

NAMES = ("_harness_genuine", "_harness_monitor", "_harness_identity", "_harness_outcomes")
#: seconds :func:`finish` waits for the compilation (it runs while the set-up step does)
WAIT_SECONDS = 60


def file_name(name, magic):
    """The cache file of module ``name`` for an interpreter whose magic number is ``magic``."""
    return "{}.{}.bin".format(name, magic.hex())


def header(magic, st):
    """What a cache file starts with: the magic number, the source's size and mtime (ns)."""
    return magic + st.st_size.to_bytes(8, "little") + st.st_mtime_ns.to_bytes(8, "little")


def interpreter_magic():
    """This interpreter's bytecode magic number, from the import machinery already loaded."""
    return getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", None)


def compile_all(out_dir, source_dir):
    """Compile every module of :data:`NAMES` into ``out_dir`` (files replaced whole, 0444)."""
    import marshal
    magic = interpreter_magic()
    if not magic:
        return 1
    for name in NAMES:
        path = os.path.join(source_dir, name + ".py")
        with open(path, "rb") as handle:
            source = handle.read()
            st = os.fstat(handle.fileno())
        code = compile(source, path, "exec", dont_inherit=True, optimize=0)
        target = os.path.join(out_dir, file_name(name, magic))
        tmp = target + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o444)
        try:
            data = header(magic, st) + marshal.dumps(code)
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    return 0


# --------------------------------------------------------------------------- the launcher's side

def _root_only(path):
    """``path`` (resolved) and every directory above it are root's and nobody else can write
    them (the interpreter root is about to run must not be the test user's)."""
    while True:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def start(spec, source_dir, out_dir):
    """Start compiling (as root) with the first ``python3`` on the test command's ``PATH``
    (``spec["path"]``), when that interpreter is root's all the way up; the process, or None
    when there is nothing to do or it could not start."""
    if not spec or not isinstance(spec.get("path"), str):
        return None
    import shutil
    import subprocess
    found = shutil.which("python3", path=spec["path"])
    # the resolved file is what runs: no symlink on the way that someone else could turn
    python = os.path.realpath(found) if found else None
    if python is None or not _root_only(python):
        return None
    try:
        os.mkdir(out_dir, 0o755)
        os.chmod(out_dir, 0o755)
        return subprocess.Popen([python, "-I", "-S", os.path.join(source_dir, "bytecode_cache.py"), out_dir,
                                 source_dir], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd="/", env={"PATH": "/usr/bin:/bin"})
    except OSError:
        return None


def finish(process, out_dir):
    """``out_dir`` once the compilation succeeded, else None (the bootstrap then compiles)."""
    if process is None:
        return None
    try:
        code = process.wait(WAIT_SECONDS)
    except Exception:
        process.kill()
        process.wait()
        return None
    return out_dir if code == 0 else None


if __name__ == "__main__":
    sys.exit(compile_all(sys.argv[1], sys.argv[2]))
