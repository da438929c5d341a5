"""The agent stage's working sandbox (harness/agents/workspace.py), with real containers on the
demo set: what an agent can reach from inside (leakage), how its commands run, and the patch
its tree is worth (computed on the host)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import secrets
import subprocess
from pathlib import Path

import pytest

from harness.agents.workspace import OUTPUT_LIMIT, DockerWorkspace, TreeLimits, open_workspace
from harness.engine.layers import PRISTINE_TREE, VENV
from harness.engine.sandbox import LABEL_RUN, LABEL_RUN_DIR, LABEL_TASK, DockerBackend
from harness.errors import WorkingTreeRefused
from harness.hashing import content_hash
from harness.inputs import demo
from harness.inputs.instances import load_instances
from harness.inputs.repos import GitDir, RepoResolver
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.patches import patch_files
from harness.preparation.preparer import Preparer
from tests.conftest import PROJECT_ROOT, leftover_containers

pytestmark = pytest.mark.engine

RUN_ID = "test-agent-workspace"
INSTANCES = {i.instance_id: i for i in load_instances(demo.DEMO_DIR / "instances.jsonl").instances}


@pytest.fixture(scope="module")
def preparer(engine, cache_dir):
    built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    return Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR),
                    RepoResolver(cache_dir, overrides=built, allow_clone=False), cache_dir)


@pytest.fixture(scope="module")
def prepared(preparer):
    cache: dict = {}

    def get(instance_id: str = "harness-demo__calcly-1"):
        if instance_id not in cache:
            cache[instance_id] = preparer.prepare(INSTANCES[instance_id])
        return cache[instance_id]
    return get


@pytest.fixture(scope="module")
def backend(engine, tmp_path_factory):
    backend = DockerBackend(engine, RUN_ID, run_dir=content_hash(str(tmp_path_factory.mktemp("agent-run"))))
    yield backend
    backend.cleanup_run()
    assert leftover_containers(engine, RUN_ID) == []


@pytest.fixture(scope="module")
def workspace(backend, prepared):
    with open_workspace(backend, prepared("harness-demo__inventory-1"), name_hint="agent-leakage") as ws:
        yield ws


@pytest.fixture
def fresh(backend, prepared, tmp_path):
    """A workspace of its own for one test (its tree is changed), diffing under tmp_path."""
    with open_workspace(backend, prepared(), name_hint="agent-diff", scratch_dir=tmp_path) as ws:
        yield ws


def ok(ws: DockerWorkspace, command: str, **kwargs) -> str:
    result = ws.run(command, **kwargs)
    assert result.returncode == 0 and not result.timed_out, (command, result)
    return result.output


# --------------------------------------------------------------------------------- leakage
def test_the_repository_has_one_commit_no_remote_no_tag_and_is_the_export(workspace, prepared):
    assert ok(workspace, "git log --all --format=%H").split() == \
        [str(GitDir(prepared("harness-demo__inventory-1").export_path).run("rev-parse", "HEAD")).strip()]
    assert ok(workspace, "git rev-list --all --count").strip() == "1"
    assert ok(workspace, "git remote -v; git tag; git stash list; git reflog") == ""
    assert ok(workspace, "git for-each-ref --format='%(refname)'").split() == ["refs/heads/main"]
    assert ok(workspace, "git status --porcelain --untracked-files=all") == ""
    assert workspace.folded == ()  # the demo image's build changes no tracked file: the export's commit as it is


@pytest.mark.parametrize("instance_id", sorted(INSTANCES))
def test_the_test_patch_is_not_applied(backend, prepared, instance_id):
    instance, ready = INSTANCES[instance_id], prepared(instance_id)
    touched = patch_files(instance.test_patch)
    assert touched.created or touched.modified
    export = GitDir(ready.export_path)
    with open_workspace(backend, ready, name_hint="agent-testpatch") as ws:
        for path in touched.created:
            assert ws.run(f"test -e '{path}'").returncode == 1, path
        for path in touched.modified:
            inside = ok(ws, f"base64 -w0 '{path}'")
            assert inside == base64.b64encode(export.read_blob("HEAD", path)).decode(), path


def test_no_network_no_dns(workspace):
    probe = ("import socket\n"
             "out = []\n"
             "for host, port in [('1.1.1.1', 80), ('8.8.8.8', 53), ('172.17.0.1', 2375), ('10.0.0.1', 80)]:\n"
             "    s = socket.socket(); s.settimeout(3)\n"
             "    try:\n"
             "        s.connect((host, port)); out.append('CONNECTED')\n"
             "    except OSError as exc:\n"
             "        out.append(type(exc).__name__)\n"
             "try:\n"
             "    socket.getaddrinfo('pypi.org', 443); out.append('RESOLVED')\n"
             "except OSError:\n"
             "    out.append('no-dns')\n"
             "print(' '.join(out))\n")
    out = ok(workspace, f"python -c \"{probe}\"", timeout=60)
    assert "CONNECTED" not in out and "RESOLVED" not in out and "no-dns" in out
    assert ok(workspace, "ls /sys/class/net").split() == ["lo"]
    assert workspace.run("getent hosts github.com").returncode != 0


def test_no_docker_socket_and_no_host_path(workspace, tmp_path, cache_dir):
    marker = tmp_path / f"host-marker-{secrets.token_hex(6)}"
    marker.write_text("host")
    # the image has a /root of its own: the host's home is looked for by what it holds (the cache)
    host_paths = [marker, tmp_path, PROJECT_ROOT, cache_dir, Path("/work"), Path("/var/lib/docker"),
                  Path("/var/run/docker.sock"), Path("/run/docker.sock"), Path("/run/containerd")]
    for path in host_paths:
        assert workspace.run(f"test -e '{path}'").returncode == 1, path
    assert ok(workspace, f"find / -xdev -name '{marker.name}' 2>/dev/null; true", timeout=120) == ""
    sockets = ok(workspace, "find / -xdev -type s 2>/dev/null; true", timeout=120)
    assert "docker" not in sockets and "containerd" not in sockets
    # every mount: the image's root, the sandbox's own tmpfs volumes, the kernel's file systems,
    # and the three files the engine writes for every container; no host directory
    allowed = {"/", "/testbed", "/harness", "/tmp", "/etc/resolv.conf", "/etc/hostname", "/etc/hosts"}
    points = [line.split()[4] for line in ok(workspace, "cat /proc/self/mountinfo").splitlines()]
    strange = [p for p in points if p not in allowed and not p.startswith(("/proc", "/dev", "/sys"))]
    assert points and strange == []


def test_commands_run_unprivileged_and_cannot_become_root(workspace):
    status = dict(line.split(":\t", 1) for line in ok(workspace, "cat /proc/self/status").splitlines()
                  if ":\t" in line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Uid"].split() == ["1000"] * 4
    assert workspace.run("su -c id root < /dev/null").returncode != 0
    assert "PermissionError" in workspace.run("python -c 'import os; os.setuid(0)'").output
    assert "PermissionError" in workspace.run("python -c 'import os; os.setresgid(0, 0, 0)'").output
    assert workspace.run("touch /etc/x /opt/harness/venv/x").returncode != 0
    assert workspace.run("echo x >> /harness/workspace/runner.py").returncode != 0


def test_the_sandbox_is_grading_s_with_its_limits_and_labels(engine, backend, prepared):
    with open_workspace(backend, prepared(), name_hint="agent-labels", task="tok-agent") as ws:
        attrs = engine.api.inspect_container(ws.sandbox.id)
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
        assert host["Memory"] == backend.limits.memory and host["PidsLimit"] == backend.limits.pids
        labels = attrs["Config"]["Labels"]
        assert labels[LABEL_RUN] == RUN_ID and labels[LABEL_RUN_DIR] == backend.run_dir
        assert labels[LABEL_TASK] == "tok-agent"
        assert backend.kill_task("tok-agent") == 1  # a deadline kill finds it as it finds grading's
        assert not ws.sandbox.alive()


# --------------------------------------------------------------------------------- commands
def test_a_timeout_kills_that_command_only_and_the_next_one_runs(workspace):
    ok(workspace, "nohup sleep 2345 > /dev/null 2>&1 &")  # an earlier command's server: it lives on
    result = workspace.run("sleep 1234 & (setsid sh -c 'sleep 3456 &' &); echo started; sleep 300", timeout=2)
    assert result.timed_out and result.returncode is None
    assert result.output == "started\n" and result.seconds < 40
    alive = ok(workspace, "ps -eo args")
    assert "sleep 2345" in alive and "sleep 1234" not in alive and "sleep 3456" not in alive
    assert "<defunct>" not in ok(workspace, "ps -eo stat,args")
    assert ok(workspace, "echo next") == "next\n"


def test_output_past_the_cap_is_cut_and_the_command_finishes(workspace):
    result = workspace.run("python -c \"import sys; sys.stdout.write('h' * 2_000_000 + 'THE-END')\"; exit 4")
    assert result.truncated and not result.timed_out and result.returncode == 4
    assert len(result.output) < OUTPUT_LIMIT + 200
    assert result.output.startswith("hhh") and result.output.endswith("THE-END")
    assert "bytes of output left out" in result.output
    assert ok(workspace, "echo still") == "still\n"


def test_env_cwd_home_and_nothing_but_files_persist(workspace):
    out = ok(workspace, "pwd; echo $GREETING; echo $HOME; touch $HOME/.w && echo home-writable",
             cwd="/tmp", env={"GREETING": "hello there"})
    assert out.split("\n")[:4] == ["/tmp", "hello there", "/tmp", "home-writable"]
    ok(workspace, "cd /; export LEFT=1; echo kept > /tmp/kept-file")
    assert ok(workspace, "pwd; echo ${LEFT:-unset}; cat /tmp/kept-file").split() == ["/testbed", "unset", "kept"]
    env = dict(line.split("=", 1) for line in ok(workspace, "env").splitlines() if "=" in line)
    assert env["PATH"].startswith(f"{VENV}/bin:") and "HARNESS_COMMAND" not in env
    assert workspace.run("exit 7").returncode == 7
    missing = workspace.run("pwd", cwd="/no/such/dir")
    assert missing.returncode != 0 and "/no/such/dir" in missing.output


def test_python_pip_and_pytest_are_the_environment_s(workspace):
    assert ok(workspace, "python -c 'import sys; print(sys.prefix)'").strip() == VENV
    assert ok(workspace, "command -v python pip pytest").split() == [f"{VENV}/bin/{n}" for n in
                                                                      ("python", "pip", "pytest")]
    assert "pytest" in ok(workspace, "python -m pytest --version 2>&1")


# --------------------------------------------------------------------------------- the diff
CHANGES = r"""
set -e
printf 'extra line\n' >> README.md
rm tests/test_ops.py
printf 'def new():\n    return 1\n' > calcly/new_module.py
mkdir -p 'dir with space'
printf 'caf\xc3\xa9\n' > 'dir with space/naïve café.txt'
python -c "open('new\nline.txt', 'w').write('odd name\n')"
printf 'ignored\n' > calcly/ignored.pyc
mkdir -p calcly/__pycache__ && printf 'x' > calcly/__pycache__/m.cpython-39.pyc
ln -s README.md readme-link
chmod +x calcly/ops.py
"""


def sandbox_submission(ws: DockerWorkspace) -> str:
    """What mini-swe-agent's own submission command prints in the sandbox."""
    return ok(ws, "git add -A && git diff --cached")


