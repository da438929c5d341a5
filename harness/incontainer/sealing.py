"""The seal of the working copy (trusted; imported by ``launcher.py`` from the trusted
directory, run as root in the sandbox; Python >= 3.6, standard library only).

What holds in the sandbox (root holds CHOWN, DAC_OVERRIDE and FOWNER; the test user holds
no capability): in a root-owned directory of mode 1777 (sticky) the test user may create
entries, but cannot rename, replace or remove an entry it does not own; a root-owned file
without write permission for others cannot be changed, truncated, chmod-ed or touched by
it; with ``fs.protected_hardlinks`` = 1 (the kernel's setting, which the container
shares) it cannot hard-link a file it does not own, and a link made otherwise changes the
sealed inode's link count and ctime (fingerprinted). What the sticky directories let it
do, create entries, is surveyed after the run (:func:`survey`) and judged on the host
(harness/integrity/evidence.py): planted test infrastructure, and entries the import
system finds before a sealed module (``name/``, ``name.*.so`` beside ``name.py``). Planted
bytecode is impossible: every sealed directory with a Python source gets a root-owned
``__pycache__``, and bytecode the pristine tree does not have is removed before the seal
(:func:`purge_bytecode`).
"""

import hashlib
import os
import shutil
import stat

def inside(testbed, rel):
    """The absolute path of ``rel`` under testbed, or None if it would leave it."""
    if not rel or rel.startswith("/") or "\x00" in rel or ".." in rel.split("/"):
        return None
    return os.path.join(testbed, rel)


def sha256_fd(fd):
    digest = hashlib.sha256()
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return digest.hexdigest()
        digest.update(block)


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


# --------------------------------------------------------------------------- the seal
#: mode of a sealed directory: anyone may add entries, only root may rename or remove them
SEALED_DIR_MODE = 0o1777
#: mode of the ``__pycache__`` of a sealed directory: nobody but root adds bytecode there
PYCACHE_MODE = 0o755
PYCACHE = "__pycache__"
BYTECODE_SUFFIXES = (".pyc", ".pyo")
#: suffixes of extension modules: ``name.cpython-39-x86_64-linux-gnu.so`` is found before ``name.py``
EXTENSION_SUFFIXES = (".so", ".pyd")
#: entries the survey of created entries inspects at most (beyond it: ``truncated``)
SURVEY_BUDGET = 500000


