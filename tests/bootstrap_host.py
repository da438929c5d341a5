"""The harness's in-container bootstrap, run on the host for tests that need no container:
the launcher's collector (harness/incontainer/evidence_channel.py) listens on a socket in
a temporary directory and an activation file names it and this user; a ``sitecustomize``
shim on ``PYTHONPATH`` does what the environment images' site hook does (runs
``_harness_boot.py``, here from the source tree, with this activation file and this user
as the owner it trusts). What the processes sent comes back as the bytes of
``events.jsonl``, with the test's working copy spelled ``/testbed/`` as the host reads it.

Only processes that inherit ``PYTHONPATH`` are reached here (the sandbox's site hook needs
no variable: tests/integration/test_bootstrap_reach.py shows that)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from harness.incontainer import evidence_channel
from harness.runners import INCONTAINER_SOURCE


class Channel:
    def __init__(self, root: Path, testbed: Path) -> None:
        self.root, self.testbed = root, testbed
        self.events_path = root / "events.jsonl"
        self.stats: dict | None = None
        #: root's bytecode of the modules, when the test asked for it
        self.bytecode: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.root / "shim")}

    def events(self) -> bytes:
        """What was collected, with the working copy spelled as in the sandbox."""
        data = self.events_path.read_bytes() if self.events_path.exists() else b""
        return data.replace(str(self.testbed).rstrip("/").encode() + b"/", b"/testbed/")


@contextmanager
def bootstrapped(root: Path, testbed: Path, results: Path | None = None, monitor: bool = True,
                 pristine: Path | None = None, source: Path = INCONTAINER_SOURCE, bytecode: str | None = None):
    """Yield a :class:`Channel` while the bootstrap is active for this user's processes
    started with ``channel.env``; the collector has read everything once the block ends.
    ``pristine``: the pristine tree the bootstrap is told of (as the launcher tells it);
    ``source``: the directory of the bootstrap's modules (another checkout's, to compare);
    ``bytecode``: an interpreter that makes the modules' bytecode first, as the launcher does
    (``channel.bytecode`` is its directory)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "shim").mkdir(exist_ok=True)
    boot = Path(source) / "_harness_boot.py"
    activation = root / "activation.json"
    (root / "shim" / "sitecustomize.py").write_text(
        "import os\n"
        f"p = {str(boot)!r}\n"
        "with open(p, 'rb') as f:\n"
        "    c = compile(f.read(), p, 'exec', dont_inherit=True)\n"
        "exec(c, {'__name__': '_harness_boot', '__file__': p, '__builtins__': __builtins__,\n"
        f"         '_HARNESS_ACTIVATION': {str(activation)!r}, '_HARNESS_OWNER': os.getuid()}})\n")
    channel = Channel(root, testbed)
    cache = None
    if bytecode is not None:
        cache = root / "bytecode"
        cache.mkdir(mode=0o755)
        subprocess.run([bytecode, "-I", "-S", str(Path(source) / "bytecode_cache.py"), str(cache), str(source)],
                       check=True, timeout=120)
        channel.bytecode = cache
    short = tempfile.mkdtemp(prefix="hb-")   # a unix socket's path has at most 107 bytes
    socket_path = os.path.join(short, "evidence.sock")
    collector = evidence_channel.Collector(socket_path, str(channel.events_path), os.getuid(), os.getgid(), 16 << 20)
    collector.start()
    evidence_channel.activate(str(activation), {"uid": os.getuid(), "socket": socket_path, "testbed": str(testbed),
                                                "pristine": str(pristine) if pristine else None,
                                                "results": str(results) if results else None, "monitor": monitor,
                                                "bytecode": str(cache) if cache else None})
    try:
        yield channel
    finally:
        evidence_channel.deactivate(str(activation))
        channel.stats = collector.stop()
        shutil.rmtree(short, ignore_errors=True)
