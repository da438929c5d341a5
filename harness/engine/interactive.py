"""What a working sandbox needs from the engine beyond grading's: a command that may
overrun without taking the container with it, and the working copy streamed out.

Grading's :meth:`~harness.engine.sandbox.DockerSandbox.exec` ends an overrunning command by
killing the container (every grading step is the last one of its kind). An agent's
sandbox (harness/agents/workspace.py) lives for many commands, so a timeout must end *that
command* only. This module adds that beside ``exec``, which it leaves untouched:

* :func:`install` puts :data:`RUNNER` and :data:`STOPPER` (trusted, run by
  ``/usr/bin/python3 -I -S``, the interpreter grading's set-up step runs on) into
  ``/harness/workspace/``, root's and read-only.
* :func:`run_command`: one command, ``bash -c COMMAND`` in a session of its own, started by
  the runner as the harness user with an empty capability bounding set (``setpriv``, as
  grading's launcher starts the model's code), in ``cwd``, with exactly the environment
  given (the request travels in one variable of the runner's own environment, which bash
  never sees). The runner is a child subreaper: whatever the command leaves behind stays
  among its descendants, however it daemonises. Output is kept up to a limit, its head and
  its tail (the rest is drained and counted; the command goes on). When the host's deadline
  passes, a second exec runs the stopper, which freezes (SIGSTOP) every descendant of that
  command's runner and every process of its session until no new one appears, then kills
  them all: the processes of earlier commands and the container live on. A command whose
  request is over the kernel's limit for one argument or variable (128 KiB) fails as
  ``docker exec`` fails then ("argument list too long", exit 1), and the sandbox goes on.
* :func:`open_archive`: the tar stream of a path, chunk by chunk, for the caller to read with
  its own cap (nothing is buffered here; what the container holds is the agent's).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from docker.errors import APIError, NotFound

from harness.engine.sandbox import ROOT, DockerSandbox, FileEntry
from harness.errors import ContainerDied, InfrastructureError

#: The base images' interpreter (grading's set-up step runs on it too: harness/integrity/steps.py).
SYSTEM_PYTHON = "/usr/bin/python3"
SETPRIV = "/usr/bin/setpriv"
#: where :func:`install` puts the runner and the stopper: root's, read-only to everyone else
TOOLS_DIR = "/harness/workspace"
RUNNER_PATH = f"{TOOLS_DIR}/runner.py"
STOPPER_PATH = f"{TOOLS_DIR}/stopper.py"
#: the variable that carries a command to the runner (JSON: cwd, env, command); never passed on
REQUEST_VARIABLE = "HARNESS_COMMAND"
#: how long the stopper, and the stream's end after it, may take before the host gives up on them
STOP_SECONDS = 30.0

#: argv: TOKEN (the stopper finds the runner by it). Becomes a child subreaper (every orphan of
#: the command is re-parented to it, so the stopper finds it among its descendants and it is
#: reaped: the container's PID 1, ``sleep``, reaps nothing), forks ``bash -c COMMAND`` into a
#: session of its own with exactly the environment given, and exits as bash did (128+N when a
#: signal N ended it), after reaping what is left dead. Runs on any Python >= 3.6.
RUNNER = r"""
import ctypes, json, os, signal, sys, time
request = json.loads(os.environ.pop("HARNESS_COMMAND"))
try:
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
except Exception:
    pass
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.execve("/bin/bash", ["bash", "-c", request["command"]], request["env"])
    except OSError as exc:
        os.write(2, ("harness: cannot run the command in %s: %s\n" % (request["cwd"], exc.strerror)).encode())
    os._exit(127)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
stopped = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
deadline = time.monotonic() + (5 if stopped else 0)
while True:  # reap: all of them after a stop (they were killed too), the dead ones otherwise
    try:
        found, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if found == 0:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""

