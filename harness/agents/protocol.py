"""The host ↔ scaffold driver protocol: JSON lines over a socketpair.

A scaffold's driver runs on the host (or the executor's node) as a child process with the
scaffold's own interpreter (harness.agents.pins); it calls the model itself and asks the
host for everything else over one end of a ``socket.socketpair()`` (``AF_UNIX``,
``SOCK_STREAM``) whose file descriptor it is given as its only argument. Each message is
one JSON object on one line (UTF-8, at most :data:`MAX_MESSAGE` bytes). The driver asks,
the host answers, strictly in turn::

    driver → host                                        host → driver
    {"type": "hello", "scaffold", "version",             {"type": "start", "instance_id", "task",
     "packages": {name: version}}                          "config", "model": {"name"},
                                                           "replay": null | {"steps": [{"content",
                                                           "cost", "tokens_in", "tokens_out"}]}}
    {"type": "check", "step"}        before a model call  {"type": "reply", "stop": null | "wall_time"
                                                           | "run_cost"}
    {"type": "usage", "step", "cost", "tokens_in",        {"type": "reply"}
     "tokens_out", "seconds"}        after a model call
    {"type": "execute", "command", "cwd", "timeout",      {"type": "reply", "output", "returncode",
     "env"}                          one command          "timed_out", "truncated", "seconds"}, or
                                                          {"type": "reply", "error"}: no command can have
                                                          that (a NUL byte): the driver raises ValueError,
                                                          as the scaffold's own environment would
    {"type": "done", "exit_status", "submission",         {"type": "reply"}; the driver exits
     "trajectory", "cost", "calls", "error"}

``stop`` tells the driver to end the attempt with the harness's exit status for that limit
(harness.agents.budgets). A command's ``timeout`` is the scaffold's; the host cuts it to
the attempt's remaining wall time. A driver that sends anything else, a malformed request
(a cost that is not a finite number >= 0, ...) or a line that is not a JSON object, ends its
attempt as ``ScaffoldError``; so does one that exits without
``done``. The driver side of this module is re-implemented inside each driver script
(they import nothing of the harness).
"""

from __future__ import annotations

import json
import socket
from typing import Any

#: The largest message either side accepts (a whole trajectory travels in ``done``).
MAX_MESSAGE = 256 * 1024 * 1024
#: Driver → host message types.
HELLO, CHECK, USAGE, EXECUTE, DONE = "hello", "check", "usage", "execute", "done"
REQUESTS = frozenset({CHECK, USAGE, EXECUTE, DONE})
#: Host → driver.
START, REPLY = "start", "reply"


class ProtocolError(Exception):
    """The other side broke the protocol (a bad line, a closed socket, a silence past its
    deadline)."""


class Channel:
    """One end of the socketpair: send a message, receive one (with a deadline)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
        if len(data) > MAX_MESSAGE:
            raise ProtocolError(f"message of {len(data)} bytes over the limit of {MAX_MESSAGE}")
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ProtocolError(f"the other side is gone ({exc})") from None

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; ProtocolError when none comes within ``timeout`` seconds,
        the socket closes, or the line is not a JSON object."""
        self.sock.settimeout(timeout)
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE:
                raise ProtocolError(f"a message over the limit of {MAX_MESSAGE} bytes")
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                raise ProtocolError(f"no message within {timeout:.0f} s") from None
            except OSError as exc:
                raise ProtocolError(f"the other side is gone ({exc})") from None
            if not chunk:
                raise ProtocolError("the other side closed the connection")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            message = json.loads(line.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError(f"not a JSON line: {exc}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ProtocolError("a message must be a JSON object with a string 'type'")
        return message

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def expect(message: dict[str, Any], kind: str, *fields: str) -> dict[str, Any]:
    """``message`` if it is of type ``kind`` and has ``fields``; else ProtocolError."""
    if message.get("type") != kind:
        raise ProtocolError(f"expected a {kind!r} message, got {str(message.get('type'))[:40]!r}")
    missing = [f for f in fields if f not in message]
    if missing:
        raise ProtocolError(f"a {kind!r} message without {', '.join(missing)}")
    return message
