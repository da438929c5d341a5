"""Connecting to the Docker engine, and starting one when none answers.

On a fresh Debian machine no engine runs. :func:`ensure_engine` with ``start=True``
(used by ``harness doctor --start-engine`` and the set-up script) clears a stale pid
file and starts ``dockerd`` in the background, then waits until it answers. Failure is
an :class:`~harness.errors.EngineUnavailable` with a sentence saying what to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
import requests
from docker.errors import DockerException

from harness.errors import EngineUnavailable

#: What the Docker SDK raises when the engine does not answer at all (socket gone, daemon
#: killed, connection reset). An APIError is different: the engine answered.
CONNECTION_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)

DOCKERD_LOG = Path("/var/log/harness-dockerd.log")
STALE_PID_FILES = (Path("/var/run/docker.pid"), Path("/run/docker.pid"),
                   Path("/var/run/docker/containerd/containerd.pid"))


def connect(timeout: float = 120) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (default: the local socket).

    Raises EngineUnavailable when nothing answers a ping.
    """
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except DockerException as exc:
        raise EngineUnavailable(
            f"no Docker engine answers ({exc.__class__.__name__}). Start one with "
            "`harness doctor --start-engine` (as root) or `bash scripts/setup.sh`.") from None


def engine_alive(client: docker.DockerClient) -> bool:
    """Whether the engine behind ``client`` answers a ping (a dead socket fails at once)."""
    try:
        return bool(client.api.ping())
    except (DockerException, *CONNECTION_ERRORS):
        return False


def engine_answers() -> bool:
    try:
        connect(timeout=5).close()
        return True
    except EngineUnavailable:
        return False


def _dockerd_running() -> bool:
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            if (pid_dir / "comm").read_text().strip() == "dockerd":
                return True
        except OSError:
            continue
    return False


def start_engine(wait_seconds: float = 90) -> None:
    """Start ``dockerd`` in the background (root only) and wait until it answers.

    Raises EngineUnavailable naming what is missing (not root, no dockerd binary, the
    daemon did not come up: its log's tail is included).
    """
    if engine_answers():
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable("dockerd is not installed: `apt-get install docker.io` "
                                "(or run `bash scripts/setup.sh`)")
    if os.geteuid() != 0:
        raise EngineUnavailable("no Docker engine answers and starting dockerd needs root")
    if not _dockerd_running():
        for pid_file in STALE_PID_FILES:
            pid_file.unlink(missing_ok=True)
        DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(DOCKERD_LOG, "ab") as log:
            subprocess.Popen([dockerd], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if engine_answers():
            return
        time.sleep(0.5)
    tail = DOCKERD_LOG.read_text(errors="replace")[-2000:] if DOCKERD_LOG.exists() else ""
    raise EngineUnavailable(f"dockerd did not answer within {wait_seconds:.0f} s; log tail:\n{tail}")


def run_once(client: docker.DockerClient, image: str, command: list[str], **options) -> bytes:
    """Run ``command`` in a new container of ``image`` without network and return its stdout.

    Why not ``client.containers.run(..., remove=True)``: it follows the log stream after
    the start, and a container that exits at once can be gone from that stream before it
    is attached: the call then returns ``b""`` for a command that printed (seen in CI).
    Here the container is waited for first and its finished log read afterwards; the
    engine has copied all output by the time the wait returns. A non-zero exit is a
    ``docker.errors.ContainerError`` carrying stderr, as with ``containers.run``.
    """
    options.setdefault("network_mode", "none")
    container = client.containers.create(image, command, **options)
    try:
        container.start()
        status = container.wait()["StatusCode"]
        if status != 0:
            stderr = container.logs(stdout=False, stderr=True)
            raise docker.errors.ContainerError(container, status, command, image, stderr)
        return container.logs(stdout=True, stderr=False)
    finally:
        container.remove(force=True)
