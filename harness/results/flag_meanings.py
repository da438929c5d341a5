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
     "a file the patch changed wrote to the harness's files or rebound the runner: the run is tampered."),
    (("gc_", "sys_settrace", "sys_setprofile", "sys__current_frames", "sys_addaudithook", "sys_monitoring_",
      "ctypes_cdata", "ctypes_addressof", "ctypes_string_at", "ctypes_call_function"),
     "a file the patch changed walked the interpreter's objects, traced other frames or read memory through "
     "ctypes: the run is tampered (a flag only in a test runner's own repository)."),
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
    return FLAG_MEANINGS.get(flag, "see docs/SECURITY.md, \"Flags reference\"")
