"""What the bootstrap and the monitor cost per process start, per import and per event,
side by side: no bootstrap (*bare*), another checkout's bootstrap (*before*: its
``harness/incontainer`` modules, run the same way; a checkout from before the site hook,
whose ``harness/incontainer`` has a ``sitecustomize.py``, runs as that one did: on
``PYTHONPATH`` with an evidence fd) and this checkout's (*now*: the site hook's bootstrap
with the evidence socket, run as tests/bootstrap_host.py runs it).

Each workload runs in a fresh interpreter of this host (the same Python for every side),
from a working copy in a temporary directory, so that its frames are the working copy's
as in the sandbox; sides are interleaved and repeated, medians reported:

* ``start``: ``python -c pass`` (boot, connect, snapshot of the loaded modules);
* ``imports``: importing a fixed list of standard-library modules (each ``exec`` of a
  module is verified as the import machinery's);
* ``event``: 20,000 flag-only events (``sys._getframe``) raised from a working-copy frame
  (one walk of the stack each; the first is recorded, the rest deduplicated);
* ``library``: 2,000 calls of ``multiprocessing.sharedctypes.Value`` from the working copy
  (an installed library's own ``ctypes`` use below its entry point: frames classified);
* ``forged``: 2,000 ``gc.get_referents`` calls from code compiled under a borrowed name;
* ``codegen``: what import-heavy code makes genuine libraries do on its behalf: 300
  ``dataclasses.make_dataclass`` and 300 ``typing.NamedTuple`` classes from the working copy
  (``compile``/``exec`` two frames or more below the entry point: a library's own work), then
  importing standard-library modules that build namedtuples and dataclasses while they are
  imported;
* ``pytest``: a pytest session (this environment's pytest and its plugins, imported from
  the virtualenv) running 50 trivial tests of the working copy: the import-heavy start of
  every graded run.

    .venv/bin/python benchmarks/monitor_cost.py [--before CHECKOUT] [--rounds 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.runners import INCONTAINER_SOURCE  # noqa: E402
from tests.bootstrap_host import bootstrapped  # noqa: E402

IMPORTS = ("decimal fractions statistics email.mime.multipart http.client xml.dom.minidom csv sqlite3 "
           "urllib.request logging.handlers argparse configparser difflib pprint tarfile zipfile calendar "
           "unittest.mock asyncio concurrent.futures ").split()
WORKLOADS = {
    "start": "pass",
    "imports": "import importlib\nfor m in %r:\n    importlib.import_module(m)\n" % (IMPORTS,),
    "event": "import sys\ndef f():\n    return sys._getframe(0)\nfor _ in range(20000):\n    f()\n",
    "library": "import ctypes, multiprocessing.sharedctypes as s\nfor _ in range(2000):\n    s.Value(ctypes.c_int, 0)\n",
    "forged": ("import csv, gc\ncode = compile('def g(o):\\n    return gc.get_referents(o)\\n', csv.__file__, 'exec')\n"
               "ns = {'gc': gc}\nexec(code, ns)\nfor _ in range(2000):\n    ns['g'](1)\n"),
    "codegen": ("import dataclasses, typing\nfor n in range(300):\n"
                "    dataclasses.make_dataclass('D%d' % n, ['x', ('y', int, 0)])\n"
                "    typing.NamedTuple('N%d' % n, [('x', int), ('y', str)])\n"
                "import sched, pstats, platform, shlex, sndhdr, inspect, urllib.parse, ipaddress, asyncio\n"),
    "pytest": ("import os, pytest\nhere = os.path.dirname(os.path.abspath(__file__))\n"
               "with open(os.path.join(here, 'test_sample.py'), 'w') as f:\n"
               "    f.write(''.join('def test_%d():\\n    assert %d == %d\\n' % (n, n, n) for n in range(50)))\n"
               "assert pytest.main(['-q', '-p', 'no:cacheprovider', os.path.join(here, 'test_sample.py')]) == 0\n"),
}


def timed(argv, cwd, env, pass_fds=()):
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, pass_fds=pass_fds, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return time.perf_counter() - started


def run_side(side, workload, testbed, work, before):
    script = testbed / "lib" / "work.py"
    script.write_text(WORKLOADS[workload])
    argv = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); import lib.work" % str(testbed)]
    base = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    if side == "bare":
        return timed(argv, testbed, base)
    if side == "before" and not (before / "harness" / "incontainer" / "sitecustomize.py").exists():
        return booted(work / f"before-{workload}", testbed, argv, base, before / "harness" / "incontainer")
    if side == "before":
        events = os.open(work / "before-events.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            env = dict(base, PYTHONPATH=str(before / "harness" / "incontainer"), HARNESS_EVIDENCE_FD=str(events),
                       HARNESS_TESTBED=str(testbed), HARNESS_MONITOR="1")
            return timed(argv, testbed, env, pass_fds=(events,))
        finally:
            os.close(events)
    return booted(work / f"channel-{workload}", testbed, argv, base, INCONTAINER_SOURCE)


def booted(root, testbed, argv, base, source):
    """One timed run under the bootstrap of ``source``; refused when the bootstrap did not
    start (it refuses modules that others than their owner may write: ``chmod -R go-w``)."""
    with bootstrapped(root, testbed, source=source) as channel:
        seconds = timed(argv, testbed, dict(base, **channel.env))
    if b'"k":"boot"' not in channel.events() and b'"k": "boot"' not in channel.events():
        raise RuntimeError(f"the bootstrap of {source} did not start (are its files writable by others?)")
    channel.events_path.unlink(missing_ok=True)
    return seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, help="another checkout whose bootstrap is timed beside (e.g. main)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out", type=Path, default=HERE / "results" / "monitor_cost.json")
    args = p.parse_args(argv)
    sides = ["bare", "now"] + (["before"] if args.before else [])
    samples = {w: {s: [] for s in sides} for w in WORKLOADS}
    with tempfile.TemporaryDirectory(prefix="monitor-cost-") as tmp:
        work = Path(tmp)
        testbed = work / "tb"
        (testbed / "lib").mkdir(parents=True)
        (testbed / "lib" / "__init__.py").write_text("")
        for n in range(args.rounds):
            order = sides if n % 2 == 0 else list(reversed(sides))
            for workload in WORKLOADS:
                for side in order:
                    samples[workload][side].append(run_side(side, workload, testbed, work, args.before))
    medians = {w: {s: statistics.median(v) for s, v in by.items()} for w, by in samples.items()}
    print(f"{'workload':10} " + " ".join(f"{s + ' (ms)':>12}" for s in sides) + "   now-bare (ms)")
    for workload, by in medians.items():
        print(f"{workload:10} " + " ".join(f"{by[s] * 1000:12.1f}" for s in sides)
              + f"   {(by['now'] - by['bare']) * 1000:12.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"python": sys.version, "rounds": args.rounds, "samples": samples,
                                    "medians": medians}, indent=1))
    print(f"raw data: {args.out}")


if __name__ == "__main__":
    main()
