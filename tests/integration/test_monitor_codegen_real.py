"""Issue 38 in a real sandbox: the monitor does not send what genuine library code generates
on behalf of an importer, and still sends the same events raised from the working copy.

``pytest-dev__pytest-7373`` with its reference patch plus an edit of another file of the
package pytest imports in the graded process (``src/_pytest/mark/structures.py``): at import
it imports two standard-library modules that generate code while they are imported
(``sched``: a ``namedtuple``; ``pstats``: ``dataclass`` classes), then calls ``namedtuple``
and ``exec(compile(...))`` itself. The library's codegen is not in ``events.jsonl`` (at
da1bc2b it was: compile/exec records with sched's, pstats' and dataclasses' frames); the working copy's compile and exec
are, charged to the edited file (``monitor_compile``/``monitor_exec``), and the run is FULL.
"""

from __future__ import annotations

import json

from harness.integrity.attribution import culprit
from harness.integrity.evidence import parse_evidence
from tests import realdata
from tests.integration.test_integrity_round4 import _report, _why, harness_cli

ID = "pytest-dev__pytest-7373"
EDITED = "src/_pytest/mark/structures.py"
PROBE = '''

import sched as _sched                          # a namedtuple built by sched's module code
import pstats as _pstats                        # dataclasses built by pstats' module code
_Probe = collections.namedtuple("_Probe", "a b")   # the working copy asks for one itself
exec(compile("_PROBE_OWN = 1", "<probe>", "exec"))
'''
LIBRARIES = ("/sched.py", "/pstats.py", "/dataclasses.py")


def test_a_genuine_librarys_codegen_is_not_sent_and_the_working_copys_is(tmp_path, cache_dir, engine):
    realdata.require()
    record = realdata.record(ID)
    source = realdata.repo_file(record["repo"], record["base_commit"], EDITED)
    assert "import collections" in source   # binds collections
    from harness.integrity.corpus import diffs
    patch = record["patch"] + diffs.edit(lambda path: source, {EDITED: source + PROBE})
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"instance_id": ID, "model_name_or_path": "probe", "model_patch": patch}) + "\n")
    instances = realdata.write_instances(tmp_path / "instances.jsonl", [ID])
    code, output = harness_cli("run", "--instances", str(instances), "--predictions", str(predictions),
                               "--repos-dir", str(realdata.REPOS), "--no-clone", "--timeout", "600",
                               "--run-id", "codegen", "--output-dir", str(tmp_path / "runs"), cache=cache_dir)
    assert code == 0, output[-3000:]
    run = tmp_path / "runs" / "codegen" / ID
    report = _report(run)
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)

    events = parse_evidence(b"{}", (run / "events.jsonl").read_bytes()).events
    library = [e for e in events if any(str(f[0]).endswith(LIBRARIES) for f in e.get("chain") or [])]
    assert not library, library
    probe = {(e["event"], culprit(e)[1]) for e in events
             if culprit(e) and culprit(e)[0] == "/testbed/" + EDITED}
    lines = source.count("\n") + PROBE.count("\n")
    assert {("compile", lines - 1), ("exec", lines - 1), ("compile", lines), ("exec", lines)} <= probe, probe
    assert {"monitor_compile", "monitor_exec"} <= set(report["integrity"]["flags"]), _why(report)
    hits = report["integrity"]["monitor"]
    assert any(hit.startswith(f"{EDITED}:{lines}") for hit in hits["exec"]), hits