def fingerprint(path, digest=True):
    """What a sealed entry is now: kind, owner, mode, inode, links, and for files sizes,
    inode times and (``digest``) the content hash; never follows links. Without write
    access a sealed file cannot change without its ctime changing, so whole trees are
    compared by metadata. A sealed directory is compared by identity only: the tests may
    add entries to it (each sealed entry in it is compared on its own)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    entry = {"uid": st.st_uid, "mode": stat.S_IMODE(st.st_mode), "ino": st.st_ino, "nlink": st.st_nlink}
    if stat.S_ISDIR(st.st_mode):
        entry["kind"] = "dir"
        del entry["nlink"]  # a subdirectory the tests create adds a link
        return entry
    entry.update(size=st.st_size, mtime=st.st_mtime_ns, ctime=st.st_ctime_ns)
    if stat.S_ISREG(st.st_mode):
        entry["kind"] = "file"
        if digest:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                entry["sha256"] = sha256_fd(fd)
            finally:
                os.close(fd)
    elif stat.S_ISLNK(st.st_mode):
        entry["kind"], entry["target"] = "symlink", os.readlink(path)
    else:
        entry["kind"] = "other"
    return entry


def walk_tree(root):
    out = [root]
    for base, dirs, files in os.walk(root, followlinks=False):
        out.extend(os.path.join(base, d) for d in dirs)
        out.extend(os.path.join(base, f) for f in files)
    return out


def seal(testbed, plan, record):
    """Make the sealed set root-owned and not writable by the test user. Returns (sealed
    paths, sealed directories): the directories accept new entries (root-owned 1777), the
    rest are read-only; each sealed directory with a Python source in it gets a root-owned
    ``__pycache__`` (planted bytecode would be loaded instead of a sealed source)."""
    sealed, dirs, errors = [], [], []

    def own(path):
        try:
            st = os.lstat(path)
            os.lchown(path, 0, 0)
            if stat.S_ISDIR(st.st_mode):
                os.chmod(path, PYCACHE_MODE if os.path.basename(path) == PYCACHE else SEALED_DIR_MODE)
            elif not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)
            return True
        except OSError as exc:
            errors.append("{}: {}".format(path, exc))
            return False

    def is_dir(path):
        return os.path.isdir(path) and not os.path.islink(path)

    for rel in plan.get("sticky", []):
        path = testbed if rel == "" else inside(testbed, rel)
        if path and is_dir(path) and own(path):
            sealed.append(path)
            dirs.append(path)
    for rel in plan.get("trees", []):
        path = inside(testbed, rel)
        if path and is_dir(path):
            for entry in walk_tree(path):
                if own(entry):
                    sealed.append(entry)
                    if is_dir(entry) and os.path.basename(entry) != PYCACHE:
                        dirs.append(entry)
    for rel in plan.get("files", []):
        path = inside(testbed, rel)
        if path and os.path.lexists(path) and own(path):
            sealed.append(path)
    sealed_set = set(sealed)
    for directory in sorted(set(dirs)):
        if not any(os.path.join(directory, n) in sealed_set for n in _names(directory) if n.endswith(".py")):
            continue
        cache = os.path.join(directory, PYCACHE)
        try:
            if os.path.lexists(cache) and not is_dir(cache):
                os.unlink(cache)
            if not os.path.lexists(cache):
                os.mkdir(cache, PYCACHE_MODE)
            sealed.extend(p for p in walk_tree(cache) if p not in sealed_set and own(p))
        except OSError as exc:
            errors.append("{}: {}".format(cache, exc))
    record["seal_errors"] = errors[:50]
    return sorted(set(sealed)), sorted(set(dirs))


def _names(directory):
    try:
        return os.listdir(directory)
    except OSError:
        return []


def purge_bytecode(testbed, pristine, record):
    """Remove every ``__pycache__`` entry and stray ``*.pyc``/``*.pyo`` of the working copy
    that is not byte-identical to the pristine tree's: bytecode is checked against its
    source's mtime and size only (a hash-based pyc not even that), so bytecode that code of
    the model wrote (a build, a ``setup.py``) could run instead of the sources the host
    inspected. Pristine bytecode stays (it only saves compiling)."""
    removed = []
    for base, dirs, files in os.walk(testbed, followlinks=False):
        rel_base = os.path.relpath(base, testbed)
        if rel_base == ".git" or rel_base.startswith(".git" + os.sep):
            dirs[:] = []
            continue
        in_cache = os.path.basename(base) == PYCACHE
        for name in list(dirs):
            path = os.path.join(base, name)
            if (in_cache or name == PYCACHE) and os.path.islink(path):
                dirs.remove(name)
                files.append(name)   # a symlink where a cache directory belongs: removed below
        for name in files:
            if not (in_cache or name.endswith(BYTECODE_SUFFIXES)):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, testbed)
            if not _same_as_pristine(path, os.path.join(pristine, rel)):
                try:
                    remove(path)
                    removed.append(rel)
                except OSError as exc:
                    record.setdefault("delete_errors", []).append("{}: {}".format(rel, exc))
        if in_cache:
            for name in dirs:  # nothing but files belongs in a cache directory
                path = os.path.join(base, name)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(os.path.relpath(path, testbed))
            dirs[:] = []
    record["bytecode_removed"] = {"count": len(removed), "sample": sorted(removed)[:50]}


def _same_as_pristine(path, original):
    try:
        a, b = os.lstat(path), os.lstat(original)
    except OSError:
        return False
    if not (stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode)) or a.st_size != b.st_size:
        return False
    fd_a = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fd_b = os.open(original, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            return sha256_fd(fd_a) == sha256_fd(fd_b)
        finally:
            os.close(fd_b)
    finally:
        os.close(fd_a)


def listings(dirs):
    """Each sealed directory's entries when the seal is done."""
    return {d: set(_names(d)) for d in dirs}


def survey(testbed, dirs, before, sealed, watch):
    """What the tests created in the sealed directories (and inside directories they
    created there), for the host to judge: a count, a sample, and every *watched* entry
    (its name is one of ``watch["names"]`` or ends with one of ``watch["suffixes"]``, or
    it is created directly in a sealed directory beside a sealed ``name.py`` as ``name``
    or ``name.*.so``: what the import system would find before the sealed module).
    Entries: ``path``, ``kind``, ``direct`` (in a sealed directory itself), ``beside``."""
    names, suffixes = frozenset(watch.get("names", [])), tuple(watch.get("suffixes", []))
    sealed = set(sealed)
    out = {"count": 0, "sample": [], "watched": [], "truncated": False}

    def note(path, direct, beside=None):
        out["count"] += 1
        rel = os.path.relpath(path, testbed)
        if len(out["sample"]) < 50:
            out["sample"].append(rel)
        name = os.path.basename(path)
        if beside or name in names or (suffixes and name.endswith(suffixes)):
            if len(out["watched"]) < 2000:
                out["watched"].append({"path": rel, "kind": _kind(path), "direct": direct, "beside": beside})
            else:
                out["truncated"] = True

    for directory in dirs:
        for name in sorted(set(_names(directory)) - before.get(directory, set())):
            if out["count"] >= SURVEY_BUDGET:
                out["truncated"] = True
                return out
            path = os.path.join(directory, name)
            stem = name.split(".", 1)[0]
            source = os.path.join(directory, stem + ".py")
            shadowing = name == stem or name.endswith(EXTENSION_SUFFIXES)
            note(path, True, os.path.relpath(source, testbed) if shadowing and source in sealed else None)
            if os.path.isdir(path) and not os.path.islink(path):
                for base, subdirs, files in os.walk(path, followlinks=False):
                    for entry in subdirs + files:
                        if out["count"] >= SURVEY_BUDGET:
                            out["truncated"] = True
                            return out
                        note(os.path.join(base, entry), False)
    return out


def _kind(path):
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "gone"
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else \
        "symlink" if stat.S_ISLNK(mode) else "other"


def sysctl(name):
    """A kernel setting as the container sees it (``fs/protected_hardlinks``), or None."""
    try:
        with open("/proc/sys/" + name) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None
