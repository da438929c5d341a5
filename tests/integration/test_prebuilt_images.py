"""SWE-bench's prebuilt images as an environment source (``--namespace``), end to end on
the real engine and a real registry (Debian's docker-registry on 127.0.0.1).

The test builds an image in SWE-bench's layout for a demo instance — the repository at
/testbed with its whole history, the environment in a conda-style directory
/opt/miniconda3/envs/testbed activated from /root/.bashrc as SWE-bench's images are, a
``nonroot`` user at uid 1000 and none of the harness's own files — pushes it under
SWE-bench's name into the registry, removes the pushed name locally, and grades the
reference and the empty patch with ``--namespace 127.0.0.1:PORT/swebench``."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile

import pytest

from harness.engine.images import stream_build
from harness.engine.layers import PRISTINE_TREE
from harness.engine.prebuilt import PrebuiltSource
from harness.engine.sandbox import DockerBackend
from harness.inputs import demo

INSTANCE = "harness-demo__calcly-1"

pytestmark = pytest.mark.engine


def _record() -> dict:
    for line in (demo.DEMO_DIR / "instances.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["instance_id"] == INSTANCE:
            return record
    raise AssertionError(INSTANCE)


def _swebench_style_image(engine, cache_dir, tmp_path, name: str) -> int:
    """Build ``name`` in SWE-bench's layout; returns the commits its /testbed holds."""
    from harness.inputs.repos import RepoResolver
    from harness.preparation.preparer import Preparer
    from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
    record = _record()
    repos = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR), RepoResolver(cache_dir, None, repos), cache_dir)
    env_image, _ = preparer.environment(preparer.specs.get(record["repo"], record["version"]))
    testbed = tmp_path / "testbed"
    subprocess.run(["git", "clone", "--quiet", str(repos[record["repo"]]), str(testbed)], check=True)
    subprocess.run(["git", "-C", str(testbed), "checkout", "--quiet", record["base_commit"]], check=True)
    subprocess.run(["git", "-C", str(testbed), "remote", "remove", "origin"], check=True)
    commits = int(subprocess.run(["git", "-C", str(testbed), "rev-list", "--count", "HEAD"], check=True,
                                 capture_output=True, text=True).stdout)
    dockerfile = f"""FROM {env_image.tag}
RUN set -e; mkdir -p /opt/miniconda3/envs /opt/miniconda3/etc/profile.d; \\
    mv /opt/harness/venv /opt/miniconda3/envs/testbed; rm -rf /opt/harness; \\
    userdel harness-svc; userdel -r harness; useradd --create-home --uid 1000 nonroot; \\
    printf 'conda() {{ export PATH="/opt/miniconda3/envs/$2/bin:$PATH"; }}\\n' > /opt/miniconda3/etc/profile.d/conda.sh; \\
    echo "source /opt/miniconda3/etc/profile.d/conda.sh && conda activate testbed" > /root/.bashrc
COPY testbed/ /testbed/
WORKDIR /testbed
"""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(str(testbed), arcname="testbed")
    context.seek(0)
    stream_build(engine, context, name, {})
    return commits


def test_a_prebuilt_image_from_a_registry_is_graded_as_built_ones_are(tmp_path, engine, cache_dir, harness_run,
                                                                     local_registry):
    local_name = f"sweb.eval.x86_64.{INSTANCE}:latest"
    source = PrebuiltSource(f"{local_registry}/swebench")
    remote = source.image_name(INSTANCE)
    assert remote == f"{local_registry}/swebench/sweb.eval.x86_64.harness-demo_1776_calcly-1:latest"
    commits = _swebench_style_image(engine, cache_dir, tmp_path, local_name)
    assert commits > 1  # the image holds the history SWE-bench's images hold
    # as SWE-bench runs it: the environment activated from .bashrc, the tests from /testbed
    out = engine.containers.run(local_name, ["bash", "-c", "source ~/.bashrc && python -m pytest --version"],
                                network_mode="none", remove=True, stderr=True)
    assert b"pytest" in out
    repository, tag = remote.rsplit(":", 1)
    engine.api.tag(local_name, repository, tag)
    pushed = [c for c in engine.api.push(repository, tag=tag, stream=True, decode=True)]
    assert not [c for c in pushed if "error" in c], pushed
    digest = next(c["aux"]["Digest"] for c in pushed if "aux" in c)
    engine.api.remove_image(remote)  # what the run uses comes from the registry

    common = ("--instance-ids", INSTANCE, "--namespace", f"{local_registry}/swebench")
    gold = harness_run(*common, "--predictions", "gold", run_id="prebuilt-gold")
    empty = harness_run(*common, "--predictions", "empty", run_id="prebuilt-empty")
    assert gold.exit_code == 0 and empty.exit_code == 0
    assert gold.statuses() == {INSTANCE: ("FULL", None)}
    assert empty.statuses() == {INSTANCE: ("NO", None)}
    for run in (gold, empty):
        report = run.report(INSTANCE)
        provenance = report["image"]["provenance"]
        assert provenance["source"] == "prebuilt" and provenance["digest"] == digest
        assert provenance["reference"] == f"{repository}@{digest}"
        assert report["image"]["env_pulled"] == f"{repository}@{digest}"
        assert report["integrity"]["history_commits"] == 1
        assert "history_not_stripped" not in report["integrity"]["flags"]
        assert report["image"]["interpreter"]["executable"] == "/opt/miniconda3/envs/testbed/bin/python"
        assert report["image"]["tag"].startswith("harness-sweb:")
        # the thin layer's site hook reached the conda environment's test process
        assert report["integrity"]["evidence_expected"] is True, report["integrity"]
        assert "monitor_not_loaded" not in report["integrity"]["flags"]

    thin = gold.report(INSTANCE)["image"]["tag"]
    # the thin layer: one commit at the pristine tree, the image's history gone, the harness's
    # users, and the sandbox it runs in has no network but loopback
    listing = engine.containers.run(thin, ["bash", "-c", f"git -c safe.directory=* -C {PRISTINE_TREE} rev-list --count HEAD; "
                                                         "ls -A /testbed | wc -l; id -un 1001; "
                                                         "readlink /opt/harness/venv"],
                                    network_mode="none", remove=True, user="0:0").decode().split()
    assert listing == ["1", "0", "harness-svc", "/opt/miniconda3/envs/testbed"]
    sandbox = DockerBackend(engine, "prebuilt-net").start(thin, "prebuilt-net")
    try:
        interfaces = sandbox.exec(["ls", "/sys/class/net"]).output.split()
    finally:
        sandbox.close()
    assert interfaces == ["lo"]


def test_a_prebuilt_image_that_no_registry_has_is_an_environment_failure_naming_it(tmp_path, harness_run,
                                                                                 local_registry):
    run = harness_run("--instance-ids", INSTANCE, "--namespace", f"{local_registry}/nobody", "--predictions",
                      "gold", run_id="prebuilt-absent")
    report = run.report(INSTANCE)
    assert (report["status"], report["error_reason"]) == ("INVALID", "environment_build_failed")
    assert f"{local_registry}/nobody/sweb.eval.x86_64.harness-demo_1776_calcly-1:latest" in report["error_detail"]

