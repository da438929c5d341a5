"""The launcher's end of a step session (trusted; root; imported by ``launcher.py``).

In ``--session`` mode the launcher runs the set-up step and then the host's plans in one
exec (the host's end, and why: ``harness/engine/exec_session.py``). A message is one JSON
header line with ``size``, the length of the body that follows, then the body:

* the launcher writes messages on its **stderr**, which nothing of the model holds (the
  set-up step's and the build's output go to files of their own, the tests' stderr joins
  their stdout); its stdout is the tests' output and nothing else;
* the host writes its messages (the plans) on the launcher's stdin, which nothing else reads.

Runs on any Python >= 3.6.
"""

import io
import json
import os
import stat
import tarfile

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


def tar_of_files(directory):
    """The regular files directly in ``directory`` (root's output directory) as a tar stream;
    a file that is not regular, or vanishes, is left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    continue
                member = tarfile.TarInfo(name)
                member.size, member.mtime, member.mode = info.st_size, int(info.st_mtime), 0o600
                tar.addfile(member, handle)
    return buffer.getvalue()
