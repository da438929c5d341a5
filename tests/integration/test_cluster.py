"""Past one machine, on one machine: two private Docker engines, a registry, and a Ray
cluster of two ``harness node`` agents (the head drives engine A, the worker engine B).

* images through a registry: the second engine pulls (verified) what the first built;
* the demo set over the two nodes gives the same verdicts as on the shared engine;
* Ctrl-C on the driver removes the run's containers on both engines, and the run resumes;
* a node killed mid-run (its raylet, by pid): the run completes with the same verdicts
  and no container is left on either engine;
* an engine SIGKILLed mid-run (local executor): engine_lost results, a summary, a
  one-line message, exit 3, no traceback; the re-run finishes.

Engines start empty: base and environment images come from a registry seeded once from
the shared engine (no bootstrap per test). Everything started here is stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from harness.engine.sandbox import LABEL_OWNER
from harness.inputs.demo import DEMO_DIR
from tests.fixtures.services import PrivateEngine, RayCluster, engine_events, harness_cli
from tests.patchgen import demo_instance, write_predictions

pytestmark = [pytest.mark.engine, pytest.mark.cluster]

IDS = ["harness-demo__calcly-1", "harness-demo__calcly-2", "harness-demo__textkit-1", "harness-demo__inventory-1"]
EXPECTED = json.loads((DEMO_DIR / "expected.json").read_text())["predictions-extra.jsonl"]
EXTRA = {json.loads(line)["instance_id"]: json.loads(line)["model_patch"]
         for line in (DEMO_DIR / "predictions-extra.jsonl").read_text().splitlines()}


def _copies(tmp: Path, copies: int) -> tuple[str, str]:
    """``copies`` × the 4 demo instances (distinct ids) and their extra predictions."""
    records, patches = [], {}
    for n in range(copies):
        for iid in IDS:
            record = dict(demo_instance(iid))
            record["instance_id"] = f"{iid}-copy{n}"
            records.append(record)
            patches[record["instance_id"]] = EXTRA[iid]
    instances = tmp / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(instances), str(write_predictions(tmp / "predictions.jsonl", patches))


def _verdicts(run_dir: Path) -> dict:
    return {d["instance_id"]: (d["status"], d["error_reason"], d["tests_status"])
            for p in run_dir.glob("*/report.json") for d in [json.loads(p.read_text())]}


def _expected_verdict(instance_id: str) -> tuple:
    e = EXPECTED[instance_id.rsplit("-copy", 1)[0]]
    return e["status"], e["error_reason"]


def _harness_containers(client) -> list:
    """The ids of the harness's containers on an engine. One list call: ``containers.list``
    inspects each container after listing it, and one the run removes in between raised
    NotFound (a race of the check, not of the harness)."""
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}=harness"})]


# ---------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def seeded_registry(session_registry, engine, cache_dir):
    """The session registry holding the demo set's base and environment images, pushed
    from the shared engine (prepared there first, as `harness run` would)."""
    from harness.engine.registry import Registry
    from tests.scripts import script_module
    selfimage = script_module("selfimage")
    done, failed = selfimage.prepare_offline(engine, cache_dir, DEMO_DIR / "instances.jsonl")
    assert failed == {}
    registry = Registry(engine, session_registry)
    tags = set()
    for image in engine.images.list(filters={"label": "org.harness.kind=env"}):
        tags.update(t for t in image.tags if any(t in line for line in done))
    bases = {json.loads(engine.images.get(t).labels["org.harness.inputs"])["base"] for t in tags}
    for base_id in bases:
        tags.update(t for t in engine.images.get(base_id).tags if t.startswith("harness-base:"))
    assert tags and any(t.startswith("harness-base:") for t in tags)
    for tag in sorted(tags):
        assert registry.publish(tag), f"pushing {tag} to {session_registry} failed"
    return session_registry


@pytest.fixture(scope="module")
def engines():
    started = []
    try:
        for name in ("a", "b"):
            started.append(PrivateEngine(name))
            started[-1].start()
        yield {"a": started[0], "b": started[1]}
    finally:
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(len(started) or 1) as pool:  # both at once
            list(pool.map(lambda engine: engine.stop(), started))
        for engine in started:
            engine.remove_data()


@pytest.fixture(scope="module")
def cluster(engines, seeded_registry, cache_dir, tmp_path_factory):
    ray_cluster = RayCluster(tmp_path_factory.mktemp("ray"))
    try:
        ray_cluster.add_node("node-a", engines["a"].url, 2, head=True, cache_dir=cache_dir)
        ray_cluster.wait_for(2)
        ray_cluster.add_node("node-b", engines["b"].url, 2, cache_dir=cache_dir)
        ray_cluster.wait_for(4)
        yield ray_cluster
    finally:
        ray_cluster.stop()


def _run_on_cluster(cluster: RayCluster, registry: str, instances: str, predictions: str, out: Path, run_id: str,
                    *extra: str, wait: bool = True):
    import subprocess
    import sys
    args = [sys.executable, "-m", "harness", "run", "--executor", "ray", "--ray-address", cluster.address,
            "--registry", registry, "--instances", instances, "--predictions", predictions, "--output-dir",
            str(out), "--run-id", run_id, "--max-workers", "4", "--quiet", *extra]
    if wait:
        return subprocess.run(args, capture_output=True, text=True, env=cluster.env(), timeout=900)
    # A shell without job control starts background jobs with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: restore the default a terminal's Ctrl-C meets.
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env(),
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_reports(run_dir: Path, count: int, seconds: float = 300) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = len(list(run_dir.glob("*/report.json")))
        if done >= count:
            return done
        time.sleep(0.1)
    raise AssertionError(f"only {len(list(run_dir.glob('*/report.json')))} reports after {seconds} s")


# ---------------------------------------------------------------------------- images

def test_the_second_engine_pulls_what_the_first_built(engines, seeded_registry, local_registry, cache_dir):
    """Engine A builds the demo environment and pushes it to an empty registry; engine B
    pulls it (verified, same image id) instead of building: B's events show a pull and
    no build step, A's show the build."""
    from harness.inputs import demo
    from harness.inputs.repos import RepoResolver
    from harness.preparation.preparer import Preparer
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry

    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    spec = specs.get("harness-demo/calcly", demo_instance(IDS[0])["version"])
    refs, seconds = {}, {}
    for name in ("a", "b"):
        client = engines[name].client()
        preparer = Preparer(client, specs, RepoResolver(cache_dir, None, demo.build_demo_repos(
            demo.DEMO_DIR, cache_dir / "demo-repos")), cache_dir)
        preparer.images.use_registry(seeded_registry)
        base = preparer.images.base(spec.python, spec.apt_packages)  # from the seeded registry
        assert base.built is False
        for kind in ("inst", "env"):  # this engine has no environment image now
            for image in client.images.list(filters={"label": f"org.harness.kind={kind}"}):
                client.images.remove(image.id, force=True)
        preparer.images.use_registry(local_registry)  # empty: A builds, B pulls
        since = time.time() - 1
        started = time.monotonic()
        refs[name], _ = preparer.environment(spec)
        seconds[name] = time.monotonic() - started
        events = engine_events(client, since)
        actions = {(e.get("Type"), e.get("Action", "").split(":")[0]) for e in events}
        if name == "a":
            assert refs["a"].built and refs["a"].pulled is None
            assert ("container", "commit") in actions or ("image", "tag") in actions, actions
        else:
            assert refs["b"].pulled and refs["b"].pulled.startswith(f"{local_registry}/harness-env@sha256:")
            assert not refs["b"].built
            assert ("image", "pull") in actions, actions
            assert ("container", "create") not in actions and ("container", "commit") not in actions, actions
        client.close()
    assert refs["a"].tag == refs["b"].tag and refs["a"].image_id == refs["b"].image_id
    print(f"\nenvironment image: built on A in {seconds['a']:.1f} s, pulled on B in {seconds['b']:.1f} s")


