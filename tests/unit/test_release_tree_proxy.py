"""scripts/release_tree_proxy.py: which Verified record is graded on a release tree (the first
whose reference patch and test patch both apply, in a fixed order), how the graded record is
labelled, and how a run's report becomes the summary's per-test outcome."""

from __future__ import annotations

import pytest

from tests.gitrepo import diff_with, git
from tests.scripts import loaded_script


@pytest.fixture(scope="module")
def proxy():
    with loaded_script("release_tree_proxy") as module:
        yield module


LINES = "".join(f"line {n}\n" for n in range(1, 31))


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "mod.py").write_text(LINES)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "release")
    return path


def test_a_patch_that_applies_cleanly_has_no_offsets_and_leaves_the_tree_alone(proxy, repo):
    patch = diff_with(repo, "mod.py", LINES.replace("line 10\n", "line ten\n"))
    check = proxy.check_apply(repo, patch)
    assert check.applies and check.offsets == [] and check.error == ""
    assert (repo / "mod.py").read_text() == LINES and git(repo, "status", "--porcelain") == ""


def test_a_patch_made_on_another_tree_applies_with_its_offset_reported(proxy, repo):
    patch = diff_with(repo, "mod.py", LINES.replace("line 20\n", "line twenty\n"))
    # the release has three more lines above the hunk than the tree the patch was made on
    (repo / "mod.py").write_text("extra a\nextra b\nextra c\n" + LINES)
    git(repo, "commit", "-qam", "later release")
    check = proxy.check_apply(repo, patch)
    assert check.applies
    assert check.offsets == ["Hunk #1 succeeded at 20 (offset 3 lines)."]


def test_a_patch_whose_context_is_gone_is_rejected_with_gits_words(proxy, repo):
    patch = diff_with(repo, "mod.py", LINES.replace("line 10\n", "line ten\n"))
    (repo / "mod.py").write_text(LINES.replace("line 9\nline 10\nline 11\n", "rewritten\n"))
    git(repo, "commit", "-qam", "rewrite")
    check = proxy.check_apply(repo, patch)
    assert not check.applies
    assert "patch failed: mod.py" in check.error and "already in the tree" not in check.error


def test_a_fix_the_release_already_has_is_named_as_such(proxy, repo):
    fixed = LINES.replace("line 10\n", "line ten\n")
    patch = diff_with(repo, "mod.py", fixed)
    (repo / "mod.py").write_text(fixed)
    git(repo, "commit", "-qam", "the fix was released")
    check = proxy.check_apply(repo, patch)
    assert not check.applies and check.error.startswith("already in the tree (applies in reverse)")
    assert not proxy.check_apply(repo, "").applies


def record(number: int, version: str = "2.2", repo: str = "django/django") -> dict:
    return {"instance_id": f"{repo.replace('/', '__')}-{number}", "repo": repo, "version": version,
            "base_commit": f"{number:040x}", "created_at": f"2019-01-{number % 28 + 1:02d}",
            "patch": f"fix {number}", "test_patch": f"tests {number}",
            "FAIL_TO_PASS": [f"test_fix_{number}"], "PASS_TO_PASS": ["test_a", "test_b"],
            "log_parser": "parse_log_django"}


def test_candidates_are_the_repositorys_version_in_the_order_of_their_numbers(proxy):
    records = [record(11099), record(9871), record(10097), record(10999, version="3.0"),
               record(10098, repo="other/repo")]
    assert [r["instance_id"] for r in proxy.candidates(records, "django/django", "2.2")] == \
        ["django__django-9871", "django__django-10097", "django__django-11099"]   # 9871 first: numbers, not text
    only = proxy.candidates(records, "django/django", "2.2", "django__django-10097")
    assert [r["instance_id"] for r in only] == ["django__django-10097"]
    assert proxy.candidates(records, "django/django", "2.2", "django__django-10999") == []   # another version


def test_the_first_record_whose_patch_and_test_patch_both_apply_is_chosen(proxy):
    records = [record(1), record(2), record(3), record(4)]
    verdicts = {"fix 1": proxy.ApplyCheck(False, error="already in the tree (applies in reverse)"),
                "tests 1": proxy.ApplyCheck(True),
                "fix 2": proxy.ApplyCheck(True, ["Hunk #1 succeeded at 12 (offset 2 lines)."]),
                "tests 2": proxy.ApplyCheck(False, error="error: patch failed: tests/x.py:3"),
                "fix 3": proxy.ApplyCheck(True, ["Hunk #2 succeeded at 40 (offset -1 lines)."]),
                "tests 3": proxy.ApplyCheck(True)}
    asked = []

    def check(patch):
        asked.append(patch)
        return verdicts[patch]

    chosen, tried = proxy.choose(records, check)
    assert chosen is records[2]
    assert "fix 4" not in asked                      # nothing after the chosen record is tried
    assert [t["instance_id"] for t in tried] == ["django__django-1", "django__django-2", "django__django-3"]
    assert tried[0]["rejected"] == "patch did not apply"
    assert tried[0]["errors"] == {"patch": "already in the tree (applies in reverse)"}
    assert tried[1]["rejected"] == "test_patch did not apply" and tried[1]["applies"] == {"patch": True,
                                                                                          "test_patch": False}
    assert tried[1]["offsets"] == {"patch": ["Hunk #1 succeeded at 12 (offset 2 lines)."]}
    assert "rejected" not in tried[2] and tried[2]["offsets"] == {"patch": ["Hunk #2 succeeded at 40 (offset -1 lines)."]}


