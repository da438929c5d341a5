"""The monitor sends no record that the host's rule would certainly discard, and every record
the host could use (issue 38): the shared rule (``_harness_genuine.blamed``), the walk's early
stop (``library_own_already``), and the monitor's real ``_record`` on every chain of frame
kinds up to a length, judged by the host's ``asked_by_model`` as the record would have read
before the monitor filtered anything."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from types import SimpleNamespace

import pytest

from harness.incontainer import _harness_genuine as genuine
from harness.integrity.attribution import asked_by_model, culprit
from harness.runners import INCONTAINER_SOURCE
from tests.unit.test_monitor_attribution import INTERPRETERS, run_case

FILES = {"c": "/testbed/pkg/model.py", "l": "/usr/lib/python3/lib.py", "m": "/usr/lib/python3/mod.py",
         "w": "/usr/lib/python3/inspect.py"}
OUTER = "/testbed/tests/test_model.py"
#: every working-copy file: the host keeps the most it can
MODEL = frozenset({"pkg/model.py", "tests/test_model.py"})


def chains(alphabet: str, longest: int):
    for n in range(longest + 1):
        yield from itertools.product(alphabet, repeat=n)


def test_the_rule_charges_a_proxy_to_its_caller_and_nothing_to_a_library_on_its_own():
    assert genuine.blamed(["c"]) == 0
    assert genuine.blamed(["l", "c"]) == 1                 # a library entry point raising it itself
    assert genuine.blamed(["l", "l", "c"]) is None         # work below the entry point
    assert genuine.blamed(["m", "c"]) is None              # a library's module code while imported
    assert genuine.blamed(["l"]) is None and genuine.blamed([]) is None
    assert genuine.blamed(["c", "l", "l"]) == 0


@pytest.mark.parametrize("longest", [10])
def test_the_walk_stops_early_only_where_every_longer_chain_is_discarded(longest):
    for kinds in chains("lmc", longest):
        for n in (1, 2):
            if genuine.library_own_already(list(kinds[:n])):
                assert genuine.blamed(list(kinds)) is None, kinds
    # and it does stop where it can: a library's module code, or two library frames
    assert genuine.library_own_already(["m"]) and genuine.library_own_already(["l", "m"])
    assert not genuine.library_own_already(["l"]) and not genuine.library_own_already(["l", "c"])


def test_a_record_not_sent_never_hid_one_the_host_keeps():
    # the monitor sends a record once per (event, first three frames, innermost working-copy
    # file): a record it no longer sends must not be one that used to take the place of a
    # later record the host keeps. The kinds of the first three frames already tell them apart.
    dropped, kept = set(), set()
    for kinds in chains("lmc", 9):
        chain = kinds[:kinds.index("c") + 1] if "c" in kinds else kinds
        (dropped if genuine.blamed(list(chain)) is None else kept).add(chain[:3])
    assert dropped and kept and not dropped & kept


def test_the_host_judges_with_the_same_rule():
    for kinds in chains("lmc", 6):
        record = {"event": "compile", "chain": [[FILES[k], n + 1, k] for n, k in enumerate(kinds)],
                  "file": FILES[kinds[0]] if kinds else "", "line": 1, "stack": [OUTER]}
        index = genuine.blamed(list(kinds))
        assert culprit(record) == (None if index is None else (FILES[kinds[index]], index + 1)), kinds


# --------------------------------------------------------------------------- the monitor's own code

@pytest.fixture(scope="module")
def monitor():
    """``_harness_monitor`` as the bootstrap loads it (its sibling imported by its bare
    name), with the frame kinds under the test's control."""
    saved = sys.modules.get("_harness_genuine")
    sys.modules["_harness_genuine"] = genuine
    try:
        spec = importlib.util.spec_from_file_location("_harness_monitor_under_test",
                                                      INCONTAINER_SOURCE / "_harness_monitor.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("_harness_genuine", None)
        else:
            sys.modules["_harness_genuine"] = saved
    return module


def frames(kinds: tuple[str, ...]):
    """Fake frames, innermost first: ``kinds``, then the test that called into them."""
    outer = SimpleNamespace(f_code=SimpleNamespace(co_filename=OUTER, kind="c"), f_lineno=99, f_back=None)
    frame = outer
    for n, k in reversed(list(enumerate(kinds))):
        frame = SimpleNamespace(f_code=SimpleNamespace(co_filename=FILES[k], kind=k), f_lineno=n + 1, f_back=frame)
    return frame


def unfiltered(kinds: tuple[str, ...], event: str) -> dict:
    """The record the monitor sent for this stack before it filtered (the chain from the first
    non-transparent frame to the first ``c`` one, at most CHAIN + 1 frames)."""
    chain = []
    for n, k in enumerate(kinds + ("c",)):
        if k == "w":
            continue
        chain.append([FILES[k] if n < len(kinds) else OUTER, n + 1 if n < len(kinds) else 99, k])
        if k == "c" or len(chain) > 8:
            break
    stack: list[str] = []
    for name in [FILES[k] for k in kinds] + [OUTER]:
        if name.startswith("/testbed/") and name not in stack:
            stack.append(name)
    return {"k": "event", "event": event, "file": chain[0][0], "line": chain[0][1], "chain": chain,
            "stack": stack}


@pytest.mark.parametrize("event", ["compile", "gc.get_objects"])
def test_every_record_the_host_could_use_is_sent_and_nothing_else(monitor, monkeypatch, event):
    sent: list[dict] = []
    monkeypatch.setattr(monitor, "kind", lambda code: code.kind)
    monkeypatch.setattr(monitor, "emit", sent.append)
    tamper = event == "gc.get_objects"
    dropped = kept = 0
    for kinds in chains("lmcw", 7):
        sent.clear()
        monitor._STATE["seen"], monitor._STATE["counts"] = set(), {}
        monitor._record(event, (), frames(kinds))
        before = unfiltered(kinds, event)
        host_keeps = asked_by_model(before, MODEL, tamper_class=tamper)
        if sent:
            kept += 1
            assert sent[0]["chain"] == before["chain"], kinds     # recorded exactly as before
            assert culprit(sent[0]) is not None, kinds
        else:
            dropped += 1
            assert not host_keeps, kinds
            assert culprit(before) is None, kinds                 # and only what the rule discards
    assert dropped and kept


# --------------------------------------------------------------------------- a real process

CODEGEN = """\
import sched                                   # its module code builds a namedtuple while imported
import dataclasses
dataclasses.make_dataclass("Point", ["x", "y"])   # generated methods, two frames below the entry point
import collections
collections.namedtuple("Pair", "a b")          # the library's entry point called by the working copy
exec(compile("WORKING_COPY = 1", "<core>", "exec"))
"""


def unfiltered_source(tmp_path):
    """This checkout's bootstrap with the monitor's filter taken out (what it sent before)."""
    import shutil
    target = tmp_path / "unfiltered"
    target.mkdir()
    for path in INCONTAINER_SOURCE.glob("_harness_*.py"):
        shutil.copy(path, target / path.name)
    with open(target / "_harness_genuine.py", "a") as f:
        f.write("\n\ndef blamed(kinds):\n    return 0\n\n\ndef library_own_already(kinds):\n    return False\n")
    return target


def judged(stream: bytes) -> tuple[list[dict], set[tuple]]:
    from harness.integrity.evidence import parse_evidence
    ev = parse_evidence(b"{}", stream)
    assert ev.boot is not None and ev.boot["monitor"] is True
    kept = {(e["event"], culprit(e), e.get("detail")) for e in ev.events
            if asked_by_model(e, frozenset({"lib/core.py"}), tamper_class=False)}
    return ev.events, kept


@pytest.mark.parametrize("python", sorted(INTERPRETERS))
def test_a_genuine_librarys_codegen_is_not_sent_and_the_working_copys_is(tmp_path, python):
    events, kept = judged(run_case(tmp_path / "now", CODEGEN, INTERPRETERS[python]))
    before, before_kept = judged(run_case(tmp_path / "before", CODEGEN, INTERPRETERS[python],
                                          modules=unfiltered_source(tmp_path)))
    def library(records):
        return [e for e in records if any(f[0].endswith(("/sched.py", "/dataclasses.py")) for f in e["chain"])]
    assert library(before)                      # the library's codegen was recorded before...
    assert not library(events), library(events)  # ...and is not sent now
    assert kept == before_kept                  # every record the host keeps is still sent
    # the same codegen asked for by the working copy: namedtuple called from it (line 5), and
    # its own compile and exec (line 6)
    asked = {(event, where[1]) for event, where, _ in kept if where[0] == "/testbed/lib/core.py"}
    assert {("compile", 5), ("exec", 5), ("compile", 6), ("exec", 6)} <= asked, kept
    assert len(events) < len(before) / 4, (len(events), len(before))
