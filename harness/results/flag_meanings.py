"""What each integrity flag means, in one sentence a reader of an instance page needs, and
whether it is a **flag** (something a reader should look at) or a **note** (what happened,
nothing against the run). The pages show the sentence beside each; docs/SECURITY.md "Flags
reference" is the full list with the defences behind them. A flag not listed here is shown
with a pointer there, and as a flag: only what is listed in :data:`NOTES` is a note.

Why two kinds: a badge on most honest runs teaches a reader to ignore badges. At 05f6f0f
44 of Lite's 138 reference runs carried ``canary_unavailable`` (their tests have no exact
literal to mutate), which says only that one check was not possible. Notes say what the
harness did or could not do on an honest path (restored tests, dropped stubs, a canary that
could not be planted); they never change a verdict, and neither do flags: the verdict is
``report.json``'s, decided by the grading and integrity rules alone. The report's
``integrity.flags`` list keeps both kinds: the split is a reading of it, here.

The monitor's ``monitor_<event>`` flags stay flags: the event came from a file the patch
changed, and code the patch controls calling ``compile``, ``exec`` or ``sys._getframe`` is
what a forgery would do to escape the static scan or reach a test's frame. Honest fixes of
code that generates code (pytest's assertion rewriter, sympy's ``lambdify``) do it too, and
the sentence says so, with what checked the run anyway.
"""

from __future__ import annotations

from harness.integrity.evidence import TAMPER_EVENTS
from harness.integrity.scan_rules import TAMPER as SCAN_TAMPER