#: argv: TOKEN. Freezes every descendant of the runner whose argv holds TOKEN (and every process
#: of the command's session) until no new one appears, then kills them all; prints how many.
#: Runs as the harness user (it signals only that user's processes) on any Python >= 3.6.
STOPPER = r"""
import os, signal, sys
token = sys.argv[1].encode()
me = os.getpid()

def table():
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                argv = handle.read().split(b"\0")
        except (OSError, IndexError):
            continue
        found[int(name)] = (int(fields[1]), int(fields[3]), token in argv)
    return found

stopped = set()
for _ in range(200):
    procs = table()
    runners = {pid for pid, (_, _, mine) in procs.items() if mine and pid != me}
    sessions = {sid for pid, (ppid, sid, _) in procs.items() if ppid in runners}
    members = {pid for pid, (_, sid, _) in procs.items() if sid in sessions}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in procs.items():
            if pid not in members and (ppid in members or ppid in runners):
                members.add(pid)
                grew = True
    fresh = members - runners - stopped - {me, 1}
    if not fresh:
        break
    for pid in fresh:
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
    stopped |= fresh
for pid in stopped:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(len(stopped))
"""


@dataclass(frozen=True)
class CommandRun:
    """One command's outcome. ``exit_code`` None: it timed out (its processes were stopped)
    or its exit code could not be read; ``output`` is stdout and stderr interleaved, decoded
    as UTF-8 with replacement, cut to the limit (``truncated``); ``stopped`` counts the
    processes the stopper killed."""

    exit_code: int | None
    output: str
    seconds: float
    timed_out: bool
    truncated: bool
    stopped: int = 0


