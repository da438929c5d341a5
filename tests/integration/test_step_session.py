"""One exec the host talks to (harness/engine/exec_session.py): messages both ways (the
host's on stdin, the launcher's on stderr), the output on stdout, with the limits and
deadlines of an ordinary exec. Real containers."""

from __future__ import annotations

import secrets
import time

import pytest

from harness.engine.sandbox import DockerBackend
from harness.inputs import demo
from harness.inputs.instances import load_instances
from harness.inputs.repos import RepoResolver
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.preparation.preparer import Preparer
from tests.conftest import leftover_containers

#: the launcher's side of the protocol, as step_channel.py writes and reads it
ECHO = r'''
import json, sys
out = sys.stderr.buffer
def send(header, body):
    out.write(json.dumps(dict(header, size=len(body))).encode() + b"\n" + body); out.flush()
send({"step": "first", "exit_code": 0}, b"report body")
line = sys.stdin.buffer.readline()
body = sys.stdin.buffer.read(json.loads(line)["size"])
send({"step": "echo"}, body.upper())
line = sys.stdin.buffer.readline()
body = sys.stdin.buffer.read(json.loads(line)["size"])
print("plain output after", body.decode(), flush=True)
send({"step": "tests"}, b"the output directory")
sys.exit(3)
'''


@pytest.fixture(scope="module")
def image(engine, cache_dir) -> str:
    built = demo.build_demo_repos(demo.DEMO_DIR, cache_dir / "demo-repos")
    instance = load_instances(demo.DEMO_DIR / "instances.jsonl").instances[0]
    preparer = Preparer(engine, SpecRegistry.load(DEFAULT_SPECS_DIR),
                        RepoResolver(cache_dir, overrides=built, allow_clone=False), cache_dir)
    return preparer.prepare(instance).image.tag


def stops(box, within: float = 10.0) -> bool:
    """The container stops within ``within`` seconds. The engine's kill call can return
    before the container's state reads as stopped (moby waits only briefly for the exit),
    and under a full suite's load that gap has been seen; what these tests assert is
    that the container is killed, not how soon the engine says so."""
    deadline = time.monotonic() + within
    while box.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def box(engine, image):
    run_id = f"test-step-session-{secrets.token_hex(4)}"   # this test's containers only
    backend = DockerBackend(engine, run_id=run_id)
    sandbox = backend.start(image, "session")
    yield sandbox
    sandbox.close()
    assert leftover_containers(engine, run_id) == []


def test_messages_go_both_ways_and_then_the_output_is_plain(box):
    session = box.session(["python3", "-c", ECHO], cap=1 << 20, message_cap=1 << 20)
    try:
        first = session.receive(1024, timeout=60)
        assert first.ok and first.header["step"] == "first" and first.body == b"report body"
        result = first.as_result(["prepare"])
        assert result.exit_code == 0 and result.output == "report body" and not result.killed
        session.send(b"plan one")
        echo = session.receive(1024, timeout=60)
        assert echo.ok and echo.body == b"PLAN ONE"
        session.send(b"{\"size\": 0}")       # a header-like body is a body
        res = session.finish(60, 1 << 16)
        last = session.receive(1024, timeout=10)       # sent after the output, kept apart from it
    finally:
        session.close()
    assert res.exit_code == 3 and not res.killed
    assert res.output == 'plain output after {"size": 0}\n'
    assert last.ok and last.header["step"] == "tests" and last.body == b"the output directory"
    assert box.alive()


@pytest.mark.parametrize("script, expect", [
    ('import sys; sys.stderr.write(\'{"size": 5000}\\n\' + "x" * 5000); sys.stderr.flush()', "truncated"),
    ('import sys; print("Traceback (most recent call last):", file=sys.stderr, flush=True)', "malformed"),
    ('print(\'{"size": 3}\', flush=True); print("abc", flush=True); import time; time.sleep(60)', "timed_out"),
    ('import time; time.sleep(60)', "timed_out"),
])
def test_a_message_past_its_limit_a_non_message_or_a_deadline_kills_the_container(box, script, expect):
    session = box.session(["python3", "-c", script], cap=1 << 20, message_cap=1 << 20)
    try:
        message = session.receive(1024, timeout=3)
    finally:
        session.close()
    assert not message.ok
    assert {"truncated": message.truncated, "malformed": bool(message.malformed),
            "timed_out": message.timed_out}[expect]
    assert stops(box)                     # killed, as an ordinary exec past its limits


def test_the_end_of_the_exec_before_a_message_is_an_end_not_a_kill(box):
    session = box.session(["python3", "-c", "import sys; sys.stderr.write('partial')"], cap=1 << 20, message_cap=1 << 20)
    try:
        message = session.receive(1024, timeout=30)
    finally:
        session.close()
    assert message.eof and message.body == b"partial" and not (message.timed_out or message.truncated)
    assert box.alive()


def test_output_past_its_limit_after_the_messages_is_cut_and_the_container_killed(box):
    session = box.session(["python3", "-c", "import sys\nwhile True: sys.stdout.write('y' * 65536)"], cap=1 << 22, message_cap=1 << 20)
    try:
        res = session.finish(60, 100_000)
    finally:
        session.close()
    assert res.truncated and res.killed and res.exit_code is None
    assert len(res.output) == 100_000
    assert stops(box)


def test_a_message_that_does_not_come_need_not_kill_the_container(box):
    """The test step's output directory is read through the archive API when the launcher
    did not send it: that receive leaves the container running."""
    session = box.session(["python3", "-c", "print('only output')"], cap=1 << 20, message_cap=1 << 20)
    try:
        res = session.finish(30, 1 << 16)
        message = session.receive(1024, timeout=5, kill=False)
    finally:
        session.close()
    assert res.output == "only output\n" and message.eof and not message.ok
    assert box.alive()


def test_messages_past_their_cap_are_lost_but_the_output_is_still_read(box):
    """An output directory too big to hold (a flood of results) costs the message, not the
    output: the host then reads the directory itself, and the tests' output is whole."""
    script = ("import sys\nsys.stderr.write('{\"size\": 3000000}\\n' + 'z' * 3000000); sys.stderr.flush()\n"
              "print('the tests ran', flush=True)")
    session = box.session(["python3", "-c", script], cap=1 << 20, message_cap=1 << 20)
    try:
        res = session.finish(60, 1 << 16)
        message = session.receive(4 << 20, timeout=5, kill=False)
    finally:
        session.close()
    assert res.output == "the tests ran\n" and not res.truncated and not res.killed
    assert message.truncated and not message.ok
    assert box.alive()
