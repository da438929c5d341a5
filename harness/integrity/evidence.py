"""What the sandbox reported about the test run, read and judged on the host (pure).

Two artefacts come out of the root-owned output directory:

* ``evidence.json`` - the launcher's record: deletions and restores, the bytecode it
  removed, the sealed set and what changed in it during the run, what the tests created in
  sealed directories (``created``), service steps, the test command's exit code and
  duration, the results file's hash;
* ``events.jsonl`` - what the trusted in-process reporters of every bootstrapped process
  sent over the evidence socket, as the launcher's collector wrote it: ``h<n>\t{...}`` is
  the collector's own header of connection ``n`` (the sender's pid, uid, parent and
  command line, from the kernel and ``/proc``), ``<n>\t{...}`` a record that connection
  sent (a bare ``{...}`` line is a record of evidence written before connections were
  told apart: one process). Records: ``boot`` (the bootstrap ran), ``event`` (the audit
  hook saw a watched event with a frame of the working copy on the stack), ``start``/
  ``report``/``raised``/``session``/``results_file`` (the outcome plugin, per pytest
  session ``s`` of the process; the reporter runners' records carry no session), ``identity``
  (``_harness_identity``: the runner's outcome-deciding bindings, ``changed`` whenever a
  comparison finds a difference, from any process, and ``final`` when the suite ends).

Both are read with caps (sizes, line counts, lengths), as hostile input: the test user
can send anything over its own connections. Outcome records count only from the sessions
that wrote the run's results file (``start`` with ``graded``; a session in a subprocess or
an in-process ``pytester`` run reports its own tests, not the graded ones; when no session
wrote it, from every session); events count from every process. A stream the collector
cut at its cap is ambiguous (``evidence_truncated``): what came after is unknown. Judging needs the tree truth (which files the model changed): an
event, a skip or an xfail raised from such a file is the code under test speaking, not
the test; which events the model asked for is :mod:`harness.integrity.attribution`'s rule.

Runner identity: a binding that decides outcomes (a reporter's or result class's method,
pytest's report and JUnit machinery, the harness's own) found changed is ``tampered``
(``runner_rebound``; a flag only for a test runner's own repository), and so is an
assignment to one that the audit hook saw the model ask for (``monitor_runner_rebind``,
judged like the other tampering events). A bootstrap that states it carries the identity
registry (``identity`` in its boot record) must have compared the bindings when the
results file was written (a ``final`` record from the process that wrote it, with bindings
compared): otherwise ``ambiguous_results`` (``runner_identity_unchecked``).

Runtime events and what they make the run (documented in docs/SECURITY.md):

======================================  =============================================
``tampered`` (unless runner project)    ``gc.*`` walks, ``sys.settrace``/``setprofile``,
                                        ``sys._current_frames``, ``sys.addaudithook``,
                                        ``ctypes`` memory access (cdata, addressof,
                                        string_at, call_function), writes to sealed
                                        files or to ``/harness``
flagged (``monitor_<event>``)           ``sys._getframe``, ``exec``/``compile`` of
                                        dynamic code, ``marshal.loads``, ``code.__new__``,
                                        ``ctypes.dlopen``/``dlsym``, subprocesses,
                                        other writes in the working copy
======================================  =============================================

What the tests create in sealed directories (they may: honest tests write fixtures, temp
trees and caches beside themselves) is ``tampered`` when a runner would load it or the
import system would find it before a sealed module: a ``conftest.py``/``sitecustomize.py``/
``usercustomize.py`` anywhere in or under a sealed directory; an ``__init__.py``, ini file
or ``*.pth`` in a sealed directory itself; and, in a sealed directory, an entry ``name``
(a package, a link) or ``name.*.so`` beside a sealed ``name.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from harness.grading.status import TestStatus
from harness.integrity.attribution import asked_by_model, culprit, relative

MAX_EVENT_LINES = 100_000
MAX_LINE = 16_384
TAMPER_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
                           "sys.setprofile", "sys._current_frames", "sys.addaudithook", "ctypes.cdata",
                           "ctypes.addressof", "ctypes.string_at", "ctypes.call_function",
                           "sys.monitoring.register_callback", "runner.rebind"})
WRITE_EVENTS = frozenset({"open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink",
                          "os.link", "shutil.rmtree", "shutil.move", "shutil.copyfile"})
INFRA_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini", ".pytest.ini",
                         "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "pyproject.toml", "__init__.py"})
#: created anywhere in or under a sealed directory: a runner loads these from any directory it collects
PLANTED_ANYWHERE = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
#: what the launcher's survey of created entries reports in full (the rest is counted)
SURVEY_WATCH = {"names": sorted(INFRA_NAMES), "suffixes": [".pth"]}


@dataclass
class Evidence:
    """Both artefacts, parsed. ``launcher`` is None when evidence.json was absent."""

    launcher: dict | None
    boot: dict | None = None
    events: list[dict] = field(default_factory=list)
    reports: dict[str, dict[str, dict]] = field(default_factory=dict)   # id -> when -> record
    raised: dict[str, list[dict]] = field(default_factory=dict)          # id -> records
    session: dict | None = None
    results_file: dict | None = None
    notes: list[str] = field(default_factory=list)
    #: connection number -> the collector's header (sender pid, uid, ppid, argv)
    processes: dict[int, dict] = field(default_factory=dict)
    #: (connection, session) of the pytest sessions that wrote the results file
    graded_sessions: list[tuple[int | None, int]] = field(default_factory=list)
    #: the runner's bindings found changed (``identity`` records, any process), in order
    rebound: list[str] = field(default_factory=list)
    #: the ``final`` identity records of the process(es) that wrote the results file
    identity_finals: list[dict] = field(default_factory=list)
    #: entry points plugin autoloading refused ("name = value"; ``_harness_outcomes.guard_autoload``)
    plugins_refused: list[str] = field(default_factory=list)

    @property
    def test_exit_code(self) -> int | None:
        return ((self.launcher or {}).get("tests") or {}).get("exit_code")


def parse_evidence(launcher_json: bytes | None, events: bytes | None) -> Evidence:
    launcher = None
    notes = []
    if launcher_json is not None:
        try:
            launcher = json.loads(launcher_json)
            if not isinstance(launcher, dict):
                launcher, notes = None, ["evidence.json is not an object"]
        except ValueError as exc:
            notes.append(f"evidence.json unreadable: {exc}")
    ev = Evidence(launcher, notes=notes)
    lines = (events or b"").split(b"\n")
    if len(lines) > MAX_EVENT_LINES:
        ev.notes.append(f"{len(lines)} evidence lines; only the first {MAX_EVENT_LINES} read")
        lines = lines[:MAX_EVENT_LINES]
    bad, records = 0, []
    for raw in lines:
        if not raw.strip():
            continue
        match = _FRAMED.match(raw[:MAX_LINE + 16])
        connection, header = (int(match.group(2)), match.group(1) == b"h") if match else (None, False)
        try:
            record = json.loads(raw[match.end():match.end() + MAX_LINE] if match else raw[:MAX_LINE])
        except ValueError:
            bad += 1
            continue
        if not isinstance(record, dict):
            bad += 1
            continue
        if header:
            ev.processes.setdefault(connection, record)
        else:
            records.append((connection, record))
    graded = {(c, r.get("s")) for c, r in records if r.get("k") == "start" and r.get("graded") is True}
    ev.graded_sessions = sorted(graded, key=lambda cs: (cs[0] or 0, cs[1] if isinstance(cs[1], int) else 0))
    severe = minor = 0
    for connection, record in records:
        kind = record.get("k")
        test_id = record.get("id")
        # outcome records: the reporter's and pre-session evidence's carry no session; when no
        # session wrote the results file (a command without our --junitxml), every session's count
        counts = "s" not in record or not graded or (connection, record.get("s")) in graded
        if kind == "boot" and ev.boot is None:
            ev.boot = record
        elif kind == "identity" and record.get("what") in ("changed", "final"):
            changed = record.get("changed") if isinstance(record.get("changed"), list) else []
            for item in changed[:50]:
                name = str(item)[:300]
                if name not in ev.rebound and len(ev.rebound) < 200:
                    ev.rebound.append(name)
            if record.get("what") == "final" and counts and len(ev.identity_finals) < 20:
                ev.identity_finals.append(record)
        elif kind == "plugin_refused":
            said = f"{str(record.get('name'))[:200]} = {str(record.get('value'))[:300]}"
            if said not in ev.plugins_refused and len(ev.plugins_refused) < 50:
                ev.plugins_refused.append(said)
        elif kind == "event":
            # every event that can make a run tampered is kept; the minor ones up to a cap
            if str(record.get("event")) in TAMPER_EVENTS or str(record.get("event")) in WRITE_EVENTS:
                severe += 1
                if severe <= MAX_EVENTS:
                    ev.events.append(record)
            elif minor < MAX_EVENTS:
                minor += 1
                ev.events.append(record)
        elif not counts:
            continue
        elif kind == "report" and isinstance(test_id, str):
            ev.reports.setdefault(node_id(test_id[:4096]), {})[str(record.get("when"))] = record
        elif kind == "raised" and isinstance(test_id, str):
            ev.raised.setdefault(node_id(test_id[:4096]), []).append(record)
        elif kind == "session":
            ev.session = record
        elif kind == "results_file":
            ev.results_file = record
    if bad:
        ev.notes.append(f"{bad} evidence lines were not JSON objects")
    if severe > MAX_EVENTS:
        ev.notes.append(f"{severe} monitor events that can make a run tampered; the first {MAX_EVENTS} judged")
    return ev


def node_id(reported: str) -> str:
    """A test id as the outcome plugin reported it, spelled as the results file spells it.

    pytest before 4 puts a node for the class instance, named ``()``, between a class and
    its methods (``path::Class::()::test``, nested: ``path::A::()::B::()::test``); its own
    JUnit writer leaves that node out, and so do pytest 4 and later. Only the path part
    counts: a parametrisation (``[...]``) is kept as it is."""
    head, bracket, params = reported.partition("[")
    if "::()" not in head:
        return reported
    return "::".join(part for part in head.split("::") if part != "()") + bracket + params


#: ``h<n>\t`` (the collector's header of connection n) or ``<n>\t`` (a record it received)
_FRAMED = re.compile(rb"(h?)([0-9]{1,9})\t")
MAX_EVENTS = 2000


def code_raised(ev: Evidence, model_files: frozenset[str]) -> frozenset[str]:
    """Ids whose skip or xfail was raised with a frame in a file the model changed."""
    out = set()
    for test_id, records in ev.raised.items():
        for record in records:
            files = record.get("files") if isinstance(record.get("files"), list) else []
            if any(relative(f) in model_files for f in files[:64]):
                out.add(test_id)
    return frozenset(out)


def xpassed(ev: Evidence) -> frozenset[str]:
    """Ids that passed *as expected failures* (an xpass: pytest's ``passed`` report of a test
    with an xfail mark, sympy's ``XPass``), which the results file records as passed."""
    out = {test_id for test_id, phases in ev.reports.items()
           if (phases.get("call") or {}).get("outcome") == "passed" and (phases.get("call") or {}).get("xfail")}
    out |= {test_id for test_id, records in ev.raised.items() if any(r.get("status") == "xpass" for r in records)}
    return frozenset(out)


def plugin_status(phases: dict[str, dict]) -> TestStatus | None:
    """The status pytest itself concluded from a test's reports."""
    status = None
    for when in ("setup", "call", "teardown"):
        record = phases.get(when)
        if record is None:
            continue
        outcome, xfail = record.get("outcome"), bool(record.get("xfail"))
        if outcome == "failed":
            now = TestStatus.FAILED if when == "call" else TestStatus.ERROR
        elif outcome == "skipped":
            now = TestStatus.XFAIL if xfail else TestStatus.SKIPPED
        elif outcome == "passed" and when == "call":
            now = TestStatus.PASSED
        else:
            continue
        status = now if status is None else TestStatus.worst(status, now)
    return status


@dataclass
class RuntimeVerdict:
    tampered: str | None
    ambiguous: str | None
    flags: list[str]
    details: dict
    infrastructure: str | None = None       # the harness's own set-up did not hold


def judge_evidence(ev: Evidence, statuses: dict[str, TestStatus], graded: tuple[str, ...],
                   model_files: frozenset[str], sealed_infra: bool, runner_project: bool,
                   plugin_expected: bool) -> RuntimeVerdict:
    """Seal, provenance, monitor and report-consistency checks (see the module docstring)."""
    flags, details, tampered, ambiguous, infra = [], {}, [], None, None
    launcher = ev.launcher or {}
    if launcher.get("expected_mismatch"):
        infra = f"files the harness put in place differ before the run: {launcher['expected_mismatch'][:10]}"
    changed = launcher.get("seal_changed") or []
    if changed:
        flags.append("sealed_files_changed")
        details["sealed_files_changed"] = changed[:50]
        tampered.append(f"sealed files changed during the run: {changed[:5]}")
    created = created_entries(launcher)
    if created.infra and sealed_infra:
        flags.append("infra_planted_during_run")
        details["infra_planted_during_run"] = created.infra
        tampered.append(f"test infrastructure created during the run: {created.infra}")
    if created.shadows:
        flags.append("shadow_planted_during_run")
        details["shadow_planted_during_run"] = created.shadows[:50]
        tampered.append(f"entries created during the run shadow sealed modules: {created.shadows[:5]}")
    if created.unsurveyed:
        flags.append("created_entries_unsurveyed")
        ambiguous = (f"the tests created more entries in sealed directories than were inspected "
                     f"({created.count}); a planted file among them cannot be ruled out")
    if ev.plugins_refused:
        # refused, so never loaded: the run is as the built environment would run it
        flags.append("plugin_refused")
        details["plugin_refused"] = ev.plugins_refused
    unchecked = [str(e)[:300] for e in (launcher.get("post_run_errors") or [])[:5]]
    if launcher.get("complete") is False or unchecked:
        # what the tests left stopped the launcher's own checks (a tree too deep to walk...):
        # the tested code's doing, and what the checks would have found is unknown
        flags.append("post_run_checks_incomplete")
        details["post_run_checks_incomplete"] = unchecked or ["the launcher stopped after the tests ran"]
        ambiguous = ambiguous or ("the checks after the tests did not finish: "
                                  f"{'; '.join(unchecked) or 'the launcher stopped after the tests ran'}")
    purge = launcher.get("bytecode_removed") if isinstance(launcher.get("bytecode_removed"), dict) else {}
    if purge.get("truncated"):
        flags.append("bytecode_unsurveyed")
        ambiguous = ambiguous or ("the working copy could not be walked to the end before the tests "
                                  "(bytecode the model planted cannot be ruled out)")
    if launcher.get("protected_hardlinks") == 0:
        flags.append("hardlinks_unprotected")   # links to sealed files still change their fingerprints

    results = launcher.get("results") or {}
    if results.get("present") and plugin_expected and ev.boot is not None:
        claimed = (ev.results_file or {}).get("sha256")
        if ev.results_file is None:
            flags.append("results_without_session")
            tampered.append("a results file exists but the runner never stated writing it")
        elif claimed != results.get("sha256"):
            flags.append("results_rewritten")
            tampered.append("the results file was rewritten after the runner wrote it")

    identity = judge_identity(ev, bool(results.get("present")) and plugin_expected)
    flags += identity.flags
    details.update(identity.details)
    if identity.tampered and not runner_project:
        tampered.append(identity.tampered)
    if identity.ambiguous:
        ambiguous = ambiguous or identity.ambiguous

    monitor_hits: dict[str, list[str]] = {}
    for record in ev.events:
        event = str(record.get("event", ""))[:80]
        detail = str(record.get("detail", ""))[:200]
        if event in WRITE_EVENTS:
            target = _first_path(detail)
            if target.startswith("/harness"):
                event = "write_harness_files"
            elif target.startswith("/") and not target.startswith("/testbed"):
                continue  # /tmp and the like: the tests' business
            elif event == "open":
                event = "write_working_copy"
        tamper_class = event in TAMPER_EVENTS or event == "write_harness_files"
        if not asked_by_model(record, model_files, tamper_class):
            continue
        file, line = culprit(record) or ("", None)
        where = f"{relative(file) or file}:{line}"
        monitor_hits.setdefault(event, []).append(f"{where} {detail}".strip())
    if monitor_hits:
        details["monitor"] = {k: v[:20] for k, v in sorted(monitor_hits.items())}
        for event in sorted(monitor_hits):
            flags.append("monitor_" + event.replace(".", "_"))
            if (event in TAMPER_EVENTS or event == "write_harness_files") and not runner_project:
                tampered.append(f"the code under test called {event} ({monitor_hits[event][0]})")
    if plugin_expected and ev.boot is None and (launcher.get("tests") or {}).get("exit_code") is not None:
        flags.append("monitor_not_loaded")
    channel = launcher.get("channel") if isinstance(launcher.get("channel"), dict) else {}
    if channel.get("truncated"):
        # what the stream would have shown past its cap is unknown: a flood of records must
        # not push the monitor's or the runner's out of sight
        flags.append("evidence_truncated")
        ambiguous = ambiguous or (f"the evidence stream reached its cap ({channel.get('bytes')} bytes): "
                                  "what was sent after it is unknown")
    if ev.processes:  # which processes ran the bootstrap (the collector's view of each connection)
        details["evidence_processes"] = [
            {"connection": n, "pid": p.get("pid"), "ppid": p.get("ppid"), "argv": (p.get("argv") or [])[:4]}
            for n, p in sorted(ev.processes.items())[:20]]

    if plugin_expected and ev.boot is not None and ev.reports:
        disagree = []
        runner_view = runner_statuses(ev, graded)
        for test_id in graded:
            junit, plugin = statuses.get(test_id), runner_view.get(test_id)
            if junit is not None and plugin is None:
                disagree.append(f"{test_id}: results {junit.value}, runner reported nothing")
            elif junit is not None and plugin is not None and _differ(junit, plugin):
                disagree.append(f"{test_id}: results {junit.value}, runner {plugin.value}")
        if disagree:
            flags.append("results_disagree_with_runner")
            details["results_disagree_with_runner"] = disagree[:50]
            ambiguous = f"the results file and the runner's own reports disagree: {disagree[:3]}"
    return RuntimeVerdict("; ".join(tampered) or None, ambiguous, flags, details, infra)


@dataclass
class IdentityVerdict:
    flags: list[str]
    details: dict
    tampered: str | None = None
    ambiguous: str | None = None


def judge_identity(ev: Evidence, results_expected: bool) -> IdentityVerdict:
    """The runner's outcome-deciding bindings (``_harness_identity``): any found changed is
    tampering; a bootstrap that carries the registry but a results file with no comparison
    made when it was written leaves the outcomes unproven (see the module docstring)."""
    flags: list[str] = []
    details: dict = {}
    out = IdentityVerdict(flags, details)
    if ev.rebound:
        flags.append("runner_rebound")
        details["runner_rebound"] = ev.rebound[:50]
        out.tampered = f"the runner's outcome-deciding bindings were changed during the run: {ev.rebound[:5]}"
    boot = ev.boot or {}
    if results_expected and "identity" in boot and ev.results_file is not None:
        checked = [f.get("checked") for f in ev.identity_finals if isinstance(f.get("checked"), int)]
        if boot.get("identity") is not True or not checked or max(checked) <= 0:
            flags.append("runner_identity_unchecked")
            why = ("the bootstrap ran without the identity registry" if boot.get("identity") is not True else
                   "the runner's bindings were never compared when the results were written" if not checked else
                   "no runner binding was captured before the tests ran")
            details["runner_identity_unchecked"] = why
            out.ambiguous = f"the runner's identity is unproven: {why}"
    return out


@dataclass
class Created:
    """What the tests created in sealed directories, judged: ``infra`` (directory -> names),
    ``shadows`` ("path (beside sealed.py)"), how many entries, and whether the survey
    stopped before the end."""

    infra: dict[str, list[str]]
    shadows: list[str]
    count: int
    unsurveyed: bool


def created_entries(launcher: dict) -> Created:
    """Judge the launcher's survey (``created``), or, in evidence of earlier runs, the new
    names of the sticky directories (``new_entries``)."""
    infra: dict[str, list[str]] = {}
    shadows: list[str] = []
    survey = launcher.get("created")
    if isinstance(survey, dict):
        for entry in survey.get("watched") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                continue
            path = entry["path"][:4096]
            directory, _, name = path.rpartition("/")
            direct = entry.get("direct") is True
            if name in PLANTED_ANYWHERE or (direct and (name in INFRA_NAMES or name.endswith(".pth"))):
                infra.setdefault(directory, []).append(name)
            if direct and isinstance(entry.get("beside"), str):
                shadows.append(f"{path} (beside {entry['beside'][:4096]})")
        count = survey.get("count") if isinstance(survey.get("count"), int) else 0
        return Created(infra, shadows, count, survey.get("truncated") is True)
    for directory, names in (launcher.get("new_entries") or {}).items():
        hits = [n for n in names if isinstance(n, str) and (n in INFRA_NAMES or n.endswith(".pth"))]
        if hits:
            infra[str(directory)] = hits
    return Created(infra, shadows, 0, False)


def _first_path(detail: str) -> str:
    """The first quoted string of a recorded ``repr(args)`` (the path an event names)."""
    for quote in ("'", '"'):
        start = detail.find(quote)
        if start >= 0:
            end = detail.find(quote, start + 1)
            return detail[start + 1:end if end > 0 else None]
    return ""


def runner_statuses(ev: Evidence, graded: tuple[str, ...]) -> dict[str, TestStatus]:
    """The runner's own statuses, with graded ids that were cut at a space matched the way
    the results file's are (:func:`harness.grading.parsers.alias_truncated_ids`)."""
    from harness.grading.parsers import ParsedResults, alias_truncated_ids
    parsed = ParsedResults(statuses={t: s for t, phases in ev.reports.items()
                                     if (s := plugin_status(phases)) is not None})
    alias_truncated_ids(parsed, graded)
    return parsed.statuses


def _differ(a: TestStatus, b: TestStatus) -> bool:
    groups = ({TestStatus.PASSED}, {TestStatus.FAILED, TestStatus.ERROR}, {TestStatus.SKIPPED}, {TestStatus.XFAIL})
    return next(i for i, g in enumerate(groups) if a in g) != next(i for i, g in enumerate(groups) if b in g)