class OutputCapture:
    """Keeps the first ``limit - tail`` bytes and the last ``tail`` bytes of a stream,
    counting everything: a command's output is the agent's, of any size."""

    def __init__(self, limit: int, tail: int) -> None:
        if not 0 <= tail <= limit:
            raise ValueError(f"tail {tail} must be between 0 and the limit {limit}")
        self.limit, self.tail_limit = limit, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - self.tail_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[:len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """Everything when it fit; else the head, a line saying how much was left out, the tail."""
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        elided = self.total - len(self.head) - len(self.tail)
        return (bytes(self.head).decode("utf-8", errors="replace")
                + f"\n[harness: {elided} bytes of output left out]\n"
                + bytes(self.tail).decode("utf-8", errors="replace"))


def dropped_to(uid: int, gid: int) -> list[str]:
    """The argv prefix that runs what follows as ``uid:gid`` with no capability left
    (grading's launcher starts the model's code the same way)."""
    return [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all",
            "--inh-caps=-all", "--ambient-caps=-all", "--"]


def install(sandbox: DockerSandbox) -> None:
    """Put the runner and the stopper into the sandbox (root's files, mode 0444, in a
    root-owned directory: the commands they start cannot change them)."""
    sandbox.put_files(TOOLS_DIR.rsplit("/", 1)[0], {
        TOOLS_DIR.rsplit("/", 1)[1]: FileEntry(None, 0o755, 0),
        f"{TOOLS_DIR.rsplit('/', 1)[1]}/runner.py": FileEntry(RUNNER.encode(), 0o444, 0),
        f"{TOOLS_DIR.rsplit('/', 1)[1]}/stopper.py": FileEntry(STOPPER.encode(), 0o444, 0)})


def run_command(sandbox: DockerSandbox, command: str, *, cwd: str, env: dict[str, str], timeout: float,
                uid: int, gid: int, output_limit: int = 1 << 20, tail_limit: int = 128 * 1024) -> CommandRun:
    """Run ``bash -c command`` in ``sandbox`` as ``uid:gid`` (see the module's docstring;
    :func:`install` first). Raises ContainerDied when the container is gone,
    InfrastructureError on engine errors."""
    token = secrets.token_hex(16)
    argv = [*dropped_to(uid, gid), SYSTEM_PYTHON, "-I", "-S", RUNNER_PATH, token]
    request = json.dumps({"cwd": cwd, "env": env, "command": command})
    capture = OutputCapture(output_limit, min(tail_limit, output_limit))
    started = time.monotonic()
    running = _Exec.start(sandbox, argv, ROOT, capture, {REQUEST_VARIABLE: request})
    if running.ended.wait(timeout):
        return CommandRun(_exit_code(sandbox, running.exec_id), capture.text(), time.monotonic() - started,
                          False, capture.truncated)
    stopped = _stop(sandbox, token, uid, gid)
    if not running.ended.wait(STOP_SECONDS):
        running.abandon()
    return CommandRun(None, capture.text(), time.monotonic() - started, True, capture.truncated, stopped)


class _Exec:
    """A started exec whose output a thread pumps into a capture; ``ended`` is set when the
    stream ends (every holder of the command's output pipe is gone)."""

    def __init__(self, exec_id: str, stream: Iterator[bytes], capture: OutputCapture) -> None:
        self.exec_id = exec_id
        self.stream = stream
        self.ended = threading.Event()

        def pump() -> None:
            try:
                for chunk in stream:
                    capture.add(chunk)
            except Exception:  # the stream breaks when it is abandoned: expected
                pass
            finally:
                self.ended.set()
                self._close()

        threading.Thread(target=pump, daemon=True, name="exec-output").start()

    @classmethod
    def start(cls, sandbox: DockerSandbox, argv: list[str], user: str, capture: OutputCapture,
              environment: dict[str, str] | None = None) -> "_Exec":
        api = sandbox.client.api
        try:
            exec_id = api.exec_create(sandbox.id, argv, stdout=True, stderr=True, workdir="/", user=user,
                                      environment=environment)["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=False)
        except NotFound:
            raise ContainerDied(f"container {sandbox.id[:12]} is gone") from None
        except APIError as exc:
            if not sandbox.alive():
                raise ContainerDied(f"container {sandbox.id[:12]} died") from None
            raise InfrastructureError(f"exec failed: {exc.explanation or exc}") from None
        return cls(exec_id, stream, capture)

    def abandon(self) -> None:
        """Stop reading a stream that does not end (something still holds its pipe)."""
        self._close()
        self.ended.wait(2)

    def _close(self) -> None:
        """Close the exec's connection (docker's CancellableStream may be closed from any thread)."""
        close = getattr(self.stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # its socket may already be gone
                pass


def _stop(sandbox: DockerSandbox, token: str, uid: int, gid: int) -> int:
    """Kill the processes of the command started with ``token``; how many were killed."""
    capture = OutputCapture(4096, 0)
    stopper = _Exec.start(sandbox, [SYSTEM_PYTHON, "-I", "-S", STOPPER_PATH, token], f"{uid}:{gid}", capture)
    if not stopper.ended.wait(STOP_SECONDS):
        stopper.abandon()
    text = capture.text().strip()
    return int(text) if text.isdigit() else 0


def _exit_code(sandbox: DockerSandbox, exec_id: str) -> int | None:
    api = sandbox.client.api
    try:
        info = api.exec_inspect(exec_id)
        deadline = time.monotonic() + 5
        while info.get("Running") and time.monotonic() < deadline:
            time.sleep(0.05)
            info = api.exec_inspect(exec_id)
    except NotFound:
        raise ContainerDied(f"container {sandbox.id[:12]} is gone") from None
    except APIError as exc:
        raise InfrastructureError(f"reading an exec's exit code failed: {exc.explanation or exc}") from None
    code = info.get("ExitCode")
    return None if info.get("Running") or not isinstance(code, int) else code


def open_archive(sandbox: DockerSandbox, path: str, chunk_size: int = 1 << 20) -> Iterator[bytes] | None:
    """The tar stream of ``path`` from the archive API, chunk by chunk (no process runs in
    the container); None when the path does not exist. Read it with a cap: its size is the
    container's to decide. Close the iterator to drop the rest."""
    try:
        bits, _ = sandbox.container.get_archive(path, chunk_size=chunk_size)
    except NotFound:
        if not sandbox.alive():
            raise ContainerDied(f"container {sandbox.id[:12]} is gone") from None
        return None
    except APIError as exc:
        raise InfrastructureError(f"reading {path} failed: {exc.explanation or exc}") from None
    return bits
