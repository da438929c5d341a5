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


# --------------------------------------------------------------------------- walks
# Every walk over what code of the model (a build, the tests) may have left is iterative and
# bounded: a tree thousands of levels deep (a RecursionError in os.walk and shutil.rmtree
# before Python 3.12, paths past PATH_MAX everywhere) or of millions of entries must never
# stop the trusted steps, which then say what they could not see.

#: deepest level a survey or purge descends to (each level holds one open directory)
MAX_DEPTH = 400
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


class Walk:
    """What :func:`walk` saw: ``entries`` (relative path, lstat) and whether it stopped
    before the end (``truncated``: the entry budget or :data:`MAX_DEPTH`), with the errors."""

    def __init__(self):
        self.entries, self.truncated, self.errors = [], False, []


def walk(root, budget, skip=(), max_depth=MAX_DEPTH):
    """Every entry under ``root`` (not root itself), depth first, through directory file
    descriptors (no path longer than one name is ever handed to the kernel), at most
    ``budget`` entries and :data:`MAX_DEPTH` levels; ``skip``: top-level names left out.
    Never follows a symlink. At most ``max_depth`` + 1 descriptors are open at once."""
    out = Walk()
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        out.errors.append("{}: {}".format(root, exc))
        out.truncated = True
        return out
    frames = [[top, "", _listing(top, out, root), 0]]
    try:
        while frames:
            frame = frames[-1]
            fd, rel, names, index = frame
            if index >= len(names):
                os.close(fd)
                frames.pop()
                continue
            frame[3] = index + 1
            name = names[index]
            if not rel and name in skip:
                continue
            if len(out.entries) >= budget:
                out.truncated = True
                break
            child = rel + "/" + name if rel else name
            try:
                st = os.lstat(name, dir_fd=fd)
            except OSError as exc:
                out.errors.append("{}: {}".format(child[-300:], exc))
                continue
            out.entries.append((child, st))
            if not stat.S_ISDIR(st.st_mode):
                continue
            if len(frames) > max_depth:
                out.truncated = True
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                out.errors.append("{}: {}".format(child[-300:], exc))
                out.truncated = True
                continue
            frames.append([sub, child, _listing(sub, out, child), 0])
    finally:
        for frame in frames:
            os.close(frame[0])
    return out


def _listing(fd, out, where):
    try:
        return sorted(os.listdir(fd))
    except OSError as exc:
        out.errors.append("{}: {}".format(str(where)[-300:], exc))
        out.truncated = True
        return []


