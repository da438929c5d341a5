"""What each integrity flag means, in one sentence a reader of an instance page needs
(the page shows it beside the flag; docs/SECURITY.md "Flags reference" is the full list
with the defences behind them). A flag not listed here is shown with a pointer there."""

from __future__ import annotations

FLAG_MEANINGS: dict[str, str] = {
    "canary_unavailable": "no canary could be planted: canaries are mutated copies of the test files' own tests "
                          "with an exact check of a literal (an assert ==, assertEqual), and these files have none. "
                          "The run is graded as usual; it only lacks this check against forged results.",
    "canaries_off": "canaries were switched off for this run (the spec's canaries: 0): graded as usual, without "
                    "that check against forged results.",
    "history_not_stripped": "the sandbox's git history was not the one commit the harness exports (it must be).",
    "collection_error": "a test module failed to import or collect; its tests never ran.",
    "dataset_ids_ignored": "the record lists ids that name no test (fragments of log lines); they are not graded.",
    "patch_touched_tests": "the patch changed test files; they were restored to the test patch's version before "
                           "the tests ran.",
    "patch_touched_test_infra": "the patch changed test infrastructure (conftest.py, setup.cfg, tox.ini, ...); it "
                                "was restored before the tests ran.",
    "patch_references_test_runner": "the patch reaches into the test runner's internals.",
    "exit_code_mismatch": "the test runner's exit code disagrees with the results it reported.",
    "outcome_raised_by_code": "a graded skip or xfail was raised by the code under test, not by the test.",
    "ambiguous_results": "contradictory results were reported for one test.",
    "results_over_limit": "the results were over a parsing cap and were not read.",
    "skipped_under_cpu_cap": "a graded test was skipped under the --cpus cap.",
    "collected_fewer_than_control": "this run collected fewer graded tests than the reference control.",
    "failed_like_control": "this run failed the way the reference control failed (the environment's fault).",
    "canary_disproved": "a canary did not fail with the reference patch: it proves nothing and was dropped.",
    "canary_unproven": "a canary accused the run, but no reference run proved it can fail.",
}


def flag_meaning(flag: str) -> str:
    """The sentence for ``flag`` (a pointer to the reference for one not listed here)."""
    return FLAG_MEANINGS.get(flag, "see docs/SECURITY.md, \"Flags reference\"")