def test_the_diff_is_what_git_add_all_prints_in_the_sandbox(fresh):
    ok(fresh, CHANGES)
    ok(fresh, "printf 'bin\\000ary' > data.bin")
    diff = fresh.diff()
    assert diff.patch == sandbox_submission(fresh)
    assert set(diff.files) == {"README.md", "tests/test_ops.py", "calcly/new_module.py", "calcly/ops.py",
                               "dir with space/naïve café.txt", "new\nline.txt", "readme-link", "data.bin"}
    assert diff.binary_files == ("data.bin",) and diff.symlinks == ("readme-link",)
    assert "Binary files /dev/null and b/data.bin differ" in diff.patch
    assert "new file mode 120000" in diff.patch and "ignored" not in diff.patch and "__pycache__" not in diff.patch
    assert '"b/dir with space/na\\303\\257ve caf\\303\\251.txt"' in diff.patch
    assert "old mode 100644\nnew mode 100755" in diff.patch
    assert diff.sha256 == hashlib.sha256(diff.patch.encode()).hexdigest()


def test_the_diff_applies_to_a_fresh_checkout_of_the_base_and_gives_the_same_tree(fresh, prepared, tmp_path):
    ok(fresh, CHANGES)
    diff = fresh.diff()
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", str(prepared().export_path), str(checkout)], check=True)
    (tmp_path / "agent.diff").write_text(diff.patch)
    subprocess.run(["git", "apply", str(tmp_path / "agent.diff")], cwd=checkout, check=True)
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    applied = subprocess.run(["git", "write-tree"], cwd=checkout, check=True, capture_output=True, text=True)
    assert applied.stdout.strip() == ok(fresh, "git add -A && git write-tree").strip()


