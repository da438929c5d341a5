"""One exec that the host talks to while it runs: framed messages both ways, then a plain
output stream.

The evaluation's steps used to be one exec each (the set-up step, then the launcher),
with an archive call between them for the plan. Each exec costs a process set-up in the
container and engine round trips, and each archive call about as much again. A session
keeps the trusted launcher running from the set-up step to the end of the tests:

* the exec's **stdin** carries the host's messages (the plans it decides from the tree truth);
* its **stderr** carries the launcher's messages (the set-up step's report, a finished build
  step with its output directory, the test step's output directory);
* its **stdout** is the tests' output and nothing else.

A message is one JSON header line (at most :data:`HEADER_LIMIT` bytes, with ``size``, the
length of the body that follows) and the body. Nothing the model runs holds the launcher's
stderr (the set-up step's and the build's output go to files of their own, the tests'
stderr joins their stdout; the trusted side is ``harness/incontainer/step_channel.py``), so
nothing it runs can forge a message; the tests' output is read as output, never as a message.

Limits and deadlines work as for :meth:`DockerSandbox.exec`: a message past its limit, an
output past its limit, or a deadline kills the container, and the result says so.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from docker.errors import APIError, NotFound
from docker.utils.socket import frames_iter

from harness.errors import ContainerDied, InfrastructureError

#: bytes of one message's header line
HEADER_LIMIT = 4096
#: the stream id of stderr in the engine's multiplexed exec stream
STDERR = 2


@dataclass
class ExecResult:
    """The outcome of one command. ``output`` is stdout and stderr interleaved, cut at the
    caller's byte limit (``truncated`` says so); ``duration`` in seconds."""

    argv: list[str]
    exit_code: int | None
    output: str
    duration: float
    timed_out: bool = False
    truncated: bool = False
    killed: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class Message:
    """One message from the exec, or why there is none: ``eof`` (the exec ended first),
    ``timed_out``, ``truncated`` (header or body over the limit); in the three cases the
    container has been killed (``eof`` excepted) and ``body`` is what came."""

    header: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""
    eof: bool = False
    timed_out: bool = False
    truncated: bool = False
    malformed: str = ""

    @property
    def ok(self) -> bool:
        return not (self.eof or self.timed_out or self.truncated or self.malformed)

    def as_result(self, argv: list[str]):
        """A step's message (its header: ``exit_code``, ``duration``, ``timed_out``,
        ``truncated``; its body: the step's output) as the result of the command it ran."""
        header = self.header
        exit_code, duration = header.get("exit_code"), header.get("duration")
        return ExecResult(list(argv), exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool)
                          else None, self.body.decode("utf-8", errors="replace"),
                          float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool)
                          and duration >= 0 else 0.0,
                          timed_out=self.timed_out or header.get("timed_out") is True,
                          truncated=self.truncated or header.get("truncated") is True,
                          killed=self.timed_out or self.truncated or bool(self.malformed))