FLAG_MEANINGS: dict[str, str] = {
    "canary_unavailable": "no canary could be planted: canaries are mutated copies of the test files' own tests "
                          "with an exact check of a literal (an assert ==, assertEqual), and these files have none. "
                          "The run is graded as usual; it only lacks this check against forged results.",
    "canaries_off": "canaries were switched off for this run (the spec's canaries: 0): graded as usual, without "
                    "that check against forged results.",
    "canary_disproved": "a canary did not fail with the reference patch: it proves nothing and was dropped.",
    "canary_ok_xfail": "a canary was an expected failure beside an expected-failure original, as its source declares: "
                       "nothing against the run.",
    "canary_ok_skipped": "a canary was skipped as its original was: nothing against the run.",
    "canary_unproven": "a canary accused the run, but no reference run proved it can fail.",
    "canary_missing": "a canary went missing although its file has results: with a reference run proving it can "
                      "fail, the run is tampered; without, unproven.",
    "canary_passed_with_original": "a canary (a test changed so it must fail) passed beside its passing original, "
                                   "which honest code cannot do: tampered when a reference run proved it fails.",
    "canary_raised_by_code": "a canary's skip or xfail was raised by the code under test: the run is tampered.",
    "canary_skipped_alone": "a canary was skipped while its original was not: tampered when a reference run proved "
                            "it fails.",
    "canary_xfail_alone": "a canary was an expected failure while its original was not: tampered when a reference "
                          "run proved it fails.",
    "canary_undeclared_skip": "a canary was skipped, which its pristine source does not declare: tampered when a "
                              "reference run proved it fails.",
    "canary_undeclared_xfail": "a canary was an expected failure its pristine source does not declare: tampered "
                               "when a reference run proved it fails.",
    "canary_undeclared_xpass": "a canary passed unexpectedly where its source declares an expected failure: "
                               "tampered when a reference run proved it fails.",
    "canary_not_run": "a canary did not run, nor did anything else of its file.",
    "canary_coincidence": "a canary passed while its original did not: compared with the reference run.",
    "perturbed_passed": "a graded test changed in place so it must fail passed: tampered when a reference run "
                        "proved the change makes it fail.",
    "perturbed_skipped": "a graded test changed in place so it must fail was skipped: tampered when a reference "
                         "run proved the change makes it fail.",
    "perturbed_missing": "a graded test changed in place went missing from the perturbed run.",
    "perturbed_raised_by_code": "a perturbed test's skip or xfail was raised by the code under test: the run is "
                                "tampered.",
    "perturbation_unavailable": "no graded test could be changed in place for the perturbed second run: graded "
                                "as usual, without that check.",
    "perturbed_disproved": "a test changed in place did not fail with the reference patch: it proves nothing and "
                           "was dropped.",
    "perturbed_unproven": "a test changed in place accused the run, but no reference run proved the change makes "
                          "it fail.",
    "perturbed_run_failed": "the perturbed second run could not be had: graded on the first run alone.",
    "history_not_stripped": "the sandbox's git history was not the one commit the harness exports (it must be).",
    "collection_error": "a test module failed to import or collect; its tests never ran.",
    "dataset_ids_ignored": "the record lists ids that name no test (fragments of log lines); they are not graded.",
    "patch_touched_tests": "the patch changed test files; they were restored to the test patch's version before "
                           "the tests ran.",
    "patch_touched_test_infra": "the patch changed test infrastructure (conftest.py, setup.cfg, tox.ini, ...); it "
                                "was restored before the tests ran.",
    "build_touched_tests": "building the patched tree changed test files; they were restored before the tests ran.",
    "build_touched_test_infra": "building the patched tree changed test infrastructure; it was restored before "
                                "the tests ran.",
    "patch_hunks_already_present": "hunks of the patch were already in the tree (an edit the environment makes "
                                   "before the agent starts, carried into the diff): applied as no-ops, the rest "
                                   "of the patch as usual.",
    "patch_binary_stub_dropped": "the patch named a binary file without its content (`Binary files ... differ`): "
                                 "it carries no bytes and was dropped; the rest of the patch was applied.",
    "patch_symlink_dropped": "the patch added a symbolic link; it was dropped, so nothing it points at can redirect "
                             "what grading reads; the rest of the patch was applied.",
    "patch_shadows_module": "the patch creates a module or package named like one the tests or the runner import "
                            "(it could be imported in their place).",
    "patch_references_test_runner": "the patch reaches into the test runner's internals.",
    "runner_rebound": "a binding that decides outcomes (a reporter's or result class's method, the runner's report "
                      "machinery) was found changed: the run is tampered (a flag only in a test runner's own "
                      "repository, whose fix may change them).",
    "runner_identity_unchecked": "the runner's bindings could not be compared when the results were written.",
    "sealed_files_changed": "a file sealed for the run (the tests, the runner) changed while the tests ran.",
    "infra_planted_during_run": "the tests left a file a runner would load (a conftest.py, a .pth, ...) in a "
                                "sealed directory.",
    "shadow_planted_during_run": "the tests left, in a sealed directory, a module that would be imported in place "
                                 "of a sealed one.",
    "results_disagree_with_runner": "the results file and the runner's own reports disagree on a graded test: "
                                    "the run cannot be graded on them.",
    "hardlinks_unprotected": "hard links to sealed files could not be protected: their fingerprints are checked "
                             "all the same.",
    "build_shadows_module": "building the patched tree created a module named like one the tests or the runner "
                            "import.",
    "scan_incomplete": "(reports of earlier versions) a file too large to scan was not scanned; such files are "
                       "now refused.",
    "results_rewritten": "the results file was rewritten after the runner wrote it.",
    "results_without_session": "a results file exists, but no runner stated writing it.",
    "plugin_refused": "a test-runner plugin the environment did not have at build time was refused.",
    "post_run_checks_incomplete": "a check after the tests (the survey of what they left) did not finish.",
    "bytecode_unsurveyed": "the working copy could not be walked to the end before the tests: planted bytecode "
                           "cannot be ruled out.",
    "created_entries_unsurveyed": "what the tests created could not be surveyed to the end.",
    "scan_tokenized": "a changed file could not be parsed, so the static scan read its tokens instead.",
    "exit_code_mismatch": "the test runner's exit code disagrees with the results it reported.",
    "outcome_raised_by_code": "a graded skip or xfail was raised by the code under test, not by the test.",
    "outcome_undeclared": "a graded test was skipped, an expected failure or an unexpected pass that its pristine "
                          "tests do not declare: in a run of the reference patch this is recorded only; in any other "
                          "run it is held against the run.",
    "outcome_undeclared_like_reference": "a graded test had an outcome its pristine source does not declare, and "
                                         "the reference patch's run had the same one: counted as there.",
    "outcome_undeclared_unproven": "a graded test had an outcome its pristine source does not declare, and no "
                                   "reference run says whether that outcome is the environment's.",
    "ambiguous_results": "contradictory results were reported for one test.",
    "results_over_limit": "the results were over a parsing cap and were not read.",
    "skipped_under_cpu_cap": "a graded test was skipped under the --cpus cap.",
    "collected_fewer_than_control": "this run collected fewer graded tests than the reference control.",
    "failed_like_control": "this run failed the way the reference control failed (the environment's fault).",
    "monitor_not_loaded": "the runtime monitor did not start in the test process: events the code under test "
                          "raised were not seen.",
    "evidence_truncated": "the evidence stream reached its cap: what was sent after it is unknown.",
}