def remove(path):
    """Remove ``path`` whatever it is; a directory however deep (:func:`remove_tree`)."""
    if os.path.isdir(path) and not os.path.islink(path):
        remove_tree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def remove_tree(path):
    """Remove a directory tree iteratively at any depth: each directory is emptied from a
    descriptor, its subdirectories first moved up beside ``path``'s own children (a rename
    within the file system), so nothing is ever more than two levels down. Raises OSError
    when an entry cannot be removed."""
    top = os.open(path, _DIR_FLAGS)
    hoisted = 0
    try:
        pending = [None]
        while pending:
            name = pending.pop()
            fd = top if name is None else os.open(name, _DIR_FLAGS, dir_fd=top)
            try:
                for child in os.listdir(fd):
                    st = os.lstat(child, dir_fd=fd)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(child, dir_fd=fd)
                    elif fd == top:
                        pending.append(child)
                    else:
                        while True:
                            hoisted += 1
                            new = ".harness-removing-{}".format(hoisted)
                            try:
                                os.lstat(new, dir_fd=top)
                            except FileNotFoundError:
                                break
                        os.rename(child, new, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(new)
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


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


#: most entries one sealed tree may hold (a test directory; pylint's has 2,426)
SEAL_BUDGET = 2000000


def walk_tree(root, errors=None):
    """``root`` and every entry under it, as paths (a sealed tree: the pristine tree's test
    directory, restored); what the walk could not reach goes to ``errors``."""
    seen = walk(root, SEAL_BUDGET)
    if errors is not None and (seen.truncated or seen.errors):
        errors.append("{}: walk stopped early ({})".format(root, "; ".join(seen.errors[:3]) or "too large"))
    return [root] + [os.path.join(root, rel) for rel, _ in seen.entries]


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
            for entry in walk_tree(path, errors):
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
            sealed.extend(p for p in walk_tree(cache, errors) if p not in sealed_set and own(p))
        except OSError as exc:
            errors.append("{}: {}".format(cache, exc))
    record["seal_errors"] = errors[:50]
    return sorted(set(sealed)), sorted(set(dirs))


def _names(directory):
    try:
        return os.listdir(directory)
    except OSError:
        return []


#: most entries of the working copy the bytecode purge inspects
PURGE_BUDGET = 5000000


def purge_bytecode(testbed, pristine, record):
    """Remove every ``__pycache__`` entry and stray ``*.pyc``/``*.pyo`` of the working copy
    that is not byte-identical to the pristine tree's: bytecode is checked against its
    source's mtime and size only (a hash-based pyc not even that), so bytecode that code of
    the model wrote (a build, a ``setup.py``) could run instead of the sources the host
    inspected. Pristine bytecode stays (it only saves compiling). The walk is
    :func:`walk` (iterative, bounded); a working copy it could not walk to the end is
    recorded (``truncated``: the host cannot rule planted bytecode out)."""
    removed = []
    seen = walk(testbed, PURGE_BUDGET, skip=(".git",))
    gone = []   # cache directories already removed whole: nothing under them is left to remove
    for rel, st in seen.entries:
        parts = rel.split("/")
        if any(rel.startswith(g + "/") for g in gone[-1:]):
            continue
        in_cache = len(parts) > 1 and parts[-2] == PYCACHE
        directory = stat.S_ISDIR(st.st_mode)
        if not (in_cache or parts[-1] == PYCACHE and stat.S_ISLNK(st.st_mode)
                or (not directory and parts[-1].endswith(BYTECODE_SUFFIXES))):
            continue
        path = os.path.join(testbed, rel)
        if directory:   # nothing but files belongs in a cache directory
            try:
                remove_tree(path)
                removed.append(rel)
                gone.append(rel)
            except OSError as exc:
                record.setdefault("delete_errors", []).append("{}: {}".format(rel[-300:], exc))
            continue
        if not _same_as_pristine(path, os.path.join(pristine, rel)):
            try:
                os.unlink(path)
                removed.append(rel)
            except OSError as exc:
                record.setdefault("delete_errors", []).append("{}: {}".format(rel[-300:], exc))
    record["bytecode_removed"] = {"count": len(removed), "sample": sorted(removed)[:50],
                                  "truncated": seen.truncated, "errors": seen.errors[:10]}


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
    Entries: ``path``, ``kind``, ``direct`` (in a sealed directory itself), ``beside``.
    Walks are :func:`walk`'s (iterative, bounded by :data:`SURVEY_BUDGET` entries and
    :data:`MAX_DEPTH` levels): a survey that could not see everything says so
    (``truncated``, ``errors``)."""
    names, suffixes = frozenset(watch.get("names", [])), tuple(watch.get("suffixes", []))
    sealed = set(sealed)
    out = {"count": 0, "sample": [], "watched": [], "truncated": False, "errors": []}

    def note(rel, mode, direct, beside=None):
        out["count"] += 1
        if len(out["sample"]) < 50:
            out["sample"].append(rel[-1000:])
        name = rel.rsplit("/", 1)[-1]
        if beside or name in names or (suffixes and name.endswith(suffixes)):
            if len(out["watched"]) < 2000:
                out["watched"].append({"path": rel[-4096:], "kind": _kind_of(mode), "direct": direct,
                                       "beside": beside})
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
            rel = os.path.relpath(path, testbed)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                mode = None
            note(rel, mode, True, os.path.relpath(source, testbed) if shadowing and source in sealed else None)
            if mode is not None and stat.S_ISDIR(mode):
                seen = walk(path, SURVEY_BUDGET - out["count"])
                for sub, st in seen.entries:
                    note(rel + "/" + sub, st.st_mode, False)
                if seen.truncated:
                    out["truncated"] = True
                    out["errors"] += seen.errors[:5]
                if out["count"] >= SURVEY_BUDGET:
                    out["truncated"] = True
                    return out
    return out


def _kind_of(mode):
    if mode is None:
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
