"""One container's lifecycle, and executing commands in it.

The lifecycle (:class:`DockerBackend.start` → :class:`DockerSandbox` → ``close``) is
kept apart from what runs inside (:meth:`Sandbox.exec`), like inspect_ai's sandbox and
SWE-ReX's deployment/runtime split: the evaluation code only sees the
:class:`Sandbox` protocol, so another backend can slot in.

Every container: ``network_mode=none``; every capability dropped except the few the
harness's root set-up needs (:data:`SETUP_CAPS`: chown, bypassing file permissions to
restore and seal files, set*id to start commands as other users, kill; plus NET_ADMIN
for a spec service that asks for it); ``no-new-privileges``; pids and memory limits, and a CPU quota only where the run or the
spec caps the cores (by default a sandbox sees the engine host's cores, as SWE-bench's
containers do: harness/engine/cpus.py); a capped log; a read-only root filesystem. Commands run as the unprivileged
harness user (uid 1000, no effective capability) unless the harness asks for root, and
the harness's root steps start everything of the model through ``setpriv`` with an
empty bounding set. Writable places are size-limited tmpfs volumes, both root-owned:
``/testbed`` (the working copy, mode 1777: the test user may create files but cannot
replace the root-owned ones) and ``/harness`` (the harness's inputs, trusted files and
results, 0755), plus a tmpfs ``/tmp``. Containers and volumes carry labels so that ones
left by a dead run, a killed task or a lost cluster node can be found and removed:

==========================  =========================================================
``org.harness.run-id``      the run id (informational)
``org.harness.run-dir``     a hash of the run directory (host + absolute path): what
                            leftover cleanup removes, so two runs with the same id in
                            different directories never remove each other's containers
``org.harness.task``        one evaluation's token (deadline kill, Ctrl-C on a cluster)
``org.harness.node``        the node that started it (a lost node's agent cleans it)
==========================  =========================================================
"""

from __future__ import annotations

import io
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import docker
from docker.errors import APIError, NotFound
from docker.types import Mount

from harness.engine import archive
from harness.engine.archive import FileEntry
from harness.engine.cpus import CpuLimit, cpu_limit
from harness.engine.early import EarlyCommand, first_process
from harness.engine.exec_session import ExecResult, ExecSession
from harness.engine.reaper import Reaper
from harness.errors import ContainerDied, InfrastructureError