def test_no_record_applying_chooses_none_and_reports_each(proxy):
    chosen, tried = proxy.choose([record(1), record(2)], lambda patch: proxy.ApplyCheck(False, error="no"))
    assert chosen is None and [t["rejected"] for t in tried] == ["patch and test_patch did not apply"] * 2
    summary = proxy.summarize("Django==2.2", "django/django@2.2", "f" * 40, [], None, tried, {}, "abc1234")
    assert summary["chosen"] is None and "no record of django/django@2.2" in summary["error"]
    assert proxy.summarize("Django==2.2", "django/django@2.2", "f" * 40, [], None, [], {}, "x")["error"] == \
        "no record of django/django@2.2 in the data"


def test_the_graded_record_is_the_real_one_on_the_release_commit_and_says_so(proxy):
    from harness.inputs.instances import parse_instance
    original = record(10097)
    kept = dict(original)
    graded = proxy.proxy_record(original, "a" * 40, "Django==2.1.15")
    assert original == kept                                          # the dataset's record is not changed
    assert graded["instance_id"] == "django__django-10097-release-tree" and graded["base_commit"] == "a" * 40
    assert {k: v for k, v in graded.items() if k not in ("instance_id", "base_commit", "release_tree")} == \
        {k: v for k, v in original.items() if k not in ("instance_id", "base_commit")}
    assert graded["release_tree"]["sdist"] == "Django==2.1.15"
    assert graded["release_tree"]["dataset_base_commit"] == original["base_commit"]
    instance = parse_instance(graded)                                # the loader takes it, the label kept
    assert instance.base_commit == "a" * 40 and instance.extra["release_tree"]["dataset_instance_id"] == \
        "django__django-10097"
    assert instance.extra["log_parser"] == "parse_log_django"


def test_a_reports_lists_become_passed_failed_and_missing_counts(proxy):
    rec = dict(record(5), FAIL_TO_PASS=["f1", "f2"], PASS_TO_PASS=["p1", "p2", "p3", "p4"])
    report = {"status": "NO", "error_reason": None, "missing": ["p4", "f2"],
              "tests_status": {"FAIL_TO_PASS": {"success": ["f1"], "failure": ["f2"]},
                               "PASS_TO_PASS": {"success": ["p1", "p2"], "failure": ["p3", "p4"]}},
              "image": {"interpreter": {"version": "3.6.15"}, "prepare_seconds": 12.5},
              "timings": {"tests": 3.0}}
    out = proxy.outcome(report, rec)
    assert out["status"] == "NO" and out["interpreter"] == "3.6.15" and out["prepare_seconds"] == 12.5
    assert out["FAIL_TO_PASS"] == {"listed": 2, "passed": 1, "failed": 0, "missing": 1,
                                   "failed_ids": [], "missing_ids": ["f2"]}
    assert out["PASS_TO_PASS"] == {"listed": 4, "passed": 2, "failed": 1, "missing": 1,
                                   "failed_ids": ["p3"], "missing_ids": ["p4"]}
    empty = proxy.outcome({"status": "INVALID", "error_reason": "suite_did_not_run", "error_detail": "x" * 2000}, rec)
    assert empty["FAIL_TO_PASS"]["failed"] == 2 and len(empty["error_detail"]) == 800


def test_a_summary_compacts_to_a_results_row_that_keeps_the_reference_runs_failures(proxy):
    rec = dict(record(7), FAIL_TO_PASS=["f1"], PASS_TO_PASS=["p1", "p2"])
    tried = [{"instance_id": "django__django-3", "rejected": "patch did not apply",
              "errors": {"patch": "already in the tree (applies in reverse)\nerror: ..."}},
             {"instance_id": "django__django-5", "rejected": "test_patch did not apply",
              "errors": {"test_patch": "error: patch failed: tests/x.py:3"}},
             {"instance_id": "django__django-7", "applies": {"patch": True, "test_patch": True},
              "offsets": {"patch": ["Hunk #1 succeeded at 5 (offset 1 line)."]}}]
    gold = proxy.outcome({"status": "NO", "missing": ["p2"], "tests_status": {
        "FAIL_TO_PASS": {"success": ["f1"]}, "PASS_TO_PASS": {"success": ["p1"]}}}, rec)
    empty = proxy.outcome({"status": "NO", "missing": [], "tests_status": {
        "FAIL_TO_PASS": {"success": []}, "PASS_TO_PASS": {"success": ["p1", "p2"]}}}, rec)
    summary = proxy.summarize("Django==2.1.15", "django/django@2.2", "a" * 40, [], rec, tried,
                              {"gold": gold, "empty": empty}, "abc1234")
    row = proxy.compact(summary)
    assert row["instance"] == "django__django-7" and row["harness_commit"] == "abc1234" and row["records_tried"] == 3
    assert row["rejected"] == {"django__django-3": "already released", "django__django-5": "test_patch did not apply"}
    assert row["offsets"] == {"patch": ["Hunk #1 succeeded at 5 (offset 1 line)."]}
    assert row["gold"]["PASS_TO_PASS"] == {"listed": 2, "passed": 1, "failed": 0, "missing": 1,
                                           "failed_ids": [], "missing_ids": ["p2"]}
    assert row["empty"]["FAIL_TO_PASS"] == {"listed": 1, "passed": 0, "failed": 1, "missing": 0}   # no ids kept


