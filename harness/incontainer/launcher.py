"""The two root steps the harness runs in the sandbox (trusted: installed root-owned under
/harness/trusted by the harness). Everything of the model it starts runs as the test user
with an empty capability bounding set (``setpriv``); root itself only deletes, seals and
watches.

    /usr/bin/python3 -I -S /harness/trusted/launcher.py --session SPEC

One exec from the set-up step to the end of the tests (:func:`session`): the set-up step
(``prepare.py``) as the test user, its report sent to the host, then the plans the host
sends on stdin (step_channel.py; a plan is never on disk), each naming its step. The
**build step**
(``"step": "build"``, only when the spec can rebuild in place and the patch needs it) runs
before anything is sealed:

B1. ``build``: the spec's rebuild, as the test user, monitored (:func:`monitored`),
    under its own timeout; then every process of the test user is killed;
B2. when it failed: the working copy is reset to the pristine tree (as the test user) and
    the same rebuild runs once more (``pristine_build``): the host charges the failure to
    the model only when the pristine tree builds;
B3. when it succeeded: the tree truth of what the patch *and the build* left, by the
    trusted ``prepare.py`` in report mode as the test user, from a root-owned request; the
    host decides restores, deletions and the seal again from it (harness/integrity/rebuild.py).
    ``build.json``, ``build-events.jsonl`` and ``tree.json`` go to the output directory.

The **test step** (the default) says, in order:

1. ``delete``: paths the model created that must not exist (restored away); ``restore``:
   paths put back as the pristine tree has them; ``install``: the test files (the test
   patch applied by the host, canaries included) copied from the staging directory;
2. bytecode: every ``__pycache__`` entry and stray ``*.pyc`` that is not byte-identical
   to the pristine tree's is removed (:func:`purge_bytecode`);
3. ``seal`` (:func:`seal`): the sealed files become root-owned and not writable by the
   test user; the directories that hold them (``trees`` recursively, and ``sticky``)
   become root-owned 1777, so the tests can create files and directories there but cannot
   modify, rename, replace or delete a sealed entry; a sealed directory holding Python
   sources gets a root-owned 0755 ``__pycache__`` (no bytecode can be planted for them);
   fingerprints are taken (content hashes for ``files``, compared with ``expected`` for
   what the harness itself put there), and each sealed directory's listing;
4. ``services``: set-up steps as root, then each service as the service user, from a
   directory of its own that the test user cannot write (:func:`start_services`); waits
   until their addresses accept;
5. ``tests``: the test command as the test user, output streamed to this exec's stdout,
   under the timeout, with the harness's bootstrap active (``tests.bootstrap``: the
   activation file and the evidence socket, ``evidence_channel.py``) for exactly as long
   as it runs; afterwards every process of the test user is killed and what they sent is
   collected into the output directory;
6. the sealed entries are fingerprinted again (``seal_changed``) and what the tests
   created in sealed directories is surveyed (``created``, :func:`survey`: the host judges
   planted test infrastructure and shadowing entries); the results file is copied (no
   symlinks, regular files only, capped) into the root-owned output directory with
   ``evidence.json``.

Stdout carries the tests' output only. Runs on any Python >= 3.6.

    /usr/bin/python3 -I -S /harness/trusted/launcher.py --tests-only '{"tests": ..., "testbed": ...}'

runs step 5 alone in an already prepared sandbox (benchmarks/overhead.py times it).
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

# the trusted directory (root-owned, read-only): -I leaves it off sys.path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bytecode_cache  # noqa: E402
import evidence_channel  # noqa: E402
from prepare import since_process_start  # noqa: E402
import step_channel  # noqa: E402
from processes import as_user, captured, env_argv, run_group, start_services  # noqa: E402
from sealing import (fingerprint, inside, listings, purge_bytecode, remove, remove_tree, seal,  # noqa: E402
                     survey, sysctl)

#: root's bytecode of the bootstrap's modules once made (bytecode_cache.py): the activation names it
_BYTECODE = {"dir": None}

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


# --------------------------------------------------------------------------- the build step
def monitored(boot, out_path, uid, gid, limit):
    """The evidence channel switched on around one command: a collector writing to
    ``out_path`` and the activation file, for as long as the ``with`` body runs (None
    ``boot``: nothing). The one place a monitored window opens and closes."""
    return _Monitored(boot, out_path, uid, gid, limit)


class _Monitored:
    def __init__(self, boot, out_path, uid, gid, limit):
        self.boot, self.out_path, self.uid, self.gid, self.limit = boot, out_path, uid, gid, limit
        self.collector, self.channel = None, None

    def __enter__(self):
        if self.boot:
            self.collector = evidence_channel.Collector(self.boot["socket"], self.out_path, self.uid, self.gid,
                                                        self.limit)
            self.collector.start()
            evidence_channel.activate(self.boot["activation"], {
                "uid": self.uid, "socket": self.boot["socket"], "testbed": self.boot.get("testbed"),
                "pristine": self.boot.get("pristine"), "results": self.boot.get("results"),
                "monitor": bool(self.boot.get("monitor")), "bytecode": _BYTECODE["dir"]})
        return self

    def __exit__(self, *exc):
        if self.boot:
            evidence_channel.deactivate(self.boot["activation"])
        return False

    def stop(self):
        """After every process of the user is gone: the collector's record (None unmonitored)."""
        if self.collector is not None:
            self.channel = self.collector.stop()
        return self.channel