def test_a_tampered_image_in_the_registry_is_refused(engines, seeded_registry, local_registry, cache_dir):
    """An image pushed under a content tag whose labels do not match is not used."""
    from harness.engine.registry import Registry
    client = engines["a"].client()
    base = next(i for i in client.images.list() if any(t.startswith("harness-base:") for t in i.tags))
    tag = next(t for t in base.tags if t.startswith("harness-base:"))
    forged = tag.rsplit("-", 1)[0] + "-0123456789abcdef"  # another inputs hash, same content
    client.api.tag(base.id, *forged.split(":"))
    try:
        assert Registry(client, local_registry).publish(forged)
        client.images.remove(forged)
        assert Registry(client, local_registry).fetch(forged, "0123456789abcdef") is None
        assert not [t for i in client.images.list() for t in i.tags if t == forged]
    finally:
        client.close()


# ---------------------------------------------------------------------------- the cluster

def test_demo_over_two_nodes_gives_the_local_verdicts(cluster, seeded_registry, engines, harness_run, tmp_path):
    instances, predictions = _copies(tmp_path, 1)
    local = harness_run("--instances", instances, "--predictions", predictions, "--max-workers", "2",
                        run_id="cluster-local")
    assert local.exit_code == 0
    proc = _run_on_cluster(cluster, seeded_registry, instances, predictions, tmp_path / "runs", "cluster-2nodes")
    assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n{cluster.log_tail()}"
    run_dir = tmp_path / "runs" / "cluster-2nodes"
    assert _verdicts(run_dir) == _verdicts(local.root)
    assert {iid: v[:2] for iid, v in _verdicts(run_dir).items()} == {iid: _expected_verdict(iid)
                                                                      for iid in _verdicts(run_dir)}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["executor"]["name"] == "ray"
    assert set(summary["executor"]["nodes"]) == {"node-a", "node-b"}, summary["executor"]
    reports = [json.loads(p.read_text()) for p in run_dir.glob("*/report.json")]
    assert {r["node"] for r in reports} == {"node-a", "node-b"}
    # Both nodes used one environment image, got through the registry (a build on each node
    # would give each its own image id), and built their instance layers on it.
    assert len({r["image"]["env_id"] for r in reports}) == 1
    for name in ("a", "b"):
        client = engines[name].client()
        assert _harness_containers(client) == []
        client.close()


