"""The host ↔ driver protocol, and the host's side of an attempt (harness.agents.serving)
against real driver processes that speak it: a second scaffold behind the same seam, written
here, whose behaviour each test chooses. The sandbox is a stand-in (a directory with git):
the working sandbox itself is tested with real containers in tests/integration."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.agents import serving
from harness.agents.budgets import Budgets, RunCostLedger
from harness.agents.pins import ScaffoldEnvironment, ScaffoldPin
from harness.agents.protocol import Channel, ProtocolError, expect
from harness.agents.scaffold import AttemptSpec, Effective
from harness.agents.scrubbing import Scrubber
from harness.agents.workspace import check_arguments

# ---------------------------------------------------------------------------- the framing


def _pair():
    a, b = socket.socketpair()
    return Channel(a), Channel(b)


def test_messages_cross_whole_in_order_whatever_the_chunking():
    host, driver = _pair()
    big = "x" * 3_000_000 + "é\u2028"
    sender = threading.Thread(target=lambda: (driver.send({"type": "execute", "command": big}),
                                              driver.send({"type": "check", "step": 2})))
    sender.start()   # a message larger than the socket's buffer: sent while the other side reads
    assert host.receive(5) == {"type": "execute", "command": big}
    assert expect(host.receive(5), "check", "step")["step"] == 2
    sender.join()
    raw_host, raw_driver = socket.socketpair()
    channel = Channel(raw_host)
    for piece in (b'{"type": "us', b'age", "cost": 0.5}\n{"type"', b': "done"}\n'):
        raw_driver.sendall(piece)
        time.sleep(0.01)
    assert channel.receive(5) == {"type": "usage", "cost": 0.5} and channel.receive(5) == {"type": "done"}


@pytest.mark.parametrize("line, match", [(b"not json\n", "not a JSON line"), (b"[1, 2]\n", "JSON object"),
                                         (b'{"kind": "x"}\n', "string 'type'"), (b"\xff\xfe\n", "not a JSON line")])
def test_a_bad_line_is_a_protocol_error(line, match):
    raw_host, raw_driver = socket.socketpair()
    raw_driver.sendall(line)
    with pytest.raises(ProtocolError, match=match):
        Channel(raw_host).receive(5)


def test_silence_and_a_closed_socket_are_protocol_errors():
    host, driver = _pair()
    with pytest.raises(ProtocolError, match="no message within"):
        host.receive(0.2)
    driver.close()
    with pytest.raises(ProtocolError, match="closed"):
        host.receive(5)
    with pytest.raises(ProtocolError, match="a 'done' message without submission"):
        expect({"type": "done"}, "done", "submission")


# ---------------------------------------------------------------------------- one attempt served

DRIVER = textwrap.dedent('''
    import json, os, socket, sys, time
    sock = socket.socket(fileno=int(sys.argv[1]))
    buf = b""
    def send(m):
        sock.sendall(json.dumps(m).encode() + b"\\n")
    def receive():
        global buf
        while b"\\n" not in buf:
            buf += sock.recv(65536)
        line, _, buf = buf.partition(b"\\n")
        return json.loads(line)
    def call(m):
        send(m)
        return receive()
    behaviour = os.environ.get("FAKE_BEHAVIOUR", "normal")
    print("driver starting", os.environ.get("OPENAI_API_KEY", "no key"), file=sys.stderr, flush=True)
    send({"type": "hello", "scaffold": "fake", "version": os.environ.get("FAKE_VERSION", "1.0")})
    start = receive()
    if behaviour == "garbage":
        sock.sendall(b"this is not json\\n")
        time.sleep(30)
    if behaviour == "exit":
        print("Traceback: the scaffold crashed", file=sys.stderr, flush=True)
        sys.exit(1)
    if behaviour == "silent":
        call({"type": "check", "step": 1, "messages": [{"role": "system", "content": "hi"}]})
        time.sleep(60)
    status, steps = "Submitted", 0
    for step in (1, 2, 3):
        stop = call({"type": "check", "step": step, "messages": [{"role": "assistant", "content": f"s{step}"}]})["stop"]
        if stop:
            status = {"wall_time": "WallTimeExceeded", "run_cost": "RunCostLimitExceeded"}[stop]
            break
        call({"type": "usage", "step": step, "cost": 0.25, "tokens_in": 100, "tokens_out": 10, "seconds": 0.01})
        steps = step
        if behaviour == "bad-cost":
            call({"type": "usage", "step": step, "cost": "a lot"})
            time.sleep(30)
        reply = call({"type": "execute", "command": start["config"]["commands"][step - 1], "cwd": "/testbed",
                      "timeout": 60, "env": {"PAGER": "cat"}})
        if reply.get("error"):
            status = "ValueError"
            break
        if reply["output"].startswith("SUBMIT"):
            break
    submission = reply["output"].split("\\n", 1)[1] if status == "Submitted" else ""
    call({"type": "done", "exit_status": status, "submission": submission, "cost": 0.25 * steps, "calls": steps,
          "trajectory": {"messages": [{"role": "user", "content": start["task"]}],
                         "info": {"config": {"model": {"api_key": os.environ.get("OPENAI_API_KEY")}}}}})
''')

KEY = "sk-planted-in-the-driver-env-0001"


@dataclass(frozen=True)
class _Result:
    output: str
    returncode: int | None
    timed_out: bool
    truncated: bool
    seconds: float


@dataclass(frozen=True)
class _Diff:
    patch: str
    files: tuple
    binary_files: tuple
    symlinks: tuple
    sha256: str


class StandInWorkspace:
    """A directory with git standing in for the sandbox: commands run by bash in it."""

    image, image_id = "stand-in", "sha256:none"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[dict] = []
        subprocess.run("git init -q && echo base > a.txt && git add -A && git -c user.name=t -c user.email=t@t "
                       "commit -qm base", shell=True, cwd=root, check=True)

    def run(self, command, *, cwd="/testbed", timeout=60, env=None):
        check_arguments(command, cwd, timeout, env)      # what the real workspace refuses, refused alike
        self.calls.append({"command": command, "cwd": cwd, "timeout": timeout, "env": env})
        started = time.monotonic()
        proc = subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True, text=True)
        return _Result(proc.stdout + proc.stderr, proc.returncode, False, False, time.monotonic() - started)

    def diff(self):
        subprocess.run(["git", "add", "-A"], cwd=self.root, check=True)
        patch = subprocess.run(["git", "diff", "--cached"], cwd=self.root, capture_output=True, text=True).stdout
        return _Diff(patch, ("a.txt",) if patch else (), (), (), hashlib.sha256(patch.encode()).hexdigest())


class FakeScaffold:
    """A second scaffold behind the seam: the driver above."""

    name = "fake"

    def __init__(self, driver: Path) -> None:
        self.driver = driver

    def effective(self, config):
        return Effective("fake-model", {"temperature": 0, "api_key": config.get("api_key")}, 3, 1.0,
                         {"instance_template": "0" * 64})

    def partial_trajectory(self, messages, *, instance_id, exit_status, cost, calls, version, error):
        return {"messages": messages, "info": {"exit_status": exit_status, "error": error}}


@pytest.fixture
def attempt(tmp_path, monkeypatch):
    driver = tmp_path / "fake_driver.py"
    driver.write_text(DRIVER)
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to(sys.executable)
    environment = ScaffoldEnvironment(ScaffoldPin("fake", "1.0"), tmp_path / "env", "key")
    (tmp_path / "tree").mkdir()
    workspace = StandInWorkspace(tmp_path / "tree")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def run(behaviour="normal", *, commands=("echo change > a.txt", "echo SUBMIT; git diff", "true"),
            budgets=None, ledger=None, version="1.0"):
        monkeypatch.setenv("FAKE_BEHAVIOUR", behaviour)
        monkeypatch.setenv("FAKE_VERSION", version)
        spec = AttemptSpec("o__r-1", None, "fix it", {"problem_statement": True},
                           {"commands": list(commands), "api_key": KEY}, budgets or Budgets(), pin="fake==1.0")
        ledger = ledger or RunCostLedger()
        scrubber = Scrubber.from_environment({"OPENAI_API_KEY": KEY})
        return serving.run_attempt(FakeScaffold(driver), environment, workspace, spec, ledger=ledger,
                                   scrubber=scrubber), ledger
    run.workspace = workspace
    return run


def test_an_attempt_is_served_to_its_end_and_recorded(attempt):
    result, ledger = attempt()
    record = result.record
    assert record.exit_status == "Submitted" and record.limit is None
    assert record.steps == 2 and record.usage == {"cost": 0.5, "calls": 2, "tokens_in": 200, "tokens_out": 20}
    assert ledger.spent() == 0.5
    assert [t["step"] for t in record.step_timings] == [1, 2]
    assert record.step_timings[0]["returncode"] == 0 and record.step_timings[0]["model_seconds"] == 0.01
    assert "+change" in result.patch and record.prediction["files"] == ["a.txt"]
    assert record.submission_equals_prediction is True and record.submission_sha256
    assert attempt.workspace.calls[0] == {"command": "echo change > a.txt", "cwd": "/testbed", "timeout": 60.0,
                                          "env": {"PAGER": "cat"}}
    assert record.scaffold["name"] == "fake" and record.scaffold["template_sha256"] == {"instance_template": "0" * 64}
    # the key reached the driver (its environment) and nothing returned holds it
    assert "[REDACTED:OPENAI_API_KEY]" in result.log
    everything = json.dumps([record.to_json(), result.trajectory, result.log, result.patch, result.submission])
    assert KEY not in everything and record.model["parameters"]["api_key"] == "[REDACTED]"


def test_the_host_stops_an_attempt_when_the_runs_cost_limit_is_reached(attempt):
    result, ledger = attempt(budgets=Budgets(run_cost_limit=0.5), ledger=RunCostLedger(0.5, spent=0.3),
                             commands=("true", "true", "true"))
    assert result.record.exit_status == "RunCostLimitExceeded" and result.record.limit == "run_cost"
    assert result.record.steps == 1 and ledger.spent() == pytest.approx(0.55)


def test_a_commands_timeout_is_cut_to_the_attempts_remaining_wall_time(attempt):
    result, _ = attempt(budgets=Budgets(wall_seconds_limit=30))
    assert 1 <= attempt.workspace.calls[0]["timeout"] <= 30


def test_a_driver_past_its_wall_time_is_stopped_at_its_next_model_call(attempt):
    result, _ = attempt(budgets=Budgets(wall_seconds_limit=1.5), commands=("sleep 2", "true", "true"))
    assert result.record.exit_status == "WallTimeExceeded" and result.record.limit == "wall_time"
    assert result.record.steps == 1


def test_a_driver_silent_past_its_wall_time_is_killed(attempt, monkeypatch):
    monkeypatch.setattr(serving, "SILENCE_GRACE_SECONDS", 1.0)
    started = time.monotonic()
    result, _ = attempt("silent", budgets=Budgets(wall_seconds_limit=1))
    assert time.monotonic() - started < 20
    assert result.record.exit_status == "WallTimeExceeded" and "silent" in result.record.error
    # the trajectory is rebuilt from the messages the host saw
    assert result.trajectory["messages"] == [{"role": "system", "content": "hi"}]


@pytest.mark.parametrize("behaviour, match", [("garbage", "not a JSON line"), ("exit", "the scaffold crashed"),
                                             ("bad-cost", "malformed 'usage' message")])
def test_a_driver_that_breaks_the_protocol_or_dies_is_a_scaffold_error(attempt, behaviour, match):
    result, _ = attempt(behaviour)
    assert result.record.exit_status == "ScaffoldError" and match in result.record.error
    assert result.record.prediction is not None            # the tree is still read: tree truth
    assert KEY not in json.dumps(result.record.to_json()) + result.log


def test_a_command_no_sandbox_can_run_is_the_scaffolds_exception_not_the_harness_failing(attempt):
    result, _ = attempt(commands=("echo a\0b", "true", "true"))
    assert result.record.exit_status == "ValueError" and result.record.steps == 1
    assert attempt.workspace.calls == []          # refused before anything ran


def test_a_driver_of_another_version_than_the_pin_is_refused(attempt):
    result, _ = attempt(version="9.9")
    assert result.record.exit_status == "ScaffoldError" and "the pin is 1.0" in result.record.error


def test_the_driver_gets_no_secret_in_replay_and_no_python_or_harness_variables():
    environ = {"OPENAI_API_KEY": KEY, "PATH": "/usr/bin", "PYTHONPATH": "/x", "HARNESS_CACHE_DIR": "/c",
               "HTTPS_PROXY": "http://proxy:3128"}
    live = serving.driver_environment(environ, "/tmp/cfg", live=True)
    replay = serving.driver_environment(environ, "/tmp/cfg", live=False)
    assert live["OPENAI_API_KEY"] == KEY and "OPENAI_API_KEY" not in replay
    for env in (live, replay):
        assert "PYTHONPATH" not in env and "HARNESS_CACHE_DIR" not in env and env["HTTPS_PROXY"]
        assert env["MSWEA_GLOBAL_CONFIG_DIR"] == "/tmp/cfg" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
        assert env["MSWEA_SILENT_STARTUP"] == "1"

