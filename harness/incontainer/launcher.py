"""The test step, run in the sandbox as root by the harness (trusted: installed root-owned
under /harness/trusted). Everything of the model it starts runs as the test user with an
empty capability bounding set (``setpriv``); root itself only deletes, seals and watches.

    /usr/bin/python3 -I -S /harness/trusted/launcher.py PLAN.json

The plan (root-only, removed once read) says, in order:

1. ``delete``: paths the model created that must not exist (restored away); ``restore``:
   paths put back as the pristine tree has them; ``install``: the test files (the test
   patch applied by the host, canaries included) copied from the staging directory;
2. ``seal``: directories and files the tests run from become root-owned and not writable
   by the test user (``trees`` recursively, ``files`` one by one, ``sticky`` directories
   root-owned 1777 so that the tests can still create files there but not replace
   sealed entries); their hashes are taken (and compared with ``expected`` for what the
   harness itself put there);
3. ``reinstall``: the spec's re-install, as the test user, under its own timeout;
4. ``services``: set-up steps as root, then each service as the service user; waits until
   their addresses accept;
5. ``tests``: the test command as the test user, output streamed to this exec's stdout,
   under the timeout, with the harness's bootstrap active (``tests.bootstrap``: the
   activation file and the evidence socket, ``evidence_channel.py``) for exactly as long
   as it runs; afterwards every process of the test user is killed and what they sent is
   collected into the output directory;
6. the sealed files are hashed again; the results file is copied (no symlinks, regular
   files only, capped) into the root-owned output directory with ``evidence.json``.

Stdout carries the tests' output only. Runs on any Python >= 3.6.

    /usr/bin/python3 -I -S /harness/trusted/launcher.py --tests-only '{"tests": ..., "testbed": ...}'

runs step 5 alone in an already prepared sandbox (benchmarks/overhead.py times it).
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # root's trusted directory
import evidence_channel  # noqa: E402

TAIL = 4000
DROP = ["/usr/bin/setpriv", "--reuid={uid}", "--regid={gid}", "--clear-groups", "--bounding-set=-all",
        "--inh-caps=-all", "--ambient-caps=-all", "--"]


def as_user(uid, gid, argv):
    return [part.format(uid=uid, gid=gid) for part in DROP] + list(argv)


def env_argv(env, argv):
    return ["/usr/bin/env", "-i"] + ["{}={}".format(k, v) for k, v in sorted(env.items())] + list(argv)


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


def fingerprint(path, digest=True):
    """What a sealed entry is now: kind, owner, mode, inode times, and (``digest``) the
    content hash; never follows links. Without write access a sealed file cannot change
    without its ctime changing, so whole trees are compared by metadata."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    entry = {"uid": st.st_uid, "mode": stat.S_IMODE(st.st_mode), "ino": st.st_ino, "size": st.st_size,
             "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns}
    if stat.S_ISREG(st.st_mode) and digest:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            entry["sha256"] = sha256_fd(fd)
        finally:
            os.close(fd)
        entry["kind"] = "file"
    elif stat.S_ISREG(st.st_mode):
        entry["kind"] = "file"
    elif stat.S_ISDIR(st.st_mode):
        entry["kind"] = "dir"
        entry["entries"] = sorted(os.listdir(path))
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
    """Make the sealed set root-owned and not writable by others. Returns (sealed paths,
    sticky directories)."""
    sealed, sticky, errors = [], [], []

    def own(path, directory_mode=0o755):
        try:
            st = os.lstat(path)
            os.lchown(path, 0, 0)
            if stat.S_ISDIR(st.st_mode):
                os.chmod(path, directory_mode)
            elif not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)
            return True
        except OSError as exc:
            errors.append("{}: {}".format(path, exc))
            return False

    for rel in plan.get("sticky", []):
        path = testbed if rel == "" else inside(testbed, rel)
        if path and os.path.isdir(path) and not os.path.islink(path) and own(path, 0o1777):
            sticky.append(path)
    for rel in plan.get("trees", []):
        path = inside(testbed, rel)
        if path and os.path.isdir(path) and not os.path.islink(path):
            sealed.extend(p for p in walk_tree(path) if own(p))
    for rel in plan.get("files", []):
        path = inside(testbed, rel)
        if path and os.path.lexists(path) and own(path):
            sealed.append(path)
    record["seal_errors"] = errors[:50]
    return sorted(set(sealed)), sticky


