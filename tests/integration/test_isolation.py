"""What the code under test can see: no network, and a repository with exactly one commit
(the fix and its history absent)."""

from __future__ import annotations

import pytest

from harness import incontainer

from harness.inputs import demo
from harness.engine.layers import PRISTINE_TREE
from harness.engine.sandbox import DockerBackend
from harness.integrity import steps
from harness.inputs.instances import load_instances
from harness.inputs.repos import RepoResolver
from harness.preparation.preparer import Preparer
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from tests.conftest import leftover_containers

INSTANCE_ID = "harness-demo__calcly-1"


@pytest.fixture(scope="module")
def sandbox(engine, cache_dir):
    built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    instance = next(i for i in load_instances(demo.DEMO_DIR / "instances.jsonl").instances
                    if i.instance_id == INSTANCE_ID)
    preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR),
                        RepoResolver(cache_dir, overrides=built, allow_clone=False), cache_dir)
    prepared = preparer.prepare(instance)
    backend = DockerBackend(engine, run_id="test-isolation")
    box = backend.start(prepared.image.tag, "isolation")
    box.exec(["/bin/sh", "-c", f"cp -a {PRISTINE_TREE}/. /testbed/"])
    # /testbed is root-owned (sealing): git is told it is safe, as the harness does for the tests
    box.exec(["git", "config", "--global", "--add", "safe.directory", "/testbed"])
    yield box
    box.close()


def test_code_in_the_container_cannot_open_a_network_connection(sandbox):
    probe = (
        "import socket\n"
        "results = []\n"
        "for host, port in [('1.1.1.1', 80), ('8.8.8.8', 53), ('10.0.0.1', 80), ('172.17.0.1', 2375)]:\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try:\n"
        "        s.connect((host, port)); results.append('CONNECTED')\n"
        "    except OSError as exc:\n"
        "        results.append(type(exc).__name__)\n"
        "try:\n"
        "    socket.getaddrinfo('pypi.org', 443); results.append('RESOLVED')\n"
        "except OSError:\n"
        "    results.append('noresolve')\n"
        "print(' '.join(results))\n"
    )
    res = sandbox.exec(["python3", "-c", probe], timeout=60)
    assert res.exit_code == 0, res.output
    assert "CONNECTED" not in res.output and "RESOLVED" not in res.output
    interfaces = sandbox.exec(["/bin/sh", "-c", "ls /sys/class/net"], timeout=30).output.split()
    assert interfaces == ["lo"]


def test_repository_in_the_container_has_one_commit_and_no_future(sandbox, cache_dir):
    count = sandbox.exec(["git", "rev-list", "--all", "--count"], timeout=30)
    assert count.output.strip() == "1"
    log = sandbox.exec(["git", "log", "--all", "--format=%H %s %B"], timeout=30)
    assert log.exit_code == 0 and len(log.output.strip().splitlines()) >= 1
    assert "FIX-SECRET" not in log.output
    # The upstream fix commit exists in the source repository but not in the container.
    repo_src = demo.DEMO_DIR / "repos" / "harness-demo__calcly"
    shas = demo.history_shas(repo_src)
    fix_sha = shas["04-fix-median"]
    missing = sandbox.exec(["git", "cat-file", "-e", fix_sha], timeout=30)
    assert missing.exit_code != 0
    for what in ("remote", "tag"):
        assert sandbox.exec(["git", what], timeout=30).output.strip() == ""
    refs = sandbox.exec(["/bin/sh", "-c", "ls .git; cat .git/packed-refs 2>/dev/null; ls .git/logs 2>&1"],
                        timeout=30).output
    assert "packed-refs" not in refs.split() and "No such file" in refs
    grep = sandbox.exec(["/bin/sh", "-c", "grep -r FIX-SECRET /testbed /opt/harness 2>/dev/null | head -1"],
                        timeout=30)
    assert grep.output.strip() == ""


def test_container_is_unprivileged_and_read_only(sandbox):
    status = sandbox.exec(["/bin/sh", "-c", "id -u; grep CapEff /proc/self/status; "
                                            "touch /usr/x 2>&1; touch /opt/harness/venv/x 2>&1; "
                                            "touch /testbed/ok && echo testbed-writable"], timeout=30).output
    lines = status.splitlines()
    assert lines[0] == "1000"
    assert "0000000000000000" in lines[1]
    assert "Read-only file system" in status
    assert "testbed-writable" in status