def reset_as_user(testbed, pristine, uid, gid, timeout):
    """The working copy as the pristine tree has it, written by the test user (as the set-up
    step writes it)."""
    script = ('find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + && '
              'find "$2" -mindepth 1 -maxdepth 1 -exec cp -a -t "$1" -- {} +')
    return captured(as_user(uid, gid, ["/bin/sh", "-c", script, "reset", testbed, pristine]), "/",
                    {"PATH": "/usr/bin:/bin"}, timeout)


def build_step(plan):
    """B1-B3 of the module docstring; writes ``build.json`` (and ``tree.json`` after a
    successful build) into the output directory."""
    testbed, out_dir = plan["testbed"], plan["out_dir"]
    uid, gid = plan["user"]
    build = plan["build"]
    record = {"commands": []}
    boot = build.get("bootstrap")
    if boot:
        boot = dict(boot, testbed=testbed)
    with monitored(boot, os.path.join(out_dir, "build-events.jsonl"), uid, gid,
                   plan.get("events_limit", 16 << 20)) as window:
        res = captured(as_user(uid, gid, env_argv(build["env"], build["argv"])), testbed, None, build["timeout"])
    kill_user(uid)
    channel = window.stop()
    if channel is not None:
        record["channel"] = channel
        record["events_truncated"] = channel["truncated"]
    res.update(phase="build", argv=build["argv"])
    record["commands"].append(res)
    record["build"] = {"exit_code": res["exit_code"], "timed_out": res["timed_out"]}
    if res["exit_code"] != 0:
        reset = reset_as_user(testbed, plan["pristine"], uid, gid, plan["setup_timeout"])
        reset.update(phase="build_reset", argv=["reset", testbed])
        record["commands"].append(reset)
        if reset["exit_code"] == 0:
            again = captured(as_user(uid, gid, env_argv(build["pristine_env"], build["argv"])), testbed, None,
                             build["timeout"])
            kill_user(uid)
            again.update(phase="pristine_build", argv=build["argv"])
            record["commands"].append(again)
            record["pristine_build"] = {"exit_code": again["exit_code"], "timed_out": again["timed_out"]}
    else:
        report = plan["report"]
        directory = os.path.dirname(report["path"])
        os.mkdir(directory, 0o755)
        with open(report["path"], "w") as handle:
            json.dump(report["request"], handle)
        os.chmod(report["path"], 0o444)
        with open(os.path.join(out_dir, "tree.json"), "wb") as out:
            res = run_group(as_user(uid, gid, report["argv"]), testbed, {}, plan["setup_timeout"], out,
                            subprocess.DEVNULL)
        kill_user(uid)
        res.update(phase="build_tree_report", argv=report["argv"])
        record["commands"].append(res)
    with open(os.path.join(out_dir, "build.json"), "w") as out:
        json.dump(record, out)


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


