"""The environment layer committed from a build container (harness.engine.environment_layer).

One layer on the parent: the wheels root's at /opt/harness/wheels, the venv, a service's own
venv built after the layer's variables are set, the layer's variables and labels in the
image's configuration, and nothing of the build's mount left in the image. A failed install
raises with its whole log kept and leaves no image, no container and no staging directory."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.engine.client import run_once
from harness.engine.images import ImageBuilder
from harness.errors import ImageBuildError
from harness.inputs.specs import EnvSpec, ServiceSpec

PIP = "pip==24.0"


@pytest.fixture(scope="module")
def builder(engine, cache_dir) -> ImageBuilder:
    return ImageBuilder(engine, cache_dir)


@pytest.fixture(scope="module")
def interpreter(builder):
    return builder.interpreter("3.11")


@pytest.fixture(scope="module")
def pip_wheels(tmp_path_factory) -> tuple[Path, str]:
    """A wheelhouse holding pip's wheel, and its lock line."""
    where = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                    "--disable-pip-version-check", "-d", str(where), PIP], check=True)
    wheel = next(where.glob("pip-*.whl"))
    return where, f"{PIP} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"


def _spec() -> EnvSpec:
    return EnvSpec(repo="example/envlayer", version="1.0", python="3.11")


def _stages(cache_dir: Path) -> list[Path]:
    return sorted(Path(cache_dir).glob("env-wheels-*"))


def test_an_environment_with_a_service_is_one_committed_layer(builder, engine, interpreter, pip_wheels, cache_dir):
    wheels, lock = pip_wheels
    salt = uuid.uuid4().hex[:12]   # a lock of its own: the image is built here, not found
    lock = lock + f"# {salt}\n"
    service = ServiceSpec(name="stub", command="true", build=(
        # the service's build sees the layer's variables, as the Dockerfile's ENV gave it
        'test "$PIP_FIND_LINKS" = /opt/harness/wheels', "echo built > marker", "ls wheels > wheels.txt"))
    ref = builder.environment(_spec(), interpreter, lock, wheels, services=[(service, lock, wheels)])
    try:
        image = engine.images.get(ref.tag)
        parent = engine.images.get(interpreter.image.image_id)
        assert len(engine.api.history(image.id)) == len(engine.api.history(parent.id)) + 1
        config, parent_config = image.attrs["Config"], parent.attrs["Config"]
        env = dict(line.split("=", 1) for line in config["Env"])
        assert env["PATH"].startswith("/opt/harness/venv/bin:") and env["PIP_FIND_LINKS"] == "/opt/harness/wheels"
        assert env["PIP_NO_INDEX"] == "1" and env["PIP_DISABLE_PIP_VERSION_CHECK"] == "1"
        assert (config.get("User"), config.get("WorkingDir"), config.get("Cmd")) == \
            (parent_config.get("User"), parent_config.get("WorkingDir"), parent_config.get("Cmd"))
        assert config["Labels"]["org.harness.kind"] == "env" and config["Labels"]["org.harness.inputs-hash"] in ref.tag
        check = ("set -e; stat -c '%U %a' /opt/harness/wheels/pip-*.whl; /opt/harness/venv/bin/python -m pip --version; "
                 "cat /opt/harness/services/stub/marker /opt/harness/services/stub/wheels.txt; "
                 "test -x /opt/harness/services/stub/venv/bin/python; ls -A /mnt | wc -l; "
                 "grep -c . /opt/harness/installed.txt; "
                 "test ! -w /opt/harness/venv/bin || echo venv-writable")
        out = run_once(engine, ref.tag, ["bash", "-c", check], user="1000:1000").decode().split("\n")
        assert out[0] == "root 644", out
        assert out[1].startswith("pip 24.0 from /opt/harness/venv/"), out
        assert out[2:4] == ["built", next(wheels.glob("pip-*.whl")).name], out
        assert out[4] == "0", out   # the mount left nothing at /mnt
        assert "venv-writable" not in out
        assert _stages(cache_dir) == []
    finally:
        engine.images.remove(ref.tag, force=True)


def test_a_failed_install_keeps_its_log_and_leaves_nothing(builder, engine, interpreter, pip_wheels, cache_dir):
    wheels, lock = pip_wheels
    missing = "harness-no-such-package==1.0 --hash=sha256:" + "0" * 64
    before = {c.id for c in engine.containers.list(all=True)}
    with pytest.raises(ImageBuildError) as failure:
        builder.environment(_spec(), interpreter, lock + missing + f"\n# {uuid.uuid4().hex}\n", wheels)
    error = failure.value
    assert error.log_path and "harness-no-such-package" in Path(error.log_path).read_text()
    assert "harness-no-such-package" in error.log
    tag = error.log_path and Path(error.log_path).name.removesuffix(".log").replace("_", ":", 1)
    assert engine.images.list(name=tag) == []
    assert {c.id for c in engine.containers.list(all=True)} <= before
    assert _stages(cache_dir) == []