def test_the_sandbox_s_git_state_changes_nothing(fresh):
    ok(fresh, "printf 'changed\\n' >> README.md && git commit -qam 'agent commit' && git log --oneline | wc -l")
    assert ok(fresh, "git diff HEAD") == ""  # the sandbox's own view: nothing left to submit
    assert fresh.diff().files == ("README.md",)
    ok(fresh, "rm -rf .git")
    assert fresh.diff().files == ("README.md",)


def test_a_hostile_tree_never_reaches_the_host(fresh, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    marker = tmp_path / "pwned"
    ok(fresh, f"""
ln -s / root-link
ln -s ../../../../etc/passwd up-link
ln -s '{victim}' victim-link
mkdir sub && ln -s /etc/passwd sub/.gitignore
printf '* filter=pwn diff=pwn\\n' > .gitattributes
git config filter.pwn.clean 'touch {marker}'
git config diff.pwn.textconv 'touch {marker}'
git config core.fsmonitor 'touch {marker}'
printf 'plain\\n' > plain.txt
""")
    diff = fresh.diff()
    assert set(diff.symlinks) == {"root-link", "up-link", "victim-link", "sub/.gitignore"}
    assert "+/\n\\ No newline at end of file" in diff.patch and f"+{victim}\n" in diff.patch
    assert "root:x:0:0" not in diff.patch and "plain.txt" in diff.files
    assert not marker.exists() and list(victim.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness-tree-")] == []  # scratch removed


def test_a_deep_tree_diffs_and_a_too_deep_one_is_refused(fresh):
    ok(fresh, "d=$(printf 'd/%.0s' $(seq 60)) && mkdir -p $d && echo deep > ${d}leaf.txt")
    assert fresh.diff().files == ("d/" * 60 + "leaf.txt",)
    ok(fresh, "d=$(printf 'e/%.0s' $(seq 300)) && mkdir -p $d && echo deeper > ${d}leaf.txt")
    with pytest.raises(WorkingTreeRefused, match="deeper than 256 directories"):
        fresh.diff()


def test_a_huge_tree_is_refused_with_one_clear_error(backend, prepared, tmp_path):
    with open_workspace(backend, prepared(), name_hint="agent-huge", scratch_dir=tmp_path,
                        limits=TreeLimits(stream_bytes=16 << 20)) as ws:
        ok(ws, "head -c 40000000 /dev/zero > huge.bin")
        with pytest.raises(WorkingTreeRefused, match="over 16777216 bytes") as caught:
            ws.diff()
        assert caught.value.reason == "working_tree_refused"
        assert list(tmp_path.iterdir()) == []
        ok(ws, "rm huge.bin && echo small > small.txt")
        assert ws.diff().files == ("small.txt",)


@pytest.fixture
def image_with_its_own_changes(engine, prepared):
    """The demo instance's image with a tracked file of the pristine tree changed, as an image's
    build changes one (requests' spec appends a CA to cacert.pem; SWE-bench's sphinx images edit
    tox.ini): the tree the agent is given is not the base commit's."""
    base = prepared()
    tag = f"harness-test-agent-pristine:{content_hash(base.image.tag)}"
    dockerfile = (f"FROM {base.image.tag}\nLABEL org.harness.kind=test\n"
                  f"RUN printf 'appended by the build\\n' >> {PRISTINE_TREE}/README.md\n")
    image, _ = engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, network_mode="none", rm=True)
    try:
        yield dataclasses.replace(base, image=dataclasses.replace(base.image, tag=tag, image_id=image.id))
    finally:
        engine.images.remove(image.id, force=True)


def test_the_prediction_is_taken_against_the_tree_the_agent_was_given(backend, image_with_its_own_changes):
    with open_workspace(backend, image_with_its_own_changes, name_hint="agent-pristine") as ws:
        # the build's edit is folded into the one commit, as SWE-bench's images commit theirs:
        # the agent's git starts clean and its history is still one commit with no reflog
        assert ws.folded == ("README.md",)
        assert ok(ws, "git status --porcelain --untracked-files=all") == ""
        assert ok(ws, "git rev-list --all --count").strip() == "1" and ok(ws, "git reflog") == ""
        assert ok(ws, "git show HEAD:README.md").endswith("appended by the build\n")
        ok(ws, "printf 'agent line\\n' >> README.md && printf 'x = 2\\n' >> calcly/ops.py")
        diff = ws.diff()
        assert diff.files == ("README.md", "calcly/ops.py")
        assert "+agent line" in diff.patch and "+appended by the build" not in diff.patch
        assert "\n appended by the build\n+agent line\n" in diff.patch  # the build's line is context
        # grading starts from the pristine tree: the prediction applies there
        encoded = base64.b64encode(diff.patch.encode()).decode()
        applied = ok(ws, f"rm -rf /tmp/p && cp -a {PRISTINE_TREE} /tmp/p && cd /tmp/p && echo {encoded} | base64 -d "
                         "| git apply && git diff --stat | tail -1")
        assert "2 files changed" in applied
        # the agent's own submission holds its changes only, as the harness's prediction does
        assert sandbox_submission(ws) == diff.patch
        # against the base commit: the build's change is in it
        exported = ws.diff(against="export")
        assert "+appended by the build" in exported.patch and exported.base_tree != diff.base_tree
