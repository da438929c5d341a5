"""The harness in a container: ``docker-compose.yml`` runs the ``harness-app`` image (built
by scripts/selfimage.py on the project's own base) with the engine socket, the cache and
the run directory mounted, and grades the demo set exactly as the host's harness does.

Debian's docker-compose 1.29 is always exercised (its absence is a failure: scripts/setup.sh
installs it). The Compose v2 plugin (``docker compose``) is exercised too where it is
installed; where it is not, that one case is reported as skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness import __version__
from harness.hashing import content_hash
from harness.inputs.demo import DEMO_DIR
from harness.inputs.instances import load_instances
from tests.conftest import PROJECT_ROOT, leftover_containers

pytestmark = pytest.mark.engine

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
DEMO_IDS = sorted(i.instance_id for i in load_instances(DEMO_DIR / "instances.jsonl").instances)
#: Where the installed harness's data is inside the image (no source tree there).
IN_IMAGE_DATA = "/opt/harness-app/lib/python3.11/site-packages/harness/data"
RUN_ID = "compose-gold"


def _leftovers(engine, run_id: str) -> list:
    """``leftover_containers`` of this run only: other test sessions may share the engine."""
    from harness.engine.sandbox import LABEL_RUN

    def labels(item) -> dict:
        return (getattr(item, "labels", None) if hasattr(item, "image") else item.attrs.get("Labels")) or {}
    return [item for item in leftover_containers(engine) if labels(item).get(LABEL_RUN) == run_id]


@pytest.fixture(scope="module")
def prepared(engine, cache_dir):
    """The image, and the demo set's host-only inputs (base, wheelhouse, environment) in the
    cache the compose service mounts. Timed, so a slow warm path shows in the report."""
    from tests.scripts import script_module
    selfimage = script_module("selfimage")
    started = time.monotonic()
    ref = selfimage.build_harness_image_ref(engine, cache_dir)
    environments, failed = selfimage.prepare_offline(engine, cache_dir, DEMO_DIR / "instances.jsonl")
    assert failed == {}
    print(f"\nharness image {ref.tag} {'built' if ref.built else 'found'}; "
          f"prepared in {time.monotonic() - started:.1f} s")
    return ref, environments


def _compose_command(flavour: str) -> list[str]:
    if flavour == "docker-compose":
        if shutil.which("docker-compose") is None:
            pytest.fail("docker-compose is not installed: `apt-get install docker-compose` "
                        "(bash scripts/setup.sh installs it)", pytrace=False)
        return ["docker-compose"]
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the Compose v2 plugin (`docker compose`) is not installed here; "
                    "the docker-compose 1.29 case ran")
    return ["docker", "compose"]


def _compose_env(cache_dir: Path, runs_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    env.update(HARNESS_CACHE_DIR=str(cache_dir), HARNESS_RUNS_DIR=str(runs_dir))
    return env


@pytest.mark.parametrize("flavour", ["docker-compose", "docker compose"])
def test_compose_file_is_valid(flavour, tmp_path, cache_dir):
    compose = _compose_command(flavour)
    proc = subprocess.run([*compose, "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True,
                          env=_compose_env(cache_dir, tmp_path / "runs"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "harness-app:latest" in proc.stdout
    assert str(cache_dir) in proc.stdout and "/var/run/docker.sock" in proc.stdout
    assert str(tmp_path / "runs") in proc.stdout


@pytest.mark.parametrize("flavour", ["docker-compose", "docker compose"])
def test_compose_run_grades_the_demo_set_with_gold(flavour, prepared, engine, cache_dir, tmp_path):
    compose = _compose_command(flavour)
    ref, environments = prepared
    runs = tmp_path / "runs"
    project = f"harness-compose-test-{uuid.uuid4().hex[:8]}"
    base = [*compose, "-f", str(COMPOSE_FILE), "-p", project]
    env = _compose_env(cache_dir, runs)
    started = time.monotonic()
    try:
        proc = subprocess.run([*base, "run", "--rm", "-T", "harness", "run",  # the embedded demo set
                               "--predictions", "gold", "--run-id", RUN_ID, "--output-dir", "/runs",
                               "--quiet"], capture_output=True, text=True, env=env, timeout=900)
        seconds = time.monotonic() - started
        assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        assert "run directory: /runs/compose-gold" in proc.stdout
        print(f"{flavour} run: {seconds:.1f} s")

        summary = json.loads((runs / "compose-gold" / "summary.json").read_text())
        assert summary["total_instances"] == len(DEMO_IDS)
        assert summary["resolved_ids"] == DEMO_IDS
        assert summary["error_ids"] == []
        for iid in DEMO_IDS:
            report = json.loads((runs / "compose-gold" / iid / "report.json").read_text())
            assert (report["status"], report["resolved"]) == ("FULL", True), iid
            # The containerised harness found the environment the host prepared in the
            # shared cache: same content hashes, nothing rebuilt from another set of inputs.
            assert any(report["image"]["env_tag"] in line for line in environments), report["image"]
        assert _leftovers(engine, RUN_ID) == []
        assert engine.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"}) == []
    finally:
        subprocess.run([*base, "down", "--remove-orphans"], capture_output=True, text=True, env=env, timeout=120)


def _recorded_commit(ref) -> str | None:
    """The commit the image's wheel was built with (part of its hashed inputs)."""
    return json.loads(ref.labels["org.harness.inputs"])["commit"]


