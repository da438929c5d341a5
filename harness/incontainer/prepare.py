"""The set-up step, run in the sandbox as the unprivileged test user, before any code of
the model can run (trusted: installed root-owned under /harness/trusted by the harness).

    /usr/bin/python3 -I -S /harness/trusted/prepare.py REQUEST.json

1. reset the working copy (``/testbed``) from the pristine tree;
2. count the commits the working copy's repository can reach (the history check);
3. fingerprint ``.git``; apply the model patch with each strategy in turn (resetting in
   between), ``--3way`` with a throw-away index and object directory so that ``.git``
   is never written; when none applies and the request carries the patch's hunks
   (``fallback``), the **already-present fallback**: each hunk alone (with its file's
   header) is checked against the pristine tree, and one that does not apply but whose
   reverse does (its post-image is what the tree already holds: an environment's own edit
   that the submission carries too) is left out and reported (``already_present``); the
   rest goes through the same strategies again. Fingerprint ``.git`` again;
4. compare the working copy with the pristine tree (the *tree truth*): every created,
   modified, deleted, type- or mode-changed path, ignored and untracked files included,
   symlinks as symlinks; the contents of every file the patch added or modified, whatever
   its name, for the host's checks and scans (capped: a file over the cap is sent without
   its content, and the host refuses the patch).

Prints ONE JSON document on stdout (the exec's only output) and exits 0; the host
parses it with a size cap. Runs on any Python >= 3.6 (the base image's python3).

With ``"mode": "report"`` in the request (the build step: code of the model has run in the
working copy) only step 4 runs, and every file is compared by content: the model's build
could have set a changed file's size and mtime back to the pristine ones.
"""

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

TAIL = 4000


def _children(path):
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []


