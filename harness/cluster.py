"""``harness node``: a Ray node that offers this machine's Docker engine to harness runs.

    harness node --head [--port 6379] [--engine-slots 2]        # the first machine
    harness node --address HEAD:6379 [--engine-slots 2]         # every other machine
    harness run --executor ray --ray-address HEAD:6379 ...      # anywhere that reaches the head

The agent runs ``ray start --block`` with the custom resource ``harness_engine`` = the
number of evaluations this engine takes at once (0: a head that only schedules), the
engine of ``DOCKER_HOST`` (default: the local socket), and ``HARNESS_NODE_NAME`` (the
node's name in reports and in the ``org.harness.node`` label of its containers). It
stays in the foreground (a compose service, a systemd unit) and owns what it started:

* it is the child subreaper of everything below it, so when the Ray node dies (its
  raylet killed, an out-of-memory kill) no orphaned worker can start a container later;
* when its engine stops answering for ``--engine-grace`` seconds, it stops the Ray node,
  so that the cluster re-queues the node's tasks elsewhere instead of failing them;
* when the Ray node is gone (whatever the cause) or the agent is told to stop, it kills
  what is left below it and removes every container and volume labelled with its node
  name from its engine. A restarted node does the same first.

Ray's token authentication is on (``RAY_AUTH_MODE=token``): every node and driver needs
the same token (``~/.ray/auth_token``, ``RAY_AUTH_TOKEN_PATH`` or ``RAY_AUTH_TOKEN``; the
head generates one when there is none).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.cliargs import bounded_float, bounded_int
from harness.errors import EngineUnavailable, InputError

#: prctl option: orphaned descendants are re-parented to this process, not to init.
PR_SET_CHILD_SUBREAPER = 36


def add_node_parser(sub) -> None:
    node = sub.add_parser("node", help="run a Ray node that offers this machine's Docker engine to harness runs")
    where = node.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", action="store_true", help="start the cluster's head node")
    where.add_argument("--address", metavar="HOST:PORT", help="join the cluster whose head is at HOST:PORT")
    node.add_argument("--port", type=bounded_int(1, 65535), default=6379, help="the head's port (with --head; default 6379)")
    node.add_argument("--engine-slots", type=bounded_int(0, 1024), default=None,
                      help="evaluations this engine runs at once (default: the number of cores; 0: no engine)")
    node.add_argument("--name", help="the node's name in reports and container labels, unique in the cluster "
                                     "(default: the host name and a random suffix)")
    node.add_argument("--node-ip-address", metavar="IP", default=os.environ.get("HARNESS_NODE_IP") or None,
                      help="the address other nodes reach this one at (default: $HARNESS_NODE_IP, else Ray's guess)")
    node.add_argument("--engine-grace", type=bounded_float(1, 86_400), default=20.0, metavar="SEC",
                      help="leave the cluster when the engine has not answered for this long (default 20)")
    node.add_argument("--ray-arg", action="append", default=[], metavar="ARG",
                      help="an extra argument for `ray start` (repeatable)")
    node.set_defaults(func=cmd_node)


def ray_start_command(args: argparse.Namespace, slots: int) -> list[str]:
    ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    cmd = [ray, "start", "--block", "--disable-usage-stats", f"--resources={json.dumps({'harness_engine': slots})}"]
    if args.head:
        cmd += ["--head", f"--port={args.port}", "--include-dashboard=false"]
    else:
        cmd += [f"--address={args.address}"]
    if args.node_ip_address:
        cmd.append(f"--node-ip-address={args.node_ip_address}")
    return cmd + list(args.ray_arg)


def cmd_node(args: argparse.Namespace) -> int:
    from harness.engine.client import connect, engine_alive
    import secrets
    name = args.name or f"{socket.gethostname()}-{secrets.token_hex(2)}"
    slots = args.engine_slots if args.engine_slots is not None else (os.cpu_count() or 1)
    client = None
    if slots:
        client = connect(timeout=30)  # EngineUnavailable: a sentence, exit 2
        removed = _remove_node_containers(client, name)
        if removed:
            print(f"harness node: removed {removed} container(s) left by an earlier run of node {name}",
                  file=sys.stderr)
    _become_subreaper()
    env = dict(os.environ, HARNESS_NODE_NAME=name)
    env.setdefault("RAY_AUTH_MODE", "token")
    if env["RAY_AUTH_MODE"] == "token" and not args.head and not _token_available(env):
        raise InputError("Ray token authentication is on and no token is here: set RAY_AUTH_TOKEN (or "
                         "RAY_AUTH_TOKEN_PATH) to the head's token (`harness node --head` prints where it is), "
                         "or RAY_AUTH_MODE=disabled on every node and driver", field="RAY_AUTH_TOKEN")
    child = subprocess.Popen(ray_start_command(args, slots), env=env)
    stopping = {"signal": None}

    def on_signal(signum, _frame) -> None:
        stopping["signal"] = signum
        _terminate(child)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    print(f"harness node {name}: {'head on port ' + str(args.port) if args.head else 'joined ' + args.address}, "
          f"{slots} engine slot(s)", file=sys.stderr, flush=True)
    engine_down_since = None
    try:
        while child.poll() is None:
            time.sleep(1.0)
            if client is None:
                continue
            if engine_alive(client):
                engine_down_since = None
            elif engine_down_since is None:
                engine_down_since = time.monotonic()
            elif time.monotonic() - engine_down_since > args.engine_grace:
                print(f"harness node {name}: the engine has not answered for {args.engine_grace:.0f} s; "
                      "leaving the cluster", file=sys.stderr, flush=True)
                _terminate(child)
                break
    finally:
        _terminate(child)
        _kill_descendants()
        if client is not None:
            try:
                removed = _remove_node_containers(client, name)
                if removed:
                    print(f"harness node {name}: removed {removed} container(s) of its tasks", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 — the engine may be the reason we stop
                print(f"harness node {name}: could not clean the engine: {exc}", file=sys.stderr)
    code = child.returncode
    return 0 if stopping["signal"] is not None else (code if code is not None else 1)


def _token_available(env: dict) -> bool:
    if env.get("RAY_AUTH_TOKEN"):
        return True
    return Path(env.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token").is_file()


def _remove_node_containers(client, name: str) -> int:
    from harness.engine.sandbox import LABEL_NODE, remove_labelled
    return remove_labelled(client, {LABEL_NODE: name})


def _become_subreaper() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans go to init; the container cleanup still happens


def _terminate(child: subprocess.Popen, wait: float = 20.0) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(wait)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this one), from /proc."""
    root = pid or os.getpid()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parentheses
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        current = frontier.pop()
        children = [p for p, pp in parents.items() if pp == current]
        found += children
        frontier += children
    return found


def _kill_descendants(rounds: int = 5) -> None:
    """SIGKILL everything below this process (Ray workers re-parented to it included)."""
    for _ in range(rounds):
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                break
            if not descendants():
                return
            time.sleep(0.1)


__all__ = ["add_node_parser", "cmd_node", "descendants", "EngineUnavailable"]