def restore(testbed, pristine, paths, record):
    """Put paths back as the pristine tree has them (or remove them when it has none)."""
    for rel in paths:
        target, source = inside(testbed, rel), inside(pristine, rel)
        if target is None:
            record["delete_errors"].append("refused: " + rel)
            continue
        try:
            remove(target)
            if os.path.lexists(source):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if os.path.isdir(source) and not os.path.islink(source):
                    shutil.copytree(source, target, symlinks=True)
                else:
                    shutil.copy2(source, target, follow_symlinks=False)
                record["restored"].append(rel)
            else:
                record["deleted"].append(rel)
        except OSError as exc:
            record["delete_errors"].append("{}: {}".format(rel, exc))


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def kill_user(uid):
    """SIGKILL every process of ``uid`` until none is left (fork bombs included)."""
    for _ in range(50):
        found = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/{}/status".format(pid)) as handle:
                    uids = next(line for line in handle if line.startswith("Uid:")).split()[1:]
            except (OSError, StopIteration):
                continue
            if str(uid) in uids:
                found = True
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.02)


def run_group(argv, cwd, env, timeout, stdout, stderr):
    """Run argv in its own session; kill the whole group at the deadline."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
    return {"exit_code": None if timed_out else proc.returncode, "timed_out": timed_out,
            "duration": round(time.monotonic() - started, 4)}


def captured(argv, cwd, env, timeout):
    path = "/tmp/.harness-step-{}".format(os.getpid())
    with open(path, "w+b") as out:
        result = run_group(argv, cwd, env, timeout, out, subprocess.STDOUT)
        out.seek(0, 2)
        out.seek(max(0, out.tell() - TAIL))
        result["output_tail"] = out.read().decode("utf-8", "replace")
    os.unlink(path)
    return result


def start_services(plan, record):
    """Set up and start each service; False (with the reason recorded) if one fails."""
    user = plan["service_user"]
    for svc in plan.get("services", []):
        for step in svc.get("setup", []):
            res = captured(env_argv(plan["base_env"], ["/bin/bash", "-c", step]), "/", None, plan["setup_timeout"])
            res.update(phase="service_setup", argv=["/bin/bash", "-c", step])
            record["commands"].append(res)
            if res["exit_code"] != 0:
                record["service_failure"] = "service {}: set-up {!r} failed: {}".format(
                    svc["name"], step, res["output_tail"][-800:])
                return False
        log = "/tmp/service-{}.log".format(svc["name"])
        with open(log, "wb") as out:
            os.chown(log, user[0], user[1])
            subprocess.Popen(as_user(user[0], user[1], env_argv(svc["env"], ["/bin/bash", "-c", svc["command"]])),
                             cwd="/tmp", stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        record["commands"].append({"phase": "service_start", "argv": ["/bin/bash", "-c", svc["command"]],
                                   "exit_code": None, "duration": 0.0})
        started = time.monotonic()
        deadline = started + svc.get("ready_timeout", 60)
        for address in svc.get("ready", []):
            host, port = address.rsplit(":", 1)
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        with open(log, "rb") as handle:
                            tail = handle.read()[-3000:].decode("utf-8", "replace")
                        record["service_failure"] = "service {} did not come up: {} not accepting\n{}".format(
                            svc["name"], address, tail)
                        return False
                    time.sleep(0.1)
        if svc.get("ready"):
            record["commands"].append({"phase": "service_ready", "argv": ["connect"] + svc["ready"], "exit_code": 0,
                                       "duration": round(time.monotonic() - started, 4)})
    return True


def copy_results(plan, record):
    """The test user's results file, copied into the root-owned output directory."""
    tests = plan["tests"]
    src = os.path.join(tests["run_dir"], tests["results_name"])
    info = {"present": False}
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        info["error"] = str(exc)
        record["results"] = info
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            info["error"] = "not a regular file"
        else:
            data, limit = b"", tests["results_limit"]
            while len(data) <= limit:
                block = os.read(fd, 1 << 20)
                if not block:
                    break
                data += block
            info.update(present=True, size=st.st_size, uid=st.st_uid, truncated=len(data) > limit,
                        sha256=hashlib.sha256(data).hexdigest())
            with open(os.path.join(plan["out_dir"], "results"), "wb") as out:
                out.write(data[:limit + 1])
    finally:
        os.close(fd)
    record["results"] = info


def run_tests(tests, testbed, out_dir, uid, gid, events_limit, record):
    """Step 5: the test command as the test user with the bootstrap active, then every
    process of the test user killed; ``record["tests"]`` and ``record["channel"]``."""
    boot = tests.get("bootstrap")
    collector = None
    if boot:
        collector = evidence_channel.Collector(boot["socket"], os.path.join(out_dir, "events.jsonl"), uid, gid,
                                               events_limit)
        collector.start()
        evidence_channel.activate(boot["activation"], {
            "uid": uid, "socket": boot["socket"], "testbed": testbed, "results": boot.get("results"),
            "monitor": bool(boot.get("monitor"))})
    sys.stdout.flush()
    try:
        res = run_group(as_user(uid, gid, env_argv(tests["env"], tests["argv"])), testbed, None, tests["timeout"],
                        None, None)
    finally:
        if boot:
            evidence_channel.deactivate(boot["activation"])
    res.update(phase="tests", argv=tests["argv"])
    record["tests"] = res
    kill_user(uid)
    if collector is not None:
        record["channel"] = collector.stop()
        record["events_truncated"] = record["channel"]["truncated"]