def test_compose_image_is_the_installed_wheel(prepared, cache_dir, tmp_path):
    """The image holds the harness installed from its wheel: data inside the package, the
    commit recorded at build, no source tree."""
    ref, _ = prepared
    compose = _compose_command("docker-compose")
    project = f"harness-compose-test-{uuid.uuid4().hex[:8]}"
    base = [*compose, "-f", str(COMPOSE_FILE), "-p", project]
    env = _compose_env(cache_dir, tmp_path / "runs")
    try:
        def run(*args: str) -> str:
            proc = subprocess.run([*base, "run", "--rm", "-T", "--entrypoint", args[0], "harness", *args[1:]],
                                  capture_output=True, text=True, env=env, timeout=120)
            assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            return proc.stdout
        assert f"demo set  {IN_IMAGE_DATA}/instances/demo" in run("harness", "data", "path")
        commit = _recorded_commit(ref)
        head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        assert commit is None if not head else commit.removesuffix("-dirty") == head
        assert run("harness", "--version").strip() == (
            f"harness {__version__} (commit {commit}, recorded at build (HARNESS_BUILD_COMMIT))" if commit
            else f"harness {__version__} (commit unknown)")
        assert run("sh", "-c", "test -e /app && echo present || echo absent").strip() == "absent"
    finally:
        subprocess.run([*base, "down", "--remove-orphans"], capture_output=True, text=True, env=env, timeout=120)


def test_harness_image_is_content_addressed(prepared, engine, cache_dir, tmp_path):
    """A warm call builds nothing; a changed project file changes the tag; what is not part
    of the image (the venv, runs, tests, caches) never enters the hash. Works on copies of
    the tree, so that edits made to the working tree meanwhile cannot race the checks."""
    from tests.scripts import script_module
    selfimage = script_module("selfimage")
    names = [f.relpath for f in selfimage.project_files(PROJECT_ROOT)]
    assert "pyproject.toml" in names and "images/harness/Dockerfile" in names
    assert "instances/demo/instances.jsonl" in names
    assert not [n for n in names if n.split("/")[0] in (".venv", "runs", "tests", ".git")
                or "__pycache__" in n or n.endswith(".pyc")]

    def copy_tree(dest: Path) -> Path:
        for name in names:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, dest / name)
        return dest

    commit = _recorded_commit(prepared[0])  # a copy is no checkout: record the fixture image's commit
    clean = copy_tree(tmp_path / "clean")
    ref = selfimage.build_harness_image_ref(engine, cache_dir, project_root=clean, commit=commit)  # the fixture's image in CI
    started = time.monotonic()
    again = selfimage.build_harness_image_ref(engine, cache_dir, project_root=clean, commit=commit)
    assert (again.tag, again.image_id, again.built) == (ref.tag, ref.image_id, False)
    assert time.monotonic() - started < 10
    assert engine.images.get("harness-app:latest").id == ref.image_id

    junk = tmp_path / "junk"
    shutil.copytree(clean, junk)
    (junk / "harness" / "__pycache__").mkdir(exist_ok=True)
    (junk / "harness" / "__pycache__" / "junk.cpython-311.pyc").write_bytes(b"junk")
    (junk / "tests").mkdir()
    (junk / "tests" / "test_x.py").write_text("x = 1\n")
    (junk / ".venv").mkdir()
    (junk / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (junk / "runs" / "r").mkdir(parents=True)
    (junk / "runs" / "r" / "summary.json").write_text("{}\n")
    same, _ = selfimage.harness_image_inputs(engine, cache_dir, junk, commit)
    assert content_hash(same) == again.inputs_hash

    (junk / "harness" / "cli.py").write_text((junk / "harness" / "cli.py").read_text() + "\n# changed\n")
    changed, _ = selfimage.harness_image_inputs(engine, cache_dir, junk, commit)
    assert changed["project"] != same["project"]
    assert {k: v for k, v in changed.items() if k != "project"} == {k: v for k, v in same.items() if k != "project"}