def run_tests(tests, testbed, out_dir, uid, gid, events_limit, record, pristine=None):
    """Step 5: the test command as the test user with the bootstrap active, then every
    process of the test user killed; ``record["tests"]`` and ``record["channel"]``. The
    bootstrap is told the pristine tree (the built environment's metadata for plugin
    autoloading, ``_harness_outcomes.guard_autoload``)."""
    boot = tests.get("bootstrap")
    if boot:
        boot = dict(boot, testbed=testbed, pristine=pristine)
    sys.stdout.flush()
    with monitored(boot, os.path.join(out_dir, "events.jsonl"), uid, gid, events_limit) as window:
        # the tests' stderr joins their stdout: the exec's stderr is the launcher's own
        # channel to the host (step_channel.py), which nothing of the model holds
        res = run_group(as_user(uid, gid, env_argv(tests["env"], tests["argv"])), testbed, None, tests["timeout"],
                        None, subprocess.STDOUT)
    res.update(phase="tests", argv=tests["argv"])
    record["tests"] = res
    kill_user(uid)
    channel = window.stop()
    if channel is not None:
        record["channel"] = channel
        record["events_truncated"] = channel["truncated"]


def tests_only(text):
    """``--tests-only JSON``: step 5 alone, for a sandbox the harness prepared."""
    spec = json.loads(text)
    os.makedirs(spec["out_dir"], mode=0o700, exist_ok=True)
    if spec.get("bytecode") and os.path.isdir(spec["bytecode"]):   # made by this sandbox's session
        _BYTECODE["dir"] = spec["bytecode"]
    record = {}
    run_tests(spec["tests"], spec["testbed"], spec["out_dir"], spec["user"][0], spec["user"][1],
              spec.get("events_limit", 16 << 20), record)
    sys.stdout.flush()
    return 0 if (record["tests"]["exit_code"] or 0) == 0 else record["tests"]["exit_code"] or 1


def main():
    if sys.argv[1] == "--tests-only":
        sys.exit(tests_only(sys.argv[2]))
    if sys.argv[1] == "--session":
        return session(json.loads(sys.argv[2]))
    sys.exit("usage: launcher.py --session SPEC | --tests-only JSON")


def session(spec):
    """``--session SPEC``: the set-up step as the test user, its report to the host, then
    the host's plans (a build step's, answered when done; then the test step's) from stdin,
    all in this one exec (step_channel.py). ``spec``: the set-up step's ``argv``, ``cwd``,
    ``timeout``, ``user`` and the report's ``limit`` in bytes; ``bytecode``: where root's
    bytecode of the bootstrap's modules goes, made meanwhile (bytecode_cache.py). Ends when
    the host closes stdin or after the test step."""
    out = sys.stderr.buffer     # the launcher's messages; its stdout carries the tests' output only
    uid, gid = spec["user"]
    limit = spec["limit"]
    bytecode = spec.get("bytecode") or {}
    compiling = bytecode_cache.start(bytecode, bytecode.get("source"), bytecode.get("dir"))
    with tempfile.TemporaryFile() as report:
        res = run_group(as_user(uid, gid, spec["argv"]), spec["cwd"], None, spec["timeout"], report,
                        subprocess.STDOUT)
        kill_user(uid)
        report.seek(0)
        body = report.read(limit + 1)
    res.update(step="prepare", truncated=len(body) > limit)
    step_channel.send(out, res, body[:limit])
    while True:
        header, body = step_channel.receive(sys.stdin.buffer, spec.get("plan_limit", 1 << 28))
        if header is None:
            return
        plan = json.loads(body.decode("utf-8"))
        if compiling is not None:   # done long since: it ran while the set-up step did
            _BYTECODE["dir"] = bytecode_cache.finish(compiling, bytecode.get("dir"))
            compiling = None
        if plan.get("step") == "build":
            build_step(plan)
            step_channel.send(out, {"step": "build"}, step_channel.tar_of_files(plan["out_dir"]))
            continue
        try:
            return test_step(plan)
        finally:   # what the step left, however it ended (the host reads the directory itself without it)
            step_channel.send(out, {"step": "tests"}, step_channel.tar_of_files(plan["out_dir"]))


