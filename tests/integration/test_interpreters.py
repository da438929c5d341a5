"""An environment from each interpreter source, end to end on a small repository made here:

* a Debian suite (bookworm's python3),
* a CPython install prefix on the host (the pyenv build of 3.8 that bases.yaml names),
* a registry image, pulled from a real registry (Debian's ``docker-registry``, started here
  on 127.0.0.1 with its own storage: the shared ``local_registry`` fixture) seeded with an image of our own;

and the refusal when no registry answers. Each run's report records the exact version,
which the test output confirms."""

from __future__ import annotations

import json
from pathlib import Path

from harness.engine.client import run_once
from tests.fixtures.services import free_port
from tests.integration.test_new_repository import _make_repo

SPEC = """\
repo: example/tinyparse
defaults:
  python: "{python}"
  requirements: ["pytest==8.3.4"]
  install: "python -m pip install --no-build-isolation --no-deps -e ."
  install_requires_from_tree: true
  test_cmd: "pytest -rA -p no:cacheprovider"
  parser: pytest
  env: {{PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1"}}
{extra}versions:
  "0.1": {{}}
"""


def _run(tmp_path: Path, harness_run, python: str, run_id: str, extra: str = "") -> dict:
    repo, record = _make_repo(tmp_path / run_id)
    specs = tmp_path / run_id / "specs"
    specs.mkdir()
    (specs / "example__tinyparse.yaml").write_text(SPEC.format(python=python, extra=extra))
    instances = tmp_path / run_id / "instances.json"
    instances.write_text(json.dumps([record]))
    run = harness_run("--instances", str(instances), "--specs", str(specs), "--repo", f"example/tinyparse={repo}",
                      "--no-clone", "--predictions", "gold", run_id=run_id)
    report = run.report("example__tinyparse-1")
    output = (run.root / "example__tinyparse-1" / "test_output.txt").read_text() if report["status"] != "INVALID" \
        else report["error_detail"]
    return {**report, "output": output}


def _python_line(output: str) -> str:
    return next((line for line in output.splitlines() if "-- Python " in line), output[-500:])


def test_a_debian_suite_interpreter(tmp_path, harness_run):
    report = _run(tmp_path, harness_run, "3.11", "debian-311")
    assert report["status"] == "FULL", report["error_detail"]
    interpreter = report["image"]["interpreter"]
    assert interpreter["source"] == "Debian bookworm's python3" and interpreter["version"].startswith("3.11.")
    assert f"Python {interpreter['version']}" in _python_line(report["output"])


def test_a_host_prefix_interpreter(tmp_path, harness_run, engine):
    from harness.engine.interpreters import find_pyenv_prefix, inspect_host_prefix
    expected = inspect_host_prefix(find_pyenv_prefix("3.8")).version
    report = _run(tmp_path, harness_run, "3.8", "prefix-38")
    assert report["status"] == "FULL", report["error_detail"]
    interpreter = report["image"]["interpreter"]
    assert interpreter["version"] == expected and interpreter["source"].startswith("pyenv 3.8")
    assert f"Python {expected}" in _python_line(report["output"])
    # the layer records what it checked: no library the interpreter needs is missing but Tk's
    described = run_once(engine, report["image"]["tag"], ["cat", "/opt/harness/python.json"])
    assert set(json.loads(described)["unresolved_libs"]) <= {"libtcl8.6.so", "libtk8.6.so"}


def test_a_registry_image_interpreter_is_pulled_from_a_real_registry(tmp_path, harness_run, engine, local_registry,
                                                                     cache_dir):
    from harness.engine.images import ImageBuilder
    # Our own image, laid out like the official python images: an interpreter under a prefix.
    source = ImageBuilder(engine, cache_dir).interpreter("3.8")
    seed = f"{local_registry}/seed/python:3.8-{tmp_path.name[-8:].lower()}"
    context = tmp_path / "seed"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {source.image.tag}\nRUN echo {tmp_path.name} > /seeded\n")
    engine.images.build(path=str(context), tag=seed, network_mode="none", rm=True)
    for line in engine.images.push(seed, stream=True, decode=True):
        assert "error" not in line, line
    engine.images.remove(seed)
    prefix = str(Path(source.executable).parent.parent)
    extra = f'  interpreter: {{image: "{seed}", prefix: "{prefix}", suite: bookworm}}\n'
    report = _run(tmp_path, harness_run, "3.8", "registry-38", extra)
    assert report["status"] == "FULL", report["error_detail"]
    interpreter = report["image"]["interpreter"]
    assert interpreter["source"].startswith(f"registry image {seed}") and interpreter["version"] == source.version
    assert f"Python {source.version}" in _python_line(report["output"])
    pulled = engine.images.get(seed)
    assert any(d.startswith(f"{local_registry}/seed/python@sha256:") for d in pulled.attrs["RepoDigests"])
    layer = engine.images.get(report["image"]["env_tag"]).labels
    assert layer["org.harness.python-version"] == source.version


def test_an_unreachable_registry_is_a_build_failure_naming_the_image(tmp_path, harness_run):
    image = f"127.0.0.1:{free_port()}/nowhere/python:3.8-slim-bookworm"
    extra = f'  interpreter: {{image: "{image}", suite: bookworm}}\n'
    report = _run(tmp_path, harness_run, "3.8", "registry-down", extra)
    assert report["status"] == "INVALID" and report["error_reason"] == "environment_build_failed"
    assert image in report["error_detail"] and "pulling it failed" in report["error_detail"]