#: what happened on an honest path; never held against the run (the module's docstring says why)
NOTES: frozenset[str] = frozenset({
    "canary_unavailable", "canaries_off", "canary_disproved", "canary_ok_xfail", "canary_ok_skipped",
    "perturbation_unavailable", "perturbed_disproved", "dataset_ids_ignored",
    "patch_touched_tests", "patch_touched_test_infra", "build_touched_tests", "build_touched_test_infra",
    "patch_hunks_already_present", "patch_binary_stub_dropped", "patch_symlink_dropped",
    "outcome_undeclared_like_reference",
})

_CHECKED = ("The runtime checks (seals, the runner's identity, canaries where planted) judged the run all the same; "
            "this says where to look.")
#: monitor_<event> by what the event is (the monitor's events: harness/integrity/evidence.py)
_MONITOR_MEANINGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("write_harness_files", "runner_rebind"),
     "a file the patch changed wrote to the harness's files or rebound the runner: the run is tampered (a flag "
     "only in a test runner's own repository, whose changed code is the runner)."),
    (tuple(sorted(e.replace(".", "_") for e in TAMPER_EVENTS)),
     "a file the patch changed walked the interpreter's objects, traced other frames, hooked auditing or reached "
     "memory through ctypes: the run is tampered (a flag only in a test runner's own repository)."),
    (("compile", "exec", "marshal_loads", "code___new__"),
     "a file the patch changed compiled or ran code made while the tests ran. Code that generates code does this "
     "honestly (pytest's assertion rewriter, sympy's lambdify, conditions given as strings); the static scan cannot "
     "read such code. " + _CHECKED),
    (("sys__getframe",),
     "a file the patch changed read the call stack (sys._getframe). Logging, deprecation and test helpers do this "
     "honestly; a frame walk can also reach a test's own variables. " + _CHECKED),
    (("subprocess_", "os_system", "os_exec", "os_posix_spawn", "os_spawn", "os_fork", "os_kill", "os_killpg"),
     "a file the patch changed started or signalled a process while the tests ran. " + _CHECKED),
    (("ctypes_dlopen", "ctypes_dlsym"),
     "a file the patch changed loaded native code through ctypes while the tests ran. " + _CHECKED),
    (("os_", "shutil_", "write_working_copy", "open"),
     "a file the patch changed wrote, moved, removed or linked files in the working copy while the tests ran. "
     + _CHECKED),
)


#: patch_<scan category> (harness/integrity/scan.py's categories; those in its TAMPER make the
#: run tampered unless the repository is a test runner's own, the rest only flag it)
_SCAN_MEANINGS: dict[str, str] = {
    "runner_internals": "names the test runner's internals",
    "gc_walk": "walks the interpreter's objects (gc)",
    "trace_hook": "installs a trace or profile hook",
    "audit_hook": "installs an audit hook",
    "decoded_exec": "runs code decoded from data or built by hand",
    "code_loading": "loads code from a file or bytes outside the import system",
    "compiled_literal": "holds compiled code or a binary as a literal",
    "output_bypass": "writes past the runner's output (os._exit, the real stdout, fds 1/2)",
    "frame_walk": "reads the call stack's frames",
    "ctypes": "uses ctypes or cffi",
    "dynamic_code": "runs code built at run time (exec, eval, compile)",
    "dynamic_import": "imports a computed name",
    "import_hook": "steers the import system",
    "exit_hook": "registers an exit hook",
}


def is_note(flag: str) -> bool:
    """Whether ``flag`` is a note (what happened, nothing against the run) rather than a flag."""
    return flag in NOTES


def split_flags(flags: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``flags`` as (flags, notes), each in its given order."""
    return tuple(f for f in flags if not is_note(f)), tuple(f for f in flags if is_note(f))


def flag_meaning(flag: str) -> str:
    """The sentence for ``flag`` (a pointer to the reference for one not listed here)."""
    if flag in FLAG_MEANINGS:
        return FLAG_MEANINGS[flag]
    if flag.startswith("monitor_"):
        event = flag[len("monitor_"):]
        for prefixes, meaning in _MONITOR_MEANINGS:
            if any(event == p or (p.endswith("_") and event.startswith(p)) for p in prefixes):
                return meaning
        return ("a file the patch changed raised this runtime event while the tests ran (the instance's "
                "integrity evidence lists where). " + _CHECKED)
    if flag.startswith("build_monitor_"):
        return "while the patched tree was built (its build step ran the model's code): " + flag_meaning(flag[6:])
    category = flag[len("patch_"):] if flag.startswith("patch_") else ""
    if category in _SCAN_MEANINGS:
        consequence = ("the run is tampered (a flag only in a test runner's own repository)" if category in SCAN_TAMPER
                       else "honest patches do this too; shown so a reader can look")
        return f"the static scan found that the patch {_SCAN_MEANINGS[category]}: {consequence}."
    return "see docs/SECURITY.md, \"Flags reference\""