def test_ctrl_c_on_the_driver_stops_the_run_on_every_node(cluster, seeded_registry, engines, tmp_path):
    instances, predictions = _copies(tmp_path, 2)
    out = tmp_path / "runs"
    proc = _run_on_cluster(cluster, seeded_registry, instances, predictions, out, "cluster-ctrlc", wait=False)
    try:
        _wait_reports(out / "cluster-ctrlc", 2)
        os.kill(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "interrupted" in stderr
    for name in ("a", "b"):
        client = engines[name].client()
        assert _harness_containers(client) == [], name
        client.close()
    assert not (out / "cluster-ctrlc" / "summary.json").exists()
    again = _run_on_cluster(cluster, seeded_registry, instances, predictions, out, "cluster-ctrlc")
    assert again.returncode == 0, again.stderr[-3000:]
    verdicts = _verdicts(out / "cluster-ctrlc")
    assert len(verdicts) == 8
    assert {iid: v[:2] for iid, v in verdicts.items()} == {iid: _expected_verdict(iid) for iid in verdicts}


def test_a_node_lost_mid_run_is_replaced_and_leaves_nothing(cluster, seeded_registry, engines, tmp_path):
    """Kill node B's raylet while tasks run there: they are re-queued on node A, the run
    completes with the expected verdicts, and neither engine keeps a container."""
    instances, predictions = _copies(tmp_path, 2)
    out = tmp_path / "runs"
    proc = _run_on_cluster(cluster, seeded_registry, instances, predictions, out, "cluster-lost", wait=False)
    try:
        run_dir = out / "cluster-lost"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until node B has finished one and started others
            if any(json.loads(p.read_text()).get("node") == "node-b" for p in run_dir.glob("*/report.json")):
                break
            time.sleep(0.1)
        client_b = engines["b"].client()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _harness_containers(client_b):
            time.sleep(0.05)  # a task of this run is in a container on B right now
        in_flight_on_b = len(_harness_containers(client_b))
        os.kill(cluster.raylet_pid("node-b"), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"{stderr[-3000:]}\n{cluster.log_tail()}"
    verdicts = _verdicts(run_dir)
    assert len(verdicts) == 8
    assert {iid: v[:2] for iid, v in verdicts.items()} == {iid: _expected_verdict(iid) for iid in verdicts}
    reports = [json.loads(p.read_text()) for p in run_dir.glob("*/report.json")]
    lost = [r for r in reports if any(a.get("error") == "NodeLost" for a in r["attempts"])]
    assert in_flight_on_b == 0 or lost, "a task running on node B was not re-queued"
    assert all(r["node"] == "node-a" for r in lost)
    cluster.nodes["node-b"].wait(timeout=120)  # its agent saw the raylet die, cleaned and left
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _harness_containers(client_b):
        time.sleep(0.5)
    assert _harness_containers(client_b) == []
    client_a = engines["a"].client()
    assert _harness_containers(client_a) == []
    client_a.close()
    client_b.close()


# ---------------------------------------------------------------------------- an engine lost

def test_an_engine_killed_mid_run_ends_it_with_a_summary_and_it_resumes(seeded_registry, cache_dir, tmp_path):
    """Local executor, a private engine SIGKILLed mid-run: no traceback, a one-line
    message, exit 3, summary.json with engine_lost results; restarted, the same command
    finishes the run (and removes the containers the dead engine left)."""
    engine = PrivateEngine("lost")
    try:
        engine.start()
        instances, predictions = _copies(tmp_path, 3)
        out = tmp_path / "runs"
        env = dict(os.environ, DOCKER_HOST=engine.url)
        args = ["run", "--instances", instances, "--predictions", predictions, "--output-dir", str(out),
                "--run-id", "engine-lost", "--cache-dir", str(cache_dir), "--max-workers", "2", "--quiet"]
        # The engine gets the demo's base and environment from the registry first; the run
        # itself uses no registry (a push cut by the kill is not what this test is about).
        seed = harness_cli("run", "--instances", instances, "--predictions", predictions, "--instance-ids",
                           json.loads(Path(instances).read_text().splitlines()[0])["instance_id"],
                           "--output-dir", str(tmp_path / "seed"), "--run-id", "seed", "--cache-dir", str(cache_dir),
                           "--registry", seeded_registry, "--quiet", env=env)
        assert seed.returncode == 0, seed.stderr[-2000:]
        import subprocess
        import sys
        proc = subprocess.Popen([sys.executable, "-m", "harness", *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            _wait_reports(out / "engine-lost", 3)
            engine.kill()
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 3, stderr[-2000:]
        assert "Traceback" not in stderr
        message = [line for line in stderr.splitlines() if line.startswith("harness: ")]
        assert len(message) == 1 and "engine" in message[0], stderr[-2000:]
        summary = json.loads((out / "engine-lost" / "summary.json").read_text())
        lost = [iid for iid, reason in summary["error_reasons"].items() if reason == "engine_lost"]
        assert lost and set(lost) <= set(summary["error_ids"])
        assert summary["total_instances"] == 12

        engine.stop()
        engine.start()
        again = harness_cli(*args, env=env)
        assert again.returncode == 0, again.stderr[-3000:]
        verdicts = _verdicts(out / "engine-lost")
        assert {iid: v[:2] for iid, v in verdicts.items()} == {iid: _expected_verdict(iid) for iid in verdicts}
        client = engine.client()
        assert _harness_containers(client) == []
        client.close()
    finally:
        engine.stop()
        engine.remove_data()


def test_executor_ray_alone_starts_a_one_node_cluster_on_this_machine(engine, cache_dir, tmp_path):
    """`--executor ray` without an address: a Ray cluster of this machine for the run,
    evaluating on the local engine, with the verdicts of the local executor."""
    instances, predictions = _copies(tmp_path, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = harness_cli("run", "--executor", "ray", "--instances", instances, "--predictions", predictions,
                       "--output-dir", str(tmp_path / "runs"), "--run-id", "ray-one-node", "--cache-dir",
                       str(cache_dir), "--max-workers", "2", "--quiet", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = _verdicts(tmp_path / "runs" / "ray-one-node")
    assert {iid: v[:2] for iid, v in verdicts.items()} == {iid: _expected_verdict(iid) for iid in verdicts}
    assert len(verdicts) == 4
    summary = json.loads((tmp_path / "runs" / "ray-one-node" / "summary.json").read_text())
    assert summary["executor"]["name"] == "ray"
    assert engine.containers.list(all=True, filters={"label": "org.harness.run-id=ray-one-node"}) == []
