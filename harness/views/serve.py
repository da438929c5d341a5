"""``harness view RUN``: serve a run directory over HTTP on the loopback interface.

For a run on a remote machine: ``harness view runs/X --port 8765`` there, ``ssh -L
8765:127.0.0.1:8765 host`` here, then open the printed address.  Only files inside the run
directory are served (symbolic links leading out of it are refused); every response
carries the pages' Content-Security-Policy, and files a test run wrote (``results.xml``,
outputs) are served as plain text, so nothing in them can run as a script.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness.views.html import CSP

__all__ = ["LOOPBACK", "make_server"]

LOOPBACK = "127.0.0.1"
_TEXT_TYPES = {".xml": "text/plain; charset=utf-8", ".diff": "text/plain; charset=utf-8",
               ".txt": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8",
               ".md": "text/plain; charset=utf-8", ".json": "application/json",
               ".html": "text/html; charset=utf-8", "": "application/octet-stream"}


class _RunDirectoryHandler(SimpleHTTPRequestHandler):
    extensions_map = _TEXT_TYPES  # anything else: application/octet-stream (see guess_type)

    def __init__(self, *args, directory: str, quiet: bool, **kwargs) -> None:
        self._root = os.path.realpath(directory)
        self._quiet = quiet
        super().__init__(*args, directory=directory, **kwargs)

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        return _TEXT_TYPES.get(Path(path).suffix.lower(), "application/octet-stream")

    def send_head(self):
        real = os.path.realpath(self.translate_path(self.path))
        if real != self._root and not real.startswith(self._root + os.sep):
            self.send_error(404, "outside the run directory")
            return None
        return super().send_head()

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self._quiet:
            sys.stderr.write(f"harness view: {self.address_string()} {format % args}\n")


def make_server(run_dir: str | os.PathLike[str], port: int = 0, quiet: bool = True) -> ThreadingHTTPServer:
    """A server for ``run_dir`` bound to 127.0.0.1 (``port`` 0: any free port); call
    ``serve_forever()`` on it.  The bound port is ``server.server_address[1]``."""
    handler = partial(_RunDirectoryHandler, directory=str(Path(run_dir).resolve()), quiet=quiet)
    return ThreadingHTTPServer((LOOPBACK, port), handler)