class ExecSession:
    """The host's end of one session exec (see the module docstring). Not thread-safe: one
    evaluation talks to it. ``cap``: the most of the output it holds (past it, the output is
    cut and :meth:`finish` kills the container); ``message_cap``: the most of the messages
    it holds (past it, the messages that do not fit are lost: :meth:`receive` says so, and
    the output is still read). :meth:`close` always (it never raises)."""

    def __init__(self, sandbox, argv: list[str], exec_id: str, sock, cap: int, message_cap: int) -> None:
        self._sandbox = sandbox
        self.argv = list(argv)
        self._exec_id = exec_id
        self._sock = sock
        self._raw = getattr(sock, "_sock", sock)   # the socket under docker-py's SocketIO
        self._buffer = bytearray()      # stderr: the launcher's messages
        self._output = bytearray()      # stdout: the tests' output
        self._cap = cap
        self._message_cap = message_cap
        self._overflow = False
        self._messages_lost = False
        self._eof = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._pump, name="exec-session", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ reading
    def _pump(self) -> None:
        try:
            for stream, data in frames_iter(self._sock, tty=False):
                with self._changed:
                    if stream == STDERR:
                        if self._messages_lost or len(self._buffer) + len(data) > self._message_cap:
                            self._messages_lost = True    # the rest of the messages: dropped
                        else:
                            self._buffer += data
                    else:
                        room = self._cap - len(self._output)
                        self._output += data[:max(0, room)]
                        if len(data) > room:
                            self._overflow = True
                            return
                    self._changed.notify_all()
        except Exception:  # the stream breaks when the container is killed: expected
            pass
        finally:
            with self._changed:
                self._eof = True
                self._changed.notify_all()

    def _wait(self, ready, deadline: float) -> bool:
        """Wait (under the lock) until ``ready()``, the end of the stream or the deadline;
        returns ``ready()``."""
        with self._changed:
            while not ready() and not self._eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 1.0))
            return ready()

    def receive(self, limit: int, timeout: float, *, kill: bool = True) -> Message:
        """The next message from the exec, its body at most ``limit`` bytes. A message that
        does not come, or is not one, kills the container unless ``kill`` is False (the
        caller then reads what it needs another way)."""
        deadline = time.monotonic() + timeout
        if not self._wait(lambda: b"\n" in self._buffer[:HEADER_LIMIT + 1] or len(self._buffer) > HEADER_LIMIT,
                          deadline):
            if self._messages_lost:
                return self._failed(truncated=True, kill=kill)
            return self._failed(timed_out=not self._eof, kill=kill)
        with self._changed:
            line, newline, _ = bytes(self._buffer[:HEADER_LIMIT + 1]).partition(b"\n")
        try:
            if not newline:
                raise ValueError("no end of line")
            header = json.loads(line)
            size = header["size"] if isinstance(header, dict) else None
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError("no size")
        except (ValueError, KeyError):
            return self._failed(malformed=f"not a message header: {line[:300]!r}", kill=kill)
        need = len(line) + 1 + size
        if size > limit or need > self._message_cap:
            return self._failed(truncated=True, header=header, kill=kill)
        if not self._wait(lambda: len(self._buffer) >= need, deadline):
            if self._messages_lost:
                return self._failed(truncated=True, header=header, kill=kill)
            return self._failed(timed_out=not self._eof, header=header, kill=kill)
        with self._changed:
            body = bytes(self._buffer[len(line) + 1:need])
            del self._buffer[:need]
        return Message(header, body)

    def _failed(self, *, timed_out: bool = False, truncated: bool = False, malformed: str = "",
                header: dict | None = None, kill: bool = True) -> Message:
        with self._changed:
            body = bytes(self._buffer)
        killed = timed_out or truncated or bool(malformed)
        if killed and kill:
            self._sandbox.kill()
        return Message(header or {}, body, eof=not killed, timed_out=timed_out, truncated=truncated,
                       malformed=malformed)

    # ------------------------------------------------------------------ writing
    def send(self, body: bytes, **header: Any) -> None:
        """One message to the exec's stdin. Raises ContainerDied when the exec is gone."""
        line = json.dumps({**header, "size": len(body)}).encode() + b"\n"
        try:
            self._raw.sendall(line + body)
        except OSError as exc:
            raise ContainerDied(f"the step session ended before the host's message ({exc})") from None

    # ------------------------------------------------------------------ the end
    def finish(self, timeout: float, output_limit: int):
        """The exec's stdout from here to its end, as an :class:`ExecResult` (the output cut
        at ``output_limit``; a deadline or the limit kills the container). Its messages
        stay to be :meth:`receive`d."""
        started = time.monotonic()
        truncated = self._wait(lambda: len(self._output) > output_limit or self._overflow, started + timeout)
        with self._changed:
            output = bytes(self._output[:output_limit])
            timed_out = not (truncated or self._eof)
        killed = timed_out or truncated
        if killed:
            self._sandbox.kill()
            self._reader.join(10)
        exit_code = None if killed else self._exit_code()
        return ExecResult(list(self.argv), exit_code, output.decode("utf-8", errors="replace"),
                          time.monotonic() - started, timed_out, truncated, killed)

    def _exit_code(self) -> int | None:
        api = self._sandbox.client.api
        try:
            info = api.exec_inspect(self._exec_id)
            deadline = time.monotonic() + 5
            while info.get("Running") and time.monotonic() < deadline:
                time.sleep(0.02)
                info = api.exec_inspect(self._exec_id)
            return info.get("ExitCode")
        except NotFound:
            raise ContainerDied(f"container {self._sandbox.id[:12]} is gone") from None
        except APIError as exc:
            raise InfrastructureError(f"reading the step session's exit code failed: {exc}") from None

    def close(self) -> None:
        """Let go of the exec (the launcher, if still waiting for a message, ends with the
        sandbox). Never raises."""
        for action in (lambda: self._raw.shutdown(socket.SHUT_RDWR), self._raw.close, self._sock.close):
            try:
                action()
            except OSError:
                pass
