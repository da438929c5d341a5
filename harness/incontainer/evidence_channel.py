"""The launcher's half of the evidence channel (trusted; runs as root in the sandbox).

While the test command runs, the launcher

* writes the **activation file** (``harness.incontainer.ACTIVATION``, root, 0644): the test
  user's uid, the socket, the working copy, the results file and whether the monitor runs.
  The site hook of every Python process of the environment reads it; without it (the
  build, the re-install, the services, root's own steps) the bootstrap does nothing;
* listens on a **unix socket** (root, group of the test user, 0620: the service user
  cannot connect) and collects what every bootstrapped process sends. The kernel names the
  sender of each connection (``SO_PEERCRED``); the collector writes one header line per
  connection (``h<n>\\t{pid, uid, gid, ppid, argv}``, read from ``/proc`` when it accepts)
  and then every line the process sends as ``<n>\\t<line>``, into a root-only file. What
  one process sent can never be taken back or rewritten, by it or by any other; a process
  can only add lines under its own connection.

Caps: bytes in all (the rest is dropped and ``truncated`` recorded), line length, and
connections. Runs on any Python >= 3.6.
"""

import json
import os
import selectors
import socket
import struct
import threading

LINE_LIMIT = 16384
#: the selector key of the stop signal's pipe
_WAKE = "wake"
MAX_CONNECTIONS = 4096


def activate(path, record):
    """Write the activation file (atomically; root's, readable by all): a flat JSON object
    of strings and integers, which the bootstrap reads without a JSON parser (None values
    are left out, booleans written as 0/1)."""
    record = {k: int(v) if isinstance(v, bool) else v for k, v in record.items() if v is not None}
    if any(not isinstance(v, (str, int)) or (isinstance(v, str) and any(c in v for c in '",\\\n')) for v in
           record.values()):
        raise ValueError("activation values must be plain strings and integers: {!r}".format(record))
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, json.dumps(record, separators=(",", ":")).encode())
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def deactivate(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _proc(pid):
    """The sender's parent and command line as /proc shows them now (None when it is gone)."""
    out = {"ppid": None, "argv": None}
    try:
        with open("/proc/{}/stat".format(pid), "rb") as handle:
            out["ppid"] = int(handle.read().rsplit(b")", 1)[1].split()[1])
        with open("/proc/{}/cmdline".format(pid), "rb") as handle:
            out["argv"] = [a.decode("utf-8", "replace")[:200] for a in handle.read(4096).split(b"\0")[:6] if a]
    except (OSError, ValueError, IndexError):
        pass
    return out


class Collector:
    """Accepts the test user's connections on ``socket_path`` and appends what they send to
    ``out_path`` (see the module docstring). ``start()``, the tests, ``stop()``."""

    def __init__(self, socket_path, out_path, uid, gid, limit):
        self.socket_path, self.out_path = socket_path, out_path
        self.uid, self.gid, self.limit = uid, gid, limit
        self.stats = {"connections": 0, "refused": 0, "bytes": 0, "truncated": False, "long_lines": 0,
                      "partial_lines": 0}
        self._stop = threading.Event()
        self._conns = {}
        self._thread = None

    def start(self):
        if os.path.lexists(self.socket_path):
            os.unlink(self.socket_path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)        # nobody can connect before the mode below is set
        try:
            self._listener.bind(self.socket_path)
        finally:
            os.umask(old)
        os.chown(self.socket_path, 0, self.gid)
        os.chmod(self.socket_path, 0o620)
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._out = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        # stop() writes here: the loop wakes at once instead of at its next poll, which was
        # up to 0.2 s of every test step's fixed cost
        self._wake_read, self._wake_write = os.pipe()
        self._selector.register(self._wake_read, selectors.EVENT_READ, _WAKE)
        self._thread = threading.Thread(target=self._run, name="evidence-collector", daemon=True)
        self._thread.start()

    def stop(self, grace=10.0):
        """After the test user's processes are gone: read what they sent, then close."""
        self._stop.set()
        if self._thread is not None:
            os.write(self._wake_write, b"x")
            self._thread.join(grace)
        for conn in list(self._conns):
            self._drop(conn)
        for registered in (self._listener, self._wake_read):
            try:
                self._selector.unregister(registered)
            except (KeyError, ValueError):
                pass
        self._listener.close()
        os.close(self._out)
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)
        try:
            os.unlink(self.socket_path)
        except FileNotFoundError:
            pass
        return dict(self.stats)

    def _run(self):
        try:
            while True:
                for key, _ in self._selector.select(timeout=0.2):
                    if key.data is None:
                        self._accept()
                    elif key.data is _WAKE:
                        os.read(self._wake_read, 64)
                    else:
                        self._read(key.fileobj)
                # stopped: the senders are gone; what is still queued is read to its end
                if self._stop.is_set() and not self._conns and not self._accept():
                    return
        except Exception as exc:  # never leave the launcher without its record
            self.stats["error"] = repr(exc)[:300]

    def _accept(self):
        """One connection from the queue, if any (True when there was one)."""
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return False
        try:
            pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
        except OSError:
            conn.close()
            return True
        if uid != self.uid or self.stats["connections"] >= MAX_CONNECTIONS:
            self.stats["refused"] += 1
            # past the cap a test process's evidence is lost: the stream is incomplete
            self.stats["truncated"] = self.stats["truncated"] or uid == self.uid
            conn.close()
            return True
        self.stats["connections"] += 1
        number = self.stats["connections"]
        header = dict({"pid": pid, "uid": uid, "gid": gid}, **_proc(pid))
        self._write("h{}\t{}\n".format(number, json.dumps(header)).encode())
        conn.setblocking(False)
        self._conns[conn] = {"n": number, "buffer": b"", "skipping": False}
        self._selector.register(conn, selectors.EVENT_READ, number)
        return True

    def _read(self, conn):
        state = self._conns.get(conn)
        if state is None:
            return
        try:
            data = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if state["buffer"] and not state["skipping"]:
                self.stats["partial_lines"] += 1
            self._drop(conn)
            return
        buffer = state["buffer"] + data
        prefix = "{}\t".format(state["n"]).encode()
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            line, buffer = buffer[:end], buffer[end + 1:]
            if state["skipping"]:
                state["skipping"] = False
            elif len(line) > LINE_LIMIT:
                self.stats["long_lines"] += 1
            else:
                self._write(prefix + line + b"\n")
        if len(buffer) > LINE_LIMIT:
            self.stats["long_lines"] += 0 if state["skipping"] else 1
            buffer, state["skipping"] = b"", True
        state["buffer"] = buffer

    def _write(self, data):
        if self.stats["bytes"] + len(data) > self.limit:
            self.stats["truncated"] = True
            return
        self.stats["bytes"] += len(data)
        try:
            os.write(self._out, data)
        except OSError:   # /harness full (the test user can fill its own directory there)
            self.stats["truncated"] = True

    def _drop(self, conn):
        self._conns.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()