LABEL_RUN = "org.harness.run-id"
LABEL_SCOPE = LABEL_RUN_DIR = "org.harness.run-dir"
LABEL_TASK = "org.harness.task"
LABEL_NODE = "org.harness.node"
#: What the container's root holds (root set-up steps only; see harness/incontainer/launcher.py):
#: restore/seal files owned by others (CHOWN, DAC_OVERRIDE, FOWNER), start commands as the test and
#: service users with nothing left (SETUID, SETGID, SETPCAP), stop the test user's processes (KILL).
SETUP_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SETPCAP", "KILL")
#: seconds :meth:`DockerSandbox.kill` waits for the engine to report the container stopped
KILL_CONFIRM_SECONDS = 30
#: Added when a spec's service configures the (network-less) network namespace.
PRIVILEGED_SETUP_CAPS = ("NET_ADMIN",)
#: Users commands run as: the container's root (set-up only) and the service user (bases.yaml).
ROOT = "0:0"
SERVICE_USER = "1001:1001"
LABEL_OWNER = "org.harness.owner"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox. Sizes in bytes, cpus in cores, pids a count."""

    memory: int = 4 * 1024**3
    #: a cap on the cores of every sandbox (a CFS quota); None: no quota, the engine host's cores
    cpus: float | None = None
    pids: int = 512
    testbed_size: int = 2 * 1024**3
    io_size: int = 256 * 1024**2
    tmp_size: int = 512 * 1024**2
    log_size: str = "1m"


class Sandbox(Protocol):
    """What the evaluation needs from an environment, whatever the backend."""

    id: str

    def exec(self, argv: list[str], *, workdir: str = "/testbed", env: dict[str, str] | None = None,
             timeout: float = 600, output_limit: int = 1 << 20, user: str | None = None) -> ExecResult: ...

    def start_background(self, argv: list[str], *, user: str, workdir: str = "/tmp",
                         env: dict[str, str] | None = None) -> None: ...

    privileged_setup: bool
    #: the cores the sandbox may use (recorded in report.json)
    cpu: CpuLimit
    #: the marker of the work the container started with (:class:`EarlyCommand`), None without
    early_marker: str | None

    def put_files(self, directory: str, files: dict[str, "bytes | FileEntry"], mode: int = 0o644,
                  owner: int = 1000) -> None: ...

    def session(self, argv: list[str], *, cap: int, message_cap: int, workdir: str = "/testbed",
                env: dict[str, str] | None = None, user: str | None = None) -> ExecSession: ...

    def get_file(self, path: str, limit: int) -> bytes | None: ...

    def get_files(self, directory: str, limit: int) -> dict[str, bytes] | None: ...

    def alive(self) -> bool: ...

    def close(self) -> None: ...

    def release(self) -> None:
        """The evaluation is done with the sandbox: remove it, possibly after returning (the
        backend finishes the removal off the critical path, :mod:`harness.engine.reaper`)."""
        ...


class DockerBackend:
    """Starts sandboxes on one Docker engine."""

    def __init__(self, client: docker.DockerClient, run_id: str, user: str = "1000:1000",
                 limits: Limits | None = None, run_dir: str | None = None, *, node: str = "") -> None:
        self.client = client
        self.run_id = run_id
        #: a hash of the run directory: what leftover cleanup removes (None: the run id)
        self.run_dir = run_dir
        self.node = node
        self.user = user
        self.limits = limits or Limits()
        #: set when the run is stopping: start() refuses, so nothing outlives the cleanup
        self.stopped = False
        self._engine_cores: int | None = None
        #: removes released sandboxes in the background (drained when a run ends)
        self.reaper = Reaper()

    def engine_cores(self) -> int | None:
        """The engine host's cores (what a sandbox without a quota sees); None if the engine does not say."""
        if self._engine_cores is None:
            try:
                cores = self.client.info().get("NCPU")
            except (docker.errors.DockerException, OSError, ValueError):
                return None
            self._engine_cores = cores if isinstance(cores, int) and cores > 0 else None
        return self._engine_cores

    def start(self, image: str, name_hint: str = "", *, hosts: dict[str, str] | None = None,
              net_admin: bool = False, task: str = "", cpus: float | None = None,
              early: EarlyCommand | None = None) -> "DockerSandbox":
        """Create and start a sandbox. Raises InfrastructureError on engine failures.

        ``cpus``: the spec's cap on the cores (harness/engine/cpus.py: with the run's
        ``Limits.cpus``, the smaller wins; neither: the engine host's cores).

        ``hosts`` are extra /etc/hosts entries (names of local stand-in services).
        ``net_admin``: the container's root may configure its (network-less) network
        namespace for a service's set-up; commands run as the harness user never hold a
        capability, and the test command is started with an empty bounding set.
        ``early``: work the container starts with (:class:`EarlyCommand`).
        """
        if self.stopped:
            from harness.errors import RunInterrupted
            raise RunInterrupted("the run is stopping")
        suffix = secrets.token_hex(4)
        base = f"harness-{_safe(name_hint)[:60]}-{suffix}"
        labels = {LABEL_RUN: self.run_id, LABEL_OWNER: "harness"}
        if self.run_dir:
            labels[LABEL_RUN_DIR] = self.run_dir
        if task:
            labels[LABEL_TASK] = task
        if self.node:
            labels[LABEL_NODE] = self.node
        limits = self.limits
        cpu = cpu_limit(limits.cpus, cpus, self.engine_cores())
        volumes = []
        mounts = []
        try:
            for target, size, mode in (("/testbed", limits.testbed_size, "1777"),
                                       ("/harness", limits.io_size, "0755")):
                vol_name = f"{base}-{target.strip('/')}"
                opts = {"type": "tmpfs", "device": "tmpfs",
                        "o": f"size={size},uid=0,gid=0,mode={mode},nosuid,nodev"}
                volumes.append(self.client.volumes.create(name=vol_name, driver="local", driver_opts=opts,
                                                          labels=labels))
                mounts.append(Mount(target=target, source=vol_name, type="volume"))
            container = self.client.containers.create(
                image, command=first_process(early), name=base, labels=labels,
                # root as the container's user: only then do root's execs hold SETUP_CAPS;
                # every other exec names its user (the harness user by default).
                user=ROOT, cap_add=[*SETUP_CAPS, *(PRIVILEGED_SETUP_CAPS if net_admin else ())],
                extra_hosts=hosts or None,
                sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
                network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                pids_limit=limits.pids, mem_limit=limits.memory, memswap_limit=limits.memory,
                nano_cpus=cpu.nano_cpus or None, cpu_shares=cpu.shares, read_only=True, mounts=mounts,
                # exec: Docker's tmpfs default is noexec, and builds run what they compile
                # there (a rebuild's compiler checks, e.g. scikit-learn's); no new privilege
                tmpfs={"/tmp": f"size={limits.tmp_size},mode=1777,nosuid,nodev,exec"},
                log_config={"type": "json-file", "config": {"max-size": limits.log_size, "max-file": "1"}},
                working_dir="/testbed", environment={"HOME": "/tmp"}, stdin_open=False, tty=False,
            )
            container.start()
        except APIError as exc:
            for vol in volumes:
                _quiet_remove_volume(self.client, vol.name)
            raise InfrastructureError(f"starting a container from {image} failed: "
                                      f"{exc.explanation or exc}") from None
        return DockerSandbox(self.client, container, [v.name for v in volumes], self.user, True, cpu, self.reaper,
                             early.marker if early else None)

    def _scope(self) -> dict[str, str]:
        return {LABEL_RUN_DIR: self.run_dir} if self.run_dir else {LABEL_RUN: self.run_id}

    def cleanup_run(self, run_id: str | None = None) -> int:
        """Remove every container and volume of this run directory on this engine (or,
        given ``run_id``, labelled with that run id). Returns the number of containers
        removed; raises EngineLost when the engine does not answer. The sandboxes released
        in the background are waited for first (their removals are this run's, not leftovers)."""
        self.reaper.drain()
        return remove_labelled(self.client, {LABEL_RUN: run_id} if run_id else self._scope())

    def kill_task(self, task: str) -> int:
        """Remove the containers of one evaluation (its deadline passed)."""
        return remove_labelled(self.client, {**self._scope(), LABEL_TASK: task})