def test_step(plan):
    """Steps 1-6 of the module docstring."""
    testbed, out_dir = plan["testbed"], plan["out_dir"]
    uid, gid = plan["user"]
    record = {"commands": [], "deleted": [], "restored": [], "delete_errors": []}
    # seconds of each part of this step, from the launcher's start (benchmarks read them)
    # (since_process_start: the set-up step and the host's decisions came first, in this exec)
    record["phases"] = phases = {"since_process_start": since_process_start()}
    lap = [time.monotonic()]

    def phase(name):
        now = time.monotonic()
        phases[name] = round(now - lap[0], 4)
        lap[0] = now

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

    phase("delete_restore_install")
    started = time.monotonic()
    purge_bytecode(testbed, plan["pristine"], record)
    sealed, sealed_dirs = seal(testbed, plan["seal"], record)
    hashed = {inside(testbed, rel) for rel in plan["seal"].get("files", [])}
    before = {p: fingerprint(p, p in hashed) for p in sealed}
    listed = listings(sealed_dirs)
    record["sealed_count"] = len(sealed)
    record["seal_seconds"] = round(time.monotonic() - started, 4)
    record["protected_hardlinks"] = sysctl("fs/protected_hardlinks")
    record["expected_mismatch"] = sorted(
        rel for rel, digest in plan.get("expected", {}).items()
        if (fingerprint(os.path.join(testbed, rel)) or {}).get("sha256") != digest)

    # the working copy is root-owned now: git (if the model's commands use it) must be told it is safe
    gitconfig = os.path.join(plan["tests"]["env"].get("HOME", "/tmp"), ".gitconfig")
    if not os.path.lexists(gitconfig):
        with open(gitconfig, "w") as handle:
            handle.write("[safe]\n\tdirectory = *\n")
        os.chown(gitconfig, uid, gid)

    phase("seal")
    go = True
    if plan.get("services"):
        go = start_services(plan, record)
        phase("services")

    if go:
        tests = plan["tests"]
        os.mkdir(tests["run_dir"], 0o700)
        os.chown(tests["run_dir"], uid, gid)
        run_tests(tests, testbed, out_dir, uid, gid, plan.get("events_limit", 16 << 20), record, plan.get("pristine"))
        phase("tests")
        # the test user may have filled /harness (a tmpfs): the evidence is capped as it is
        # collected; copy the results out of the test user's directory and remove it, so
        # evidence.json fits
        # what is known now is written before anything reads what the tests left: should a
        # check below be brought down, the host has this record (``complete`` false), which
        # it charges to the model rather than to itself
        write_evidence(out_dir, dict(record, complete=False))
        try:
            copy_results(plan, record)
        except OSError as exc:
            record["results"] = {"present": False, "error": "copy failed: {}".format(exc)}
        try:
            remove_tree(tests["run_dir"])
        except OSError as exc:
            record.setdefault("post_run_errors", []).append("removing the results directory: {}".format(exc))
        if not os.path.lexists(tests["run_dir"]):
            os.mkdir(tests["run_dir"], 0o700)   # empty again (a later run of the command may write there)
            os.chown(tests["run_dir"], uid, gid)
        phase("results")

    started = time.monotonic()
    try:
        after = {p: fingerprint(p, p in hashed) for p in sealed}
        record["seal_changed"] = sorted(os.path.relpath(p, testbed) for p in sealed
                                        if after.get(p) != before.get(p))[:200]
        record["created"] = survey(testbed, sealed_dirs, listed, sealed, plan["seal"].get("watch", {}))
    except Exception as exc:   # what the tests left stopped a check: said, never a crash
        record.setdefault("post_run_errors", []).append("the checks after the tests: {}: {}".format(
            type(exc).__name__, str(exc)[:500]))
    record["check_seconds"] = round(time.monotonic() - started, 4)
    phase("checks")
    record["complete"] = not record.get("post_run_errors")
    write_evidence(out_dir, record)


def write_evidence(out_dir, record):
    """``evidence.json``, replaced whole (a reader never sees half of one)."""
    tmp = os.path.join(out_dir, "evidence.json.tmp")
    with open(tmp, "w") as out:
        json.dump(record, out)
    os.replace(tmp, os.path.join(out_dir, "evidence.json"))


if __name__ == "__main__":
    main()