def reset(testbed, pristine):
    for name in _children(testbed):
        target = os.path.join(testbed, name)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    names = _children(pristine)
    if names:
        proc = subprocess.run(["cp", "-a", "-t", testbed, "--"] + [os.path.join(pristine, n) for n in names],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise RuntimeError("copying the pristine tree failed: " + proc.stdout.decode("utf-8", "replace")[-500:])


def early_reset_done(marker, timeout):
    """Wait for the status the container's first process writes when it has filled the
    working copy: True when it copied the tree. Only root can write ``marker`` (on /harness);
    anything else there is refused. Raises when it does not come in ``timeout`` seconds (a
    second copy must never run beside the first)."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            info = os.lstat(marker)
            break
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise RuntimeError("the working copy was not filled in {} s".format(timeout)) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != 0:
        raise RuntimeError("the early reset's marker is not a root-owned file")
    with open(marker) as handle:
        return handle.read(16).strip() == "0"


def sha256_file(path, limit=None):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(1 << 20)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def kind_of(mode):
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


#: deepest level walked (a build of the model may leave a tree deeper than PATH_MAX); a
#: tree deeper than this is reported as too many changes (the patch is refused, its doing)
MAX_DEPTH = 400


class TooDeep(Exception):
    pass


def walk(root, skip_git):
    """path (relative, POSIX) -> lstat result, for every entry under root. Iterative, through
    directory descriptors (no long path is handed to the kernel); raises TooDeep past
    :data:`MAX_DEPTH` levels."""
    found = {}
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        top = os.open(root, flags)
    except FileNotFoundError:
        return found
    frames = [(top, "", sorted(os.listdir(top), reverse=True))]
    try:
        while frames:
            fd, rel, names = frames[-1]
            if not names:
                os.close(fd)
                frames.pop()
                continue
            name = names.pop()
            child = rel + "/" + name if rel else name
            if skip_git and child == ".git":
                continue
            st = os.lstat(name, dir_fd=fd)
            found[child] = st
            if stat.S_ISDIR(st.st_mode):
                if len(frames) > MAX_DEPTH:
                    raise TooDeep(child[:200])
                sub = os.open(name, flags, dir_fd=fd)
                frames.append((sub, child, sorted(os.listdir(sub), reverse=True)))
    finally:
        for frame in frames:
            os.close(frame[0])
    return found


def git_fingerprint(testbed):
    """Everything under .git: type, mode, size, mtime; contents hashed outside objects/."""
    root = os.path.join(testbed, ".git")
    prints = {}
    for rel, st in walk(root, False).items():
        entry = [kind_of(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns]
        if stat.S_ISREG(st.st_mode) and not rel.startswith("objects/"):
            entry.append(sha256_file(os.path.join(root, rel)))
        elif stat.S_ISLNK(st.st_mode):
            entry.append(os.readlink(os.path.join(root, rel)))
        prints[rel] = entry
    return prints


#: file names of compiled extension modules (``name.cpython-39-x86_64-linux-gnu.so``)
EXTENSION_SUFFIXES = (".so", ".pyd")


def count_extensions(entries):
    """How many compiled extension modules a walked tree holds."""
    return sum(1 for rel, st in entries.items() if stat.S_ISREG(st.st_mode) and rel.endswith(EXTENSION_SUFFIXES))


def tree_diff(testbed, pristine, request):
    """The working copy against the pristine tree, ``.git`` excluded. Returns (changes,
    too many, how many compiled extension modules the pristine tree holds); a working copy
    too deep to walk is too many changes."""
    old = walk(pristine, True)
    try:
        new = walk(testbed, True)
    except TooDeep as deep:
        return [{"path": str(deep), "change": "created", "kind": "dir"}], True, count_extensions(old)
    trust_metadata = not request.get("hash_all")
    changes, total = [], 0
    max_changes = request["max_changes"]
    per_file, budget = request["content_limit"], request["content_total"]
    for rel in sorted(set(new) | set(old)):
        a, b = old.get(rel), new.get(rel)
        if a is not None and b is not None:
            ka, kb = kind_of(a.st_mode), kind_of(b.st_mode)
            if ka == kb == "dir":
                if stat.S_IMODE(a.st_mode) != stat.S_IMODE(b.st_mode):
                    changes.append({"path": rel, "change": "mode", "kind": "dir",
                                    "old_mode": stat.S_IMODE(a.st_mode), "new_mode": stat.S_IMODE(b.st_mode)})
                continue
            same_meta = (trust_metadata and ka == kb and a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns
                         and stat.S_IMODE(a.st_mode) == stat.S_IMODE(b.st_mode))
            if same_meta:
                continue
            entry = {"path": rel, "kind": kb, "old_kind": ka,
                     "old_mode": stat.S_IMODE(a.st_mode), "new_mode": stat.S_IMODE(b.st_mode)}
            if ka != kb:
                entry["change"] = "type"
            elif kb == "file":
                new_hash = sha256_file(os.path.join(testbed, rel))
                old_hash = sha256_file(os.path.join(pristine, rel))
                if new_hash == old_hash and entry["old_mode"] == entry["new_mode"]:
                    continue
                entry["change"] = "modified" if new_hash != old_hash else "mode"
                entry["sha256"], entry["old_sha256"] = new_hash, old_hash
            elif kb == "symlink":
                if os.readlink(os.path.join(testbed, rel)) == os.readlink(os.path.join(pristine, rel)):
                    continue
                entry["change"] = "modified"
            else:
                entry["change"] = "modified"
        elif b is not None:
            entry = {"path": rel, "change": "created", "kind": kind_of(b.st_mode), "new_mode": stat.S_IMODE(b.st_mode)}
            if entry["kind"] == "dir":
                changes.append(entry)
                continue
            if entry["kind"] == "file":
                entry["sha256"] = sha256_file(os.path.join(testbed, rel))
        else:
            entry = {"path": rel, "change": "deleted", "kind": kind_of(a.st_mode), "old_mode": stat.S_IMODE(a.st_mode)}
            changes.append(entry)
            continue
        if entry["kind"] == "symlink":
            entry["target"] = os.readlink(os.path.join(testbed, rel))
        if entry["kind"] == "file" and entry["change"] != "mode":  # a mode change adds no bytes
            size = b.st_size
            if size > per_file:
                entry["content_omitted"] = "size {} over the per-file limit {}".format(size, per_file)
            elif total + size > budget:
                entry["content_omitted"] = "size {} past the total limit {}".format(size, budget)
            else:
                with open(os.path.join(testbed, rel), "rb") as handle:
                    data = handle.read(per_file + 1)
                total += len(data)
                entry["content"] = base64.b64encode(data).decode("ascii")
        entry["size"] = b.st_size
        changes.append(entry)
        if len(changes) > max_changes:
            return changes, True, count_extensions(old)
    return changes, False, count_extensions(old)


def run(argv, cwd, env, timeout):
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout)
        code, out, timed_out = proc.returncode, proc.stdout, False
    except subprocess.TimeoutExpired as exc:
        code, out, timed_out = None, exc.output or b"", True
    return {"argv": argv, "exit_code": code, "timed_out": timed_out, "duration": round(time.monotonic() - started, 4),
            "output_tail": out.decode("utf-8", "replace")[-TAIL:]}


def apply_patch(request, testbed, pristine, env):
    """Try each strategy; returns (commands, the name of the one that applied or None)."""
    commands = []
    for index, strategy in enumerate(request["strategies"]):
        if index:
            reset(testbed, pristine)
        run_env = dict(env)
        scratch = None
        if strategy.get("isolate_git"):
            # --3way writes the index and objects: give it copies outside .git.
            scratch = "/tmp/.harness-apply-{}".format(os.getpid())
            shutil.rmtree(scratch, ignore_errors=True)
            os.makedirs(scratch + "/objects")
            shutil.copy2(os.path.join(testbed, ".git", "index"), scratch + "/index")
            run_env.update(GIT_INDEX_FILE=scratch + "/index", GIT_OBJECT_DIRECTORY=scratch + "/objects",
                           GIT_ALTERNATE_OBJECT_DIRECTORIES=os.path.join(testbed, ".git", "objects"))
        record = run(strategy["argv"], testbed, run_env, request["timeout"])
        record["phase"] = "apply:" + strategy["name"]
        commands.append(record)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        if record["exit_code"] == 0:
            return commands, strategy["name"]
    reset(testbed, pristine)
    return commands, None


def apply_without_present(request, testbed, pristine, env):
    """The already-present fallback (step 3). Returns (commands, the strategy that applied
    the rest or None, the hunks left out as already present)."""
    fallback = request.get("fallback") or {}
    sections = fallback.get("sections")
    if not sections:
        return [], None, []
    reset(testbed, pristine)
    with open(request["patch"], "rb") as handle:
        data = handle.read()
    scratch = fallback["remaining"] + ".hunk"
    started = time.monotonic()
    present, remaining, checks = [], [], 0
    for section in sections:
        header = data[section["header"][0]:section["header"][1]]
        if not section["hunks"]:
            remaining.append(header)   # a mode change or rename alone: nothing to compare
            continue
        kept = []
        for start, end in section["hunks"]:
            hunk = data[start:end]
            with open(scratch, "wb") as handle:
                handle.write(header + hunk)
            checks += 1
            if run(["git", "apply", "--check", scratch], testbed, env, request["timeout"])["exit_code"] == 0:
                kept.append(hunk)
                continue
            checks += 1
            if run(["git", "apply", "--check", "--reverse", scratch], testbed, env,
                   request["timeout"])["exit_code"] == 0:
                present.append({"path": section["path"], "hunk": hunk.split(b"\n", 1)[0].decode("utf-8", "replace")})
            else:
                kept.append(hunk)
        if kept:
            remaining.append(header + b"".join(kept))
    try:
        os.unlink(scratch)
    except OSError:
        pass
    record = {"phase": "apply:already_present", "argv": ["git", "apply", "--check", "[--reverse]", "<each hunk>"],
              "exit_code": 0 if present else 1, "timed_out": False, "duration": round(time.monotonic() - started, 4),
              "output_tail": "{} checks; already present: {}".format(
                  checks, ", ".join("{} {}".format(p["path"], p["hunk"]) for p in present) or "none")[-TAIL:]}
    if not present:
        return [record], None, []
    rest = b"".join(remaining)
    if not rest.strip():
        return [record], "nothing_left", present   # every hunk was already there
    with open(fallback["remaining"], "wb") as handle:
        handle.write(rest)
    commands, applied = apply_patch(dict(request, strategies=fallback["strategies"]), testbed, pristine, env)
    for command in commands:
        command["phase"] += "+without_present"
    try:
        os.unlink(fallback["remaining"])
    except OSError:
        pass
    return [record] + commands, applied, present if applied else []


def report(request):
    """The tree truth alone (``"mode": "report"``)."""
    started = time.monotonic()
    result = {"commands": [], "applied": None, "history_commits": None, "git_changed": []}
    result["changes"], result["too_many_changes"], result["pristine_extensions"] = tree_diff(
        request["testbed"], request["pristine"], request)
    result["seconds"] = round(time.monotonic() - started, 4)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


def main():
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    if request.get("mode") == "report":
        return report(request)
    testbed, pristine = request["testbed"], request["pristine"]
    env = {k: str(v) for k, v in request["env"].items()}
    # /testbed is root-owned: git asks for it to be named safe. A private HOME holds just that.
    home = "/tmp/.harness-git-{}".format(os.getpid())
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, ".gitconfig"), "w") as handle:
        handle.write("[safe]\n\tdirectory = {}\n".format(testbed))
    env["HOME"] = home
    result = {"commands": [], "applied": None, "history_commits": None}
    started = time.monotonic()
    # seconds of each part, from the interpreter's start (benchmarks read them)
    result["phases"] = phases = {"python_start": since_process_start()}
    lap = [started]

    def phase(name):
        now = time.monotonic()
        phases[name] = round(now - lap[0], 4)
        lap[0] = now

    # the container's first process has been copying the tree since it started
    # (harness.integrity.steps.early_reset); without it, or when it failed, copy it here
    if not (request.get("early_reset") and early_reset_done(request["early_reset"], request["timeout"])):
        reset(testbed, pristine)
    phase("reset")
    history = run(["git", "rev-list", "--all", "--count"], testbed, env, request["timeout"])
    history["phase"] = "history_check"
    result["commands"].append(history)
    count = history["output_tail"].strip()
    result["history_commits"] = int(count) if count.isdigit() else count
    before = git_fingerprint(testbed)
    phase("history")
    if request.get("patch"):
        commands, applied = apply_patch(request, testbed, pristine, env)
        result["commands"].extend(commands)
        if applied is None:
            commands, applied, result["already_present"] = apply_without_present(request, testbed, pristine, env)
            result["commands"].extend(commands)
        result["applied"] = applied
        try:
            os.unlink(request["patch"])  # consumed: nothing of the inputs stays readable
        except OSError:
            pass
    after = git_fingerprint(testbed)
    phase("apply")
    result["git_changed"] = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))[:200]
    result["changes"], result["too_many_changes"], result["pristine_extensions"] = tree_diff(
        testbed, pristine, request)
    phase("tree_diff")
    shutil.rmtree(home, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - started, 4)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


def since_process_start():
    """Seconds since this process was created, from the kernel's start time; None where
    /proc does not say."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            started = int(handle.read().rsplit(b")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return round(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 4)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


if __name__ == "__main__":
    main()