def remove_labelled(client: docker.DockerClient, labels: dict[str, str]) -> int:
    """Remove every container and volume carrying all of ``labels``. Returns the number
    of containers removed. Raises EngineLost when the engine does not answer."""
    from harness.engine.client import CONNECTION_ERRORS
    from harness.errors import EngineLost
    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    removed = 0
    try:
        # ignore_removed: another worker's cleanup may remove a container between the
        # listing and its inspection; that is the outcome wanted, not an error.
        for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
            try:
                container.remove(force=True, v=True)
                removed += 1
            except (NotFound, APIError):
                pass  # already going; its volumes are handled below
        for volume in client.volumes.list(filters=filters):
            _quiet_remove_volume(client, volume.name)
    except CONNECTION_ERRORS as exc:
        raise EngineLost(f"the Docker engine does not answer ({type(exc).__name__})") from None
    return removed


class DockerSandbox:
    def __init__(self, client: docker.DockerClient, container, volume_names: list[str],
                 default_user: str = "1000:1000", privileged_setup: bool = False,
                 cpu: CpuLimit | None = None, reaper: Reaper | None = None, early_marker: str | None = None) -> None:
        self.client = client
        self.container = container
        self.id = container.id
        self.volume_names = volume_names
        self.default_user = default_user
        #: root in this container holds SETUP_CAPS (and NET_ADMIN when a service asked)
        self.privileged_setup = privileged_setup
        self.cpu = cpu or CpuLimit(None, None)
        self._reaper = reaper
        self.early_marker = early_marker

    def start_background(self, argv: list[str], *, user: str, workdir: str = "/tmp",
                         env: dict[str, str] | None = None) -> None:
        """Start a long-running command (a local service) and return at once."""
        try:
            exec_id = self.client.api.exec_create(self.id, argv, stdout=False, stderr=False, workdir=workdir,
                                                  environment=env, user=user)["Id"]
            self.client.api.exec_start(exec_id, detach=True)
        except NotFound:
            raise ContainerDied(f"container {self.id[:12]} is gone") from None
        except APIError as exc:
            raise InfrastructureError(f"starting a background command failed: {exc.explanation or exc}") from None

    def alive(self) -> bool:
        try:
            self.container.reload()
            return self.container.status == "running"
        except NotFound:
            return False

    def exec(self, argv: list[str], *, workdir: str = "/testbed", env: dict[str, str] | None = None,
             timeout: float = 600, output_limit: int = 1 << 20, user: str | None = None) -> ExecResult:
        """Run ``argv`` (no shell unless argv asks for one) with a host-side deadline.

        The caller should also wrap the command in ``timeout`` inside the container; the
        host deadline (``timeout`` seconds) is the backstop: when it passes, or the output
        exceeds ``output_limit`` bytes, the container is killed (``killed``/``timed_out``/
        ``truncated``). Raises ContainerDied when the container is gone.
        """
        api = self.client.api
        started = time.monotonic()
        exec_id, stream = self._start_exec(argv, workdir, env, user, stdin=False)

        chunks: list[bytes] = []
        state = {"size": 0, "truncated": False}
        done = threading.Event()

        def pump() -> None:
            try:
                for chunk in stream:
                    if state["size"] < output_limit:
                        chunks.append(chunk[: output_limit - state["size"]])
                    state["size"] += len(chunk)
                    if state["size"] > output_limit:
                        state["truncated"] = True
                        break
            except Exception:  # the stream breaks when the container is killed: expected
                pass
            finally:
                done.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        finished = done.wait(timeout)
        timed_out = not finished
        killed = False
        if timed_out or state["truncated"]:
            killed = True
            self.kill()
            done.wait(10)
        exit_code = None
        if not killed:
            try:
                info = api.exec_inspect(exec_id)
                deadline = time.monotonic() + 5
                while info.get("Running") and time.monotonic() < deadline:
                    time.sleep(0.05)
                    info = api.exec_inspect(exec_id)
                exit_code = info.get("ExitCode")
            except NotFound:
                raise ContainerDied(f"container {self.id[:12]} is gone") from None
        output = b"".join(chunks).decode("utf-8", errors="replace")
        return ExecResult(list(argv), exit_code, output, time.monotonic() - started, timed_out,
                          state["truncated"], killed)

    def session(self, argv: list[str], *, cap: int, message_cap: int, workdir: str = "/testbed",
                env: dict[str, str] | None = None, user: str | None = None) -> ExecSession:
        """Start ``argv`` with its stdin open to the host: messages both ways, and its output
        (:mod:`harness.engine.exec_session`; at most ``cap`` bytes of output and
        ``message_cap`` of messages held). Raises ContainerDied when the container is gone."""
        exec_id, sock = self._start_exec(argv, workdir, env, user, stdin=True)
        return ExecSession(self, argv, exec_id, sock, cap, message_cap)

    def _start_exec(self, argv: list[str], workdir: str, env: dict[str, str] | None, user: str | None,
                    *, stdin: bool):
        """Create and start an exec: (its id, its output stream), or with ``stdin`` (its id,
        the attached socket). Raises ContainerDied when the container is gone."""
        api = self.client.api
        try:
            exec_id = api.exec_create(self.id, argv, stdin=stdin, stdout=True, stderr=True, workdir=workdir,
                                      environment=env, user=user or self.default_user)["Id"]
            started = (api.exec_start(exec_id, socket=True) if stdin
                       else api.exec_start(exec_id, stream=True, demux=False))
        except NotFound:
            raise ContainerDied(f"container {self.id[:12]} is gone") from None
        except APIError as exc:
            if not self.alive():
                raise ContainerDied(f"container {self.id[:12]} died") from None
            raise InfrastructureError(f"exec failed: {exc.explanation or exc}") from None
        return exec_id, started

    def kill(self) -> None:
        """Kill the container and return only once the engine reports it stopped.

        The engine's kill can return while the container's state still reads "running"
        (moby waits only briefly for the exit): whatever follows a kill (reading what the
        tests left, deciding a verdict, removing the container) must not race the
        container's last processes. SIGKILL is sent again every second; a container still
        running after :data:`KILL_CONFIRM_SECONDS` is an InfrastructureError."""
        deadline = time.monotonic() + KILL_CONFIRM_SECONDS
        while True:
            try:
                self.container.kill()
            except NotFound:
                return
            except APIError:
                pass   # already stopped, or the engine refused: its state below decides
            resend = min(time.monotonic() + 1.0, deadline)
            while self.alive():
                if time.monotonic() >= resend:
                    break
                time.sleep(0.05)
            else:
                return
            if time.monotonic() >= deadline:
                raise InfrastructureError(f"container {self.id[:12]} still runs {KILL_CONFIRM_SECONDS} s "
                                          f"after it was killed")

    def put_files(self, directory: str, files: dict[str, "bytes | FileEntry"], mode: int = 0o644,
                  owner: int = 1000) -> None:
        """Write files (relative paths -> bytes or :class:`FileEntry`) under ``directory``
        through the engine's archive API (no process runs in the container). The engine
        applies the owners and modes given, so root-owned files need no capability.
        Parent directories not listed are created owned by ``owner``, mode 0755."""
        entries = {rel: (v if isinstance(v, FileEntry) else FileEntry(v, mode, owner)) for rel, v in files.items()}
        data = archive.tar_of(entries, owner)
        try:
            if not self.container.put_archive(directory, data):
                raise InfrastructureError(f"writing files into {directory} failed")
        except NotFound:
            raise ContainerDied(f"container {self.id[:12]} is gone") from None
        except APIError as exc:
            raise InfrastructureError(f"writing files into {directory} failed: {exc.explanation or exc}") from None

    def _archive(self, path: str, cap: int) -> io.BytesIO | None:
        """The tar stream of ``path`` from the archive API, read to at most about ``cap`` bytes
        (what the container holds is the model's: never read without bound); None when the
        path does not exist."""
        try:
            bits, _ = self.container.get_archive(path)
        except NotFound:
            return None
        except APIError as exc:
            raise InfrastructureError(f"reading {path} failed: {exc.explanation or exc}") from None
        raw = io.BytesIO()
        for chunk in bits:
            raw.write(chunk)
            if raw.tell() > cap:
                break
        raw.seek(0)
        return raw

    def get_files(self, directory: str, limit: int) -> dict[str, bytes] | None:
        """The regular files under ``directory`` (relative names -> bytes), read through the
        archive API; None when it does not exist. At most ``limit`` bytes in all: a member
        past the limit is cut."""
        raw = self._archive(directory, limit + 4 * 1024 * 1024)
        if raw is None:
            return None
        return archive.regular_files(raw, limit)

    def get_file(self, path: str, limit: int) -> bytes | None:
        """Read one regular file out through the archive API; None if absent or not a
        regular file. At most ``limit`` bytes are read (a bigger file is cut)."""
        raw = self._archive(path, limit + 1024 * 1024)
        if raw is None:
            return None
        return archive.first_regular_file(raw, limit)

    def release(self) -> None:
        """Remove the container and its volumes in the background (the backend's reaper;
        inline without one). Nothing of the model runs in it any more: the launcher killed
        every process of the test user before it returned. Never raises."""
        if self._reaper is None:
            return self.close()
        self._reaper.submit(self.close)

    def close(self) -> None:
        """Remove the container and its volumes. Never raises."""
        try:
            self.container.remove(force=True, v=True)
        except (NotFound, APIError):
            pass
        for name in self.volume_names:
            _quiet_remove_volume(self.client, name)


def _quiet_remove_volume(client: docker.DockerClient, name: str) -> None:
    for _ in range(5):
        try:
            client.api.remove_volume(name, force=True)  # by name: no look-up round trip first
            return
        except NotFound:
            return
        except APIError:
            time.sleep(0.2)


def _safe(text: str) -> str:
    import re
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)