def tests_only(text):
    """``--tests-only JSON``: step 5 alone, for a sandbox the harness prepared."""
    spec = json.loads(text)
    os.makedirs(spec["out_dir"], mode=0o700, exist_ok=True)
    record = {}
    run_tests(spec["tests"], spec["testbed"], spec["out_dir"], spec["user"][0], spec["user"][1],
              spec.get("events_limit", 16 << 20), record)
    sys.stdout.flush()
    return 0 if (record["tests"]["exit_code"] or 0) == 0 else record["tests"]["exit_code"] or 1


def main():
    if sys.argv[1] == "--tests-only":
        sys.exit(tests_only(sys.argv[2]))
    plan_path = sys.argv[1]
    with open(plan_path) as handle:
        plan = json.load(handle)
    os.unlink(plan_path)  # consumed
    testbed, out_dir = plan["testbed"], plan["out_dir"]
    uid, gid = plan["user"]
    record = {"commands": [], "deleted": [], "restored": [], "delete_errors": []}

    for rel in plan.get("delete", []):
        path = inside(testbed, rel)
        if path is None:
            record["delete_errors"].append("refused: " + rel)
            continue
        try:
            remove(path)
            record["deleted"].append(rel)
        except OSError as exc:
            record["delete_errors"].append("{}: {}".format(rel, exc))
    restore(testbed, plan["pristine"], plan.get("restore", []), record)
    for rel, mode in plan.get("install", []):
        target = inside(testbed, rel)
        if target is None:
            record["delete_errors"].append("refused: " + rel)
            continue
        remove(target)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(plan["staged"], rel), target, follow_symlinks=False)
        os.chmod(target, mode)

    sealed, sticky = seal(testbed, plan["seal"], record)
    hashed = {inside(testbed, rel) for rel in plan["seal"].get("files", [])}
    before = {p: fingerprint(p, p in hashed) for p in sealed}
    sticky_before = {p: set(os.listdir(p)) for p in sticky}
    record["sealed_count"] = len(sealed)
    record["expected_mismatch"] = sorted(
        rel for rel, digest in plan.get("expected", {}).items()
        if (fingerprint(os.path.join(testbed, rel)) or {}).get("sha256") != digest)

    # the working copy is root-owned now: git (if the model's commands use it) must be told it is safe
    gitconfig = os.path.join(plan["tests"]["env"].get("HOME", "/tmp"), ".gitconfig")
    if not os.path.lexists(gitconfig):
        with open(gitconfig, "w") as handle:
            handle.write("[safe]\n\tdirectory = *\n")
        os.chown(gitconfig, uid, gid)

    go = True
    if plan.get("reinstall"):
        step = plan["reinstall"]
        res = captured(as_user(uid, gid, env_argv(step["env"], step["argv"])), testbed, None, step["timeout"])
        res.update(phase="reinstall", argv=step["argv"])
        record["commands"].append(res)
        kill_user(uid)
        if step.get("required") and res["exit_code"] != 0:
            record["reinstall_failed"] = True
            go = False
    if go and plan.get("services"):
        go = start_services(plan, record)

    if go:
        tests = plan["tests"]
        os.mkdir(tests["run_dir"], 0o700)
        os.chown(tests["run_dir"], uid, gid)
        run_tests(tests, testbed, out_dir, uid, gid, plan.get("events_limit", 16 << 20), record)
        # the test user may have filled /harness (a tmpfs): the evidence is capped as it is
        # collected; copy the results out of the test user's directory and remove it, so
        # evidence.json fits
        try:
            copy_results(plan, record)
        except OSError as exc:
            record["results"] = {"present": False, "error": "copy failed: {}".format(exc)}
        shutil.rmtree(tests["run_dir"], ignore_errors=True)
        os.mkdir(tests["run_dir"], 0o700)   # empty again (a later run of the command may write there)
        os.chown(tests["run_dir"], uid, gid)

    after = {p: fingerprint(p, p in hashed) for p in sealed}
    record["seal_changed"] = sorted(os.path.relpath(p, testbed) for p in sealed if after.get(p) != before.get(p))[:200]
    record["new_entries"] = {os.path.relpath(p, testbed): sorted(set(os.listdir(p)) - sticky_before[p])[:100]
                             for p in sticky if set(os.listdir(p)) - sticky_before[p]}
    with open(os.path.join(out_dir, "evidence.json"), "w") as out:
        json.dump(record, out)


if __name__ == "__main__":
    main()
