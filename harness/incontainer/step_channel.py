"""The launcher's end of a step session (trusted; root; imported by ``launcher.py``).

In ``--session`` mode the launcher runs the set-up step and then the host's plans in one
exec (the host's end, and why: ``harness/engine/exec_session.py``). A message is one JSON
header line with ``size``, the length of the body that follows, then the body:

* the launcher writes messages on its stdout, only while nothing of the model writes there
  (the set-up step and the build step capture their commands' output in files of their
  own); from the test step on, its stdout is the tests' output;
* the host writes its messages (the plans) on the launcher's stdin, which nothing else reads.

Runs on any Python >= 3.6.
"""

import json

#: bytes of one header line (the host's limit too)
HEADER_LIMIT = 4096


def send(stream, header, body=b""):
    """One message: ``header`` (a dict of JSON values) and ``body`` (bytes)."""
    header = dict(header, size=len(body))
    stream.write(json.dumps(header).encode() + b"\n" + body)
    stream.flush()


def receive(stream, limit):
    """The next message from ``stream``: (header, body), or (None, b"") at its end. Raises
    ValueError on a header that is not one, or a body over ``limit`` bytes."""
    line = stream.readline(HEADER_LIMIT + 1)
    if not line:
        return None, b""
    if not line.endswith(b"\n"):
        raise ValueError("a message header without its end of line")
    header = json.loads(line.decode("utf-8"))
    size = header.get("size") if isinstance(header, dict) else None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size > limit:
        raise ValueError("a message of an unusable size: {!r}".format(size))
    body = b""
    while len(body) < size:
        chunk = stream.read(size - len(body))
        if not chunk:
            raise ValueError("the message ended after {} of {} bytes".format(len(body), size))
        body += chunk
    return header, body
