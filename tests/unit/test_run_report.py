"""The run report model (harness.results.run_report) and one instance's evidence
(harness.results.instance_detail): figures, classification of diffs, excerpts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.instance_detail import classify_diff, clean_text, excerpt, load_instance_detail
from harness.results.run_data import load_run, page_path
from harness.results.run_report import build_run_report, load_run_report
from harness.results.stats import wilson_interval
from tests.runs import write_synthetic_run


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return write_synthetic_run(tmp_path_factory.mktemp("runs"), "syn", 60, seed=3, no_prediction=4)


def test_rate_and_counts_match_the_summary(synthetic):
    summary = json.loads((synthetic / "summary.json").read_text())
    report = load_run_report(synthetic)
    assert report.resolved.denominator == summary["total_instances"] == 64
    assert report.resolved.successes == summary["resolved_instances"]
    assert (report.resolved.ci_low, report.resolved.ci_high) == wilson_interval(summary["resolved_instances"], 64)
    assert report.counts["no_prediction"] == 4
    assert report.counts["error"] == summary["error_instances"]
    total = sum(report.counts[k] for k in ("resolved", "unresolved", "error", "no_prediction"))
    assert total == report.counts["total"]
    statuses = dict(report.status_counts)
    assert statuses.pop("NO_PREDICTION") == 4
    assert statuses == summary["status_counts"]
    assert list(report.status_counts)[:2] == [s for s in ("FULL", "PARTIAL", "NO", "INVALID") if s in statuses][:2]


def test_repository_rows_partition_the_instances(synthetic):
    report = load_run_report(synthetic)
    assert sum(row.rate.denominator for row in report.repos) == report.resolved.denominator
    assert sum(row.rate.successes for row in report.repos) == report.resolved.successes
    for row in report.repos:
        members = [i for i in report.instances if i.repo == row.repo]
        assert row.rate.denominator == len(members)
        assert row.rate.successes == sum(i.resolved for i in members)
        assert sum(row.status_counts.values()) == len(members)


def test_origins_and_flags(synthetic):
    report = load_run_report(synthetic)
    summary = json.loads((synthetic / "summary.json").read_text())
    by_origin = {o.origin: o for o in report.origins}
    for origin, ids in summary["errors_by_origin"].items():
        assert (by_origin[origin].instances if origin in by_origin else 0) == len(ids)
    # the synthetic run's one flag, patch_touched_tests, is a note: on the instances' rows as a
    # note, in the integrity rows as a note, and no repository counts it as flagged
    noted = [i.instance_id for i in report.instances if i.notes]
    assert noted and not any(i.flags for i in report.instances)
    assert [(f.flag, f.instance_ids, f.note) for f in report.integrity] == [("patch_touched_tests", tuple(noted), True)]
    assert "restored" in report.integrity[0].meaning
    assert sum(row.flagged for row in report.repos) == 0


def test_flags_and_notes_are_told_apart_on_every_view(tmp_path):
    """A run with a note on one instance (canary_unavailable: no canary could be planted) and
    a flag on another (monitor_compile: changed code compiled code during the tests): the
    repository counts only the flag, the run page puts each in its own table with what it
    means, the instance page shows the note as a note, and the Markdown lists them apart."""
    from harness.grading.status import InstanceStatus
    from harness.results.report import InstanceResult, summarise
    from harness.views.html import render_run_report
    from harness.views.markdown import render_run_markdown
    from harness.views.site import write_instance_page
    run = tmp_path / "r"
    results = []
    for iid, flags in (("o__n-1", ["canary_unavailable"]), ("o__n-2", ["monitor_compile", "patch_touched_tests"])):
        (run / iid).mkdir(parents=True)
        result = InstanceResult(instance_id=iid, repo="o/n", model_name_or_path="m", status=InstanceStatus.FULL,
                                resolved=True, f2p_success=["t.py::a"], integrity_flags=flags)
        (run / iid / "report.json").write_text(json.dumps(result.to_report()))
        results.append(result)
    (run / "summary.json").write_text(json.dumps(summarise("r", "m", ["o__n-1", "o__n-2"], results, {})))
    report = load_run_report(run)
    assert [row.flagged for row in report.repos] == [1]
    rows = {i.instance_id: (i.flags, i.notes) for i in report.instances}
    assert rows == {"o__n-1": ((), ("canary_unavailable",)), "o__n-2": (("monitor_compile",), ("patch_touched_tests",))}
    assert [(f.flag, f.note) for f in report.integrity] == [
        ("monitor_compile", False), ("canary_unavailable", True), ("patch_touched_tests", True)]
    page = render_run_report(report)
    flag_table = page[page.index('id="flag-table"'):page.index('id="note-table"')]
    note_table = page[page.index('id="note-table"'):]
    assert "monitor_compile" in flag_table and "canary_unavailable" not in flag_table
    assert "lambdify" in flag_table  # what it means: honest code that generates code does this
    assert "canary_unavailable" in note_table and "patch_touched_tests" in note_table
    markdown = render_run_markdown(report)
    flags_md = markdown[markdown.index("## Integrity flags"):markdown.index("## Integrity notes")]
    assert "monitor_compile" in flags_md and "canary_unavailable" not in flags_md
    write_instance_page(run, "o__n-1", "r")
    instance_page = (run / "o__n-1" / "report.html").read_text()
    assert 'class="badge note">canary_unavailable' in instance_page
    assert 'class="badge flag"' not in instance_page and "No integrity flag." in instance_page


def test_phase_quartiles(synthetic):
    report = load_run_report(synthetic)
    phases = {p.phase: p for p in report.phases}
    assert list(phases)[-1] == "total"
    tests = sorted(json.loads(p.read_text())["timings"]["tests"] for p in synthetic.glob("*/report.json"))
    row = phases["tests"]
    assert (row.instances, row.minimum, row.maximum) == (60, tests[0], tests[-1])
    assert row.median == pytest.approx((tests[29] + tests[30]) / 2)
    assert row.q1 <= row.median <= row.q3


def test_rows_link_to_pages_and_keep_reasons(synthetic):
    report = load_run_report(synthetic)
    rows = {r.instance_id: r for r in report.instances}
    no_pred = rows["synthetic__nopred-0"]
    assert (no_pred.status, no_pred.page, no_pred.resolved) == ("NO_PREDICTION", None, False)
    graded = next(r for r in report.instances if r.status == "NO")
    assert graded.page == f"{graded.instance_id}/report.html"
    assert "F2P failed" in graded.reason or "P2P regressions" in graded.reason


def test_page_path_encodes_every_segment():
    assert page_path("a__b-1") == "a__b-1/report.html"
    assert page_path("a__b-1/attempt-2") == "a__b-1/attempt-2/report.html"
    assert page_path("javascript:alert(1)") == "javascript%3Aalert%281%29/report.html"


def test_attempt_layout_gets_a_pass_k_section(tmp_path):
    from tests.unit.test_compare import report as make_report, write_run
    run = write_run(tmp_path, "multi", {}, attempts={
        "o__r-1": [make_report("o__r-1", True, attempt=1), make_report("o__r-1", False, attempt=2)],
        "o__r-2": [make_report("o__r-2", False, attempt=1), make_report("o__r-2", False, attempt=2)]})
    report = build_run_report(load_run(run))
    assert report.attempts is not None and [row.k for row in report.attempts.pass_k] == [1, 2]
    row = next(r for r in report.instances if r.instance_id == "o__r-1")
    assert (row.attempts, row.attempts_resolved, row.page) == (2, 1, "o__r-1/attempt-1/report.html")


# --------------------------------------------------------------------------- diffs


def test_classify_diff_counts_hunks():
    diff = ("diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -3,4 +3,4 @@ def f():\n"
            " keep\n--- removed line that looks like a header\n+++ added line that looks like a header\n"
            " keep\n-old\n+new\n\\ No newline at end of file\n")
    lines, files, added, removed, cut = classify_diff(diff)
    kinds = [line.kind for line in lines]
    assert kinds == ["file", "meta", "meta", "meta", "hunk", "ctx", "del", "add", "ctx", "del", "add", "note"]
    assert files == ("x.py",) and (added, removed, cut) == (2, 2, 0)
    assert [(l.old, l.new) for l in lines[5:11]] == [(3, 3), (4, None), (None, 4), (5, 5), (6, None), (None, 6)]


def test_classify_diff_new_and_deleted_files_and_garbage():
    diff = ("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print(1)\n"
            "--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\nnot a diff line\n@@ broken @@\n")
    lines, files, added, removed, _ = classify_diff(diff)
    assert files == ("new.py", "gone.py")
    assert (added, removed) == (1, 1)
    assert [l.kind for l in lines][-2:] == ["meta", "meta"]


def test_classify_diff_caps_lines():
    diff = "@@ -1,0 +1,50 @@\n" + "".join(f"+{i}\n" for i in range(50))
    lines, _, added, _, cut = classify_diff(diff, max_lines=10)
    assert len(lines) == 10 and cut == 41 and added == 50


def test_excerpt_keeps_head_and_tail(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(b"H" * 100 + b"M" * 1000 + b"T" * 100)
    part = excerpt(path, head=100, tail=100)
    assert (part.head, part.tail, part.omitted, part.size) == ("H" * 100, "T" * 100, 1000, 1200)
    whole = excerpt(path, head=1000, tail=1000)
    assert whole.omitted == 0 and len(whole.head) == 1200 and whole.tail == ""
    assert excerpt(tmp_path / "absent.txt") is None


def test_clean_text_drops_ansi_and_shows_control_characters():
    assert clean_text("\x1b[31mred\x1b[0m ok\r\n\x00") == "red ok\n\ufffd"


def test_instance_detail_marks_missing_and_not_graded_tests(synthetic):
    report = load_run_report(synthetic)
    row = next(r for r in report.instances if r.status == "NO" and r.missing)
    directory = synthetic / row.instance_id
    record = json.loads((directory / "instance.json").read_text())
    record["FAIL_TO_PASS"].append("tests/test_x.py::names_no_test")
    (directory / "instance.json").write_text(json.dumps(record))
    detail = load_instance_detail(synthetic, row.instance_id, "syn")
    outcomes = {t.test_id: t.outcome for t in detail.tests}
    missing = json.loads((directory / "report.json").read_text())["missing"]
    assert [t for t, o in outcomes.items() if o == "missing"] == missing
    assert outcomes["tests/test_x.py::names_no_test"] == "not_graded"
    assert detail.verdict.startswith("Not resolved:")
    assert detail.patch is not None and detail.patch.added > 0 and detail.patch.files
    assert "report.json" in detail.raw_files and "results.xml" not in detail.raw_files


def test_every_flag_the_security_reference_names_has_its_sentence():
    """docs/SECURITY.md's "Flags reference" lists every flag name; each has the sentence the
    pages show beside it (harness/results/flag_meanings.py), not the pointer back to the docs
    (a name pattern such as monitor_<event> is checked by an instance of it)."""
    import re
    from harness.results.flag_meanings import flag_meaning
    text = (Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md").read_text()
    start = text.index("`history_not_stripped`, `patch_touched_tests`")
    end = text.find("\n\n", start)
    names = re.findall(r"`([a-z_<>]+)`", text[start:] if end < 0 else text[start:end])
    examples = {"patch_<scan category>": "patch_frame_walk", "build_monitor_<event>": "build_monitor_compile",
                "monitor_<event>": "monitor_exec"}
    assert len(names) > 60
    pointer = flag_meaning("no_such_flag")
    missing = [n for n in names if flag_meaning(examples.get(n, n)) == pointer]
    assert missing == []