def test_trusted_files_are_root_owned_and_the_test_user_can_neither_change_nor_replace_them(sandbox):
    sandbox.put_files(steps.IO_DIR, steps.trusted_entries())  # as every evaluation's first archive call
    reporter = incontainer.trusted_path("junit_reporter.py")
    listing = sandbox.exec(["stat", "-c", "%u %a %n", incontainer.TRUSTED_DIR, incontainer.PY_DIR, reporter],
                           timeout=30)
    assert listing.output.split("\n")[:3] == [f"0 755 {incontainer.TRUSTED_DIR}", f"0 755 {incontainer.PY_DIR}",
                                               f"0 444 {reporter}"], listing.output
    same = sandbox.exec(["cat", reporter], timeout=30).output.encode()
    assert same == incontainer.files()["py/junit_reporter.py"]
    # as the test user (uid 1000): write, delete, rename the file or its directories, shadow them
    attempts = {
        "write": f"echo x >> {reporter}",
        "delete": f"rm -f {reporter}",
        "add": f"touch {incontainer.PY_DIR}/sitecustomize.py",
        "rename_dir": f"mv {incontainer.TRUSTED_DIR} /harness/moved",
        "rename_py": f"mv {incontainer.PY_DIR} {incontainer.TRUSTED_DIR}/moved",
        "chmod": f"chmod u+w {reporter}",
    }
    for what, command in attempts.items():
        res = sandbox.exec(["/bin/sh", "-c", command], timeout=30)
        assert res.exit_code != 0, (what, res.output)
    after = sandbox.exec(["cat", reporter], timeout=30).output.encode()
    assert after == same
    assert sandbox.exec(["ls", incontainer.PY_DIR], timeout=30).output.split() == \
        [name.split("/")[-1] for name in incontainer.files() if name.startswith("py/")]
    # nor make anything beside them (/harness is root's; the launcher makes the test user's directory)
    assert sandbox.exec(["mkdir", "/harness/out-test"], timeout=30).exit_code != 0


def test_no_container_or_volume_survives_a_closed_sandbox(engine, sandbox):
    sandbox.close()
    assert leftover_containers(engine, "test-isolation") == []


def test_a_released_sandbox_is_removed_in_the_background_and_drain_waits_for_it(engine, cache_dir):
    """An evaluation releases its sandbox and goes on; the backend's reaper removes the
    container and its volumes, and a drained backend leaves nothing behind."""
    built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    instance = next(i for i in load_instances(demo.DEMO_DIR / "instances.jsonl").instances
                    if i.instance_id == INSTANCE_ID)
    preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR),
                        RepoResolver(cache_dir, overrides=built, allow_clone=False), cache_dir)
    backend = DockerBackend(engine, run_id="test-release")
    boxes = [backend.start(preparer.prepare(instance).image.tag, f"release-{n}") for n in range(3)]
    assert len(leftover_containers(engine, "test-release")) == 3 * 3   # each: a container and two volumes
    for box in boxes:
        box.release()
    assert backend.reaper.drain(timeout=120)
    assert leftover_containers(engine, "test-release") == []


def _demo_image(engine, cache_dir) -> str:
    built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    instance = next(i for i in load_instances(demo.DEMO_DIR / "instances.jsonl").instances
                    if i.instance_id == INSTANCE_ID)
    preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR),
                        RepoResolver(cache_dir, overrides=built, allow_clone=False), cache_dir)
    return preparer.prepare(instance).image.tag


def _set_up_step(box, layout) -> dict:
    """The trusted set-up step with no patch, as the evaluator runs it; its tree report."""
    import json
    limits = {"max_changes": 1000, "content_limit": 1 << 20, "content_total": 1 << 24}
    box.put_files(steps.IO_DIR, steps.initial_files(layout, None, {"PATH": "/usr/bin:/bin"}, 120, limits, {},
                                                    None, box.early_marker))
    res = box.exec(steps.prepare_argv(layout), timeout=240)
    assert res.exit_code == 0, res.output[-2000:]
    return json.loads(res.output)


def test_the_container_fills_the_working_copy_as_the_test_user_before_the_set_up_step(engine, cache_dir):
    """The container's first process copies the pristine tree into /testbed as the test user
    while the inputs go in (harness.integrity.steps.early_reset); the set-up step waits for
    its root-owned marker and finds the working copy exactly the pristine tree."""
    backend = DockerBackend(engine, run_id="test-early-reset")
    box = backend.start(_demo_image(engine, cache_dir), "early", early=steps.early_reset())
    try:
        assert box.early_marker == steps.TESTBED_READY
        report = _set_up_step(box, steps.Layout.new())
        assert report["changes"] == [] and report["history_commits"] == 1
        marker = box.exec(["stat", "-c", "%u %a %s", steps.TESTBED_READY], timeout=30).output.split()
        assert marker[:2] == ["0", "644"]
        assert box.exec(["cat", steps.TESTBED_READY], timeout=30).output.strip() == "0"
        owners = box.exec(["/bin/sh", "-c", "find /testbed -mindepth 1 -printf '%U\\n' | sort -u"], timeout=30)
        assert owners.output.split() == ["1000"]
        # the first process went on to sleep: the container lives on as before
        assert box.exec(["cat", "/proc/1/cmdline"], timeout=30).output.split("\0")[:2] == ["sleep", "infinity"]
    finally:
        box.close()


def test_when_the_early_copy_fails_the_set_up_step_copies_the_tree_itself(engine, cache_dir):
    from harness.engine.sandbox import EarlyCommand
    backend = DockerBackend(engine, run_id="test-early-reset")
    failing = EarlyCommand((*steps.DROP_TO_TEST_USER, "/bin/sh", "-c", "touch /testbed/half-done; exit 3"),
                           steps.TESTBED_READY)
    box = backend.start(_demo_image(engine, cache_dir), "early-fails", early=failing)
    try:
        report = _set_up_step(box, steps.Layout.new())
        assert box.exec(["cat", steps.TESTBED_READY], timeout=30).output.strip() == "3"
        # the set-up step's own copy: nothing left of the failed one, nothing missing
        assert report["changes"] == [], report["changes"][:5]
    finally:
        box.close()
    assert leftover_containers(engine, "test-early-reset") == []
