"""docker-compose.yml's ``cluster`` profile, brought up for real with Debian's
docker-compose 1.29: the registry (Debian's docker-registry in ``harness-registry``), a Ray
head and a worker (``harness-cluster``: the harness with Ray, as ``harness node``), and the
driver service grading the demo set over the cluster. On one machine the worker drives
the shared engine through its socket; every port is on 127.0.0.1. The driver runs in the
head's container (``exec head harness run``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import uuid

import pytest

from harness.inputs.demo import DEMO_DIR
from harness.inputs.instances import load_instances
from tests.conftest import PROJECT_ROOT
from tests.fixtures.services import free_port

pytestmark = [pytest.mark.engine, pytest.mark.cluster]

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
DEMO_IDS = sorted(i.instance_id for i in load_instances(DEMO_DIR / "instances.jsonl").instances)


@pytest.fixture(scope="module")
def cluster_images(engine, cache_dir):
    from tests.scripts import script_module
    selfimage = script_module("selfimage")
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (bash scripts/setup.sh installs it)", pytrace=False)
    cluster = selfimage.build_harness_image_ref(engine, cache_dir, extras=("ray",))
    registry = selfimage.build_registry_image(engine, cache_dir)
    _, failed = selfimage.prepare_offline(engine, cache_dir, DEMO_DIR / "instances.jsonl")
    assert failed == {}
    return cluster, registry


def test_the_cluster_profile_is_valid_and_leaves_the_default_alone(tmp_path, cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    env.update(HARNESS_CACHE_DIR=str(cache_dir), HARNESS_RUNS_DIR=str(tmp_path / "runs"), RAY_AUTH_TOKEN="t")
    proc = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "--profile", "cluster", "config"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for needle in ("harness-registry:latest", "harness-cluster:latest", "node", "--head", "network_mode: host"):
        assert needle in proc.stdout, needle
    # Without the profile, `up` starts only the harness service.
    plain = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config", "--profiles"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert plain.returncode == 0 and plain.stdout.split() == ["cluster"], plain.stdout + plain.stderr


def test_the_cluster_profile_grades_the_demo_set(cluster_images, engine, cache_dir, tmp_path):
    ray_port, registry_port = free_port(), free_port()
    project = f"harness-cluster-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "RAY_"))}
    env.update(HARNESS_CACHE_DIR=str(cache_dir), HARNESS_RUNS_DIR=str(tmp_path / "runs"),
               HARNESS_REGISTRY_DIR=str(tmp_path / "registry"), HARNESS_REGISTRY_ADDR=f"127.0.0.1:{registry_port}",
               HARNESS_RAY_PORT=str(ray_port), HARNESS_NODE_IP="127.0.0.1", HARNESS_ENGINE_SLOTS="2",
               RAY_AUTH_TOKEN=secrets.token_hex(32))
    (tmp_path / "runs").mkdir()
    base = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", project, "--profile", "cluster"]
    try:
        up = subprocess.run([*base, "up", "-d", "registry", "head", "worker"], capture_output=True, text=True,
                            env=env, timeout=300)
        assert up.returncode == 0, up.stderr
        run = subprocess.run([*base, "exec", "-T", "head", "harness", "run", "--executor", "ray", "--registry",
                              f"127.0.0.1:{registry_port}", "--predictions", "gold", "--run-id", "compose-cluster",
                              "--output-dir", "/runs", "--max-workers", "2", "--quiet"],
                             capture_output=True, text=True, env=env, timeout=900)
        logs = subprocess.run([*base, "logs", "--no-color", "--tail", "40"], capture_output=True, text=True,
                              env=env, timeout=60).stdout
        assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-3000:]}\n{logs[-4000:]}"
        summary = json.loads((tmp_path / "runs" / "compose-cluster" / "summary.json").read_text())
        assert summary["resolved_ids"] == DEMO_IDS and summary["error_ids"] == []
        assert summary["executor"]["name"] == "ray" and summary["executor"]["nodes"]
        assert "head" not in summary["executor"]["nodes"]  # the head (0 slots) only schedules
    finally:
        down = subprocess.run([*base, "down", "--remove-orphans", "--timeout", "60"], capture_output=True,
                              text=True, env=env, timeout=300)
        assert down.returncode == 0, down.stderr
    leftovers = engine.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
    assert leftovers == []