def test_collected_rows_are_ordered_by_version_and_render_as_table_lines(proxy, tmp_path):
    def summary(version, status, missing=()):
        rec = dict(record(10), version=version, FAIL_TO_PASS=["f1"], PASS_TO_PASS=["p1", "p2"])
        gold = proxy.outcome({"status": status, "missing": list(missing), "image": {"prepare_seconds": {"a": 10, "b": 2.4}},
                              "timings": {"tests": 3.2}, "tests_status": {
            "FAIL_TO_PASS": {"success": ["f1"]}, "PASS_TO_PASS": {"success": [t for t in ("p1", "p2") if t not in missing]}}},
            rec)
        tried = [{"instance_id": rec["instance_id"], "applies": {"patch": True, "test_patch": True},
                  "offsets": {"test_patch": ["Hunk #1 succeeded at 9 (offset 2 lines)."]}}]
        path = tmp_path / f"{version}.json"
        path.write_text(__import__("json").dumps(proxy.summarize(
            "Django==x", f"django/django@{version}", "a" * 40, [], rec, tried, {"gold": gold}, "abc1234")))
        return path

    out = tmp_path / "results.json"
    check = tmp_path / "check.json"     # a --check-only summary of a version no graded row has
    check.write_text(__import__("json").dumps(proxy.summarize("Django==z", "django/django@1.11", "b" * 40, [], None,
                                                            [{"instance_id": "django__django-7530", "rejected": "patch did not apply",
                                                              "errors": {"patch": "already in the tree (applies in reverse)"}}], {}, "c")))
    rows = proxy.collect(out, [summary("3.10", "FULL"), check, summary("3.2", "NO", missing=["p2"])])
    assert [r["spec"] for r in rows] == ["django/django@1.11", "django/django@3.2", "django/django@3.10"]
    written = __import__("json").loads(out.read_text())
    assert written["rows"] == rows[1:]                                                  # 3.2 before 3.10
    assert written["choices"] == [{"spec": "django/django@1.11", "sdist": "Django==z", "chosen": None,
                                   "records_tried": 1, "already_released": 1}]
    assert "| django 1.11 | Django==z | none applies |" in proxy.table_row(rows[0])
    rows = rows[1:]
    line = proxy.table_row(rows[0])
    assert line.startswith("| django 3.2 | Django==x | django__django-10 | patch + test patch (test_patch 1 hunk(s) offset) | **NO** |")
    assert "| 1/1 / - | 1/2 (1 missing) / - | 12 s + tests 3 s | abc1234 |" in line
    assert "not run" in line                                                            # no empty run in this summary
    none = proxy.table_row(proxy.compact(proxy.summarize("Django==y", "django/django@1.11", "b" * 40, [], None, [], {}, "c")))
    assert "none applies" in none


def test_an_empty_run_skipped_after_an_invalid_reference_says_so(proxy):
    rec = record(11)
    gold = proxy.outcome({"status": "INVALID", "error_reason": "environment_build_failed"}, rec)
    row = proxy.compact(proxy.summarize("Django==x", "django/django@2.2", "a" * 40, [], rec, [],
                                        {"gold": gold, "empty": {"skipped": "reference INVALID"}}, "c"))
    assert row["empty"] == {"skipped": "reference INVALID"}
    line = proxy.table_row(row)
    assert "| **INVALID** (environment_build_failed) | not run (reference INVALID) |" in line
    assert "0/1 (1 failed) / - |" in line


def test_a_release_that_is_not_name_equals_version_is_refused_before_anything_runs(proxy, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        proxy.main(["django/django", "4.2", "Django", "--check-only", "--work-dir", str(tmp_path / "w")])
    assert exit_.value.code == 2
    assert "expected NAME==VERSION, got 'Django'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_a_release_the_index_cannot_give_is_one_line_and_exit_2(proxy, capsys, monkeypatch, tmp_path):
    from harness.errors import ImageBuildError

    def no_such_release(sdist, work):
        raise ImageBuildError(f"{sdist} has neither a wheel for the target nor an sdist on the index")

    monkeypatch.setattr(proxy, "sdist_repository", no_such_release)  # the index is the fault injected
    code = proxy.main(["django/django", "4.2", "Django==0.0.0.1", "--check-only", "--work-dir", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip() == ("release_tree_proxy: Django==0.0.0.1: Django==0.0.0.1 has neither a wheel for the "
                           "target nor an sdist on the index")
