"""Issue 36 (the fourth red-team round): each class's property on the demo set, through the
real engine, in one batch of attempts of ``harness-demo__calcly-1`` (plus a unittest
repository made here for class 1's unittest half, and the command line for class 6).

* class 1: library code makes the failing FAIL_TO_PASS tests expected failures without a
  frame of its own on any traceback (an xfail ``pytestmark`` set on the test modules while
  they are imported; values whose ``==`` raises ``pytest.xfail`` from C; unittest's
  ``__unittest_expecting_failure__`` set on the test methods) -> ``tampered``, the
  undeclared outcome named; the reference patch stays FULL with no such flag;
* class 2: install metadata spelled as the loaders accept it (``Calcly.EGG-INFO``) is
  restored away;
* class 3: a tree 2,500 levels deep left in a sealed test directory -> ``ambiguous_results``
  (origin model, never retried), not ``container_died`` (harness) after three attempts;
* class 4: a library package marker the fix changes stays (the demo's tests are not inside
  the package; the reverted case is matplotlib's: tests/unit/test_reference_plans.py);
* class 5: an honest fix with a non-ASCII file name (git C-quotes it) and one written with
  other prefixes (``x/``, ``y/``) are graded FULL, not ``patch_rejected``;
* class 6: bad predictions at the command line.

``HARNESS_UNDER_TEST=/path/to/a/checkout`` runs the same batch through another checkout's
``harness`` (in a subprocess): at 6eb3dd5 the class-1 attacks are FULL, the class-5 fixes
``patch_rejected``, the deep tree ``container_died`` (see docs/SECURITY.md for the record).
The real instances of each runner: tests/integration/test_integrity_round4_real.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.inputs.demo import DEMO_DIR
from harness.integrity.corpus import build_corpus
from harness.integrity.corpus.target import make_target
from tests.patchgen import base_file, demo_instance, demo_paths, edit

UNDER_TEST = os.environ.get("HARNESS_UNDER_TEST")
BASE = "harness-demo__calcly-1"
LIB, OPS, INIT = "calcly/stats.py", "calcly/ops.py", "calcly/__init__.py"


def harness_cli(*args: str, cache: Path, quiet: bool = True) -> tuple[int, str]:
    """``harness ARGS`` from this checkout (in-process) or from HARNESS_UNDER_TEST."""
    full = [*args, "--cache-dir", str(cache), *(["--quiet"] if quiet else [])]
    if UNDER_TEST:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", *full], cwd=UNDER_TEST, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": UNDER_TEST}, timeout=3600)
        return proc.returncode, proc.stdout + proc.stderr
    from harness.cli import main
    try:
        return main(full), ""
    except SystemExit as exc:
        return int(exc.code or 0), ""


def _fixed() -> dict[str, str]:
    """The reference fix, as whole files."""
    from harness.integrity.testpatch import apply_test_patch
    from harness.patches import patch_files
    record = demo_instance(BASE)
    files = apply_test_patch(record["patch"], patch_files(record["patch"]),
                             lambda p: (base_file(BASE, p).encode(), 0o644) if base_file(BASE, p) else None).files
    return {p: data.decode() for p, (data, _) in files.items()}


DEEP_TREE = '''

_H_DONE = []


def _h_deep(where, depth):
    import os
    fd = os.open(where, os.O_RDONLY)
    for _ in range(depth):
        try:
            os.mkdir("d", dir_fd=fd)
        except FileExistsError:
            pass
        sub = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(fd)


def _h_once():
    if not _H_DONE:
        _H_DONE.append(1)
        _h_deep("tests", 2500)
'''
QUOTED = ('diff --git "a/calcly/donn\\303\\251es.py" "b/calcly/donn\\303\\251es.py"\nnew file mode 100644\n'
          '--- /dev/null\n+++ "b/calcly/donn\\303\\251es.py"\n@@ -0,0 +1 @@\n+UNITS = ("m", "s")\n')


def _attacks() -> dict[str, str]:
    fixed = _fixed()
    record = demo_instance(BASE)
    target = make_target(record, lambda p: base_file(BASE, p), demo_paths(BASE))
    corpus = {a.slug: a.patch for a in build_corpus(target) if a.klass == "undeclared-outcome"}
    ops = base_file(BASE, OPS) or ""
    prefixed = record["patch"].replace("diff --git a/", "diff --git x/").replace(" b/calcly", " y/calcly").replace(
        "--- a/", "--- x/").replace("+++ b/", "+++ y/")
    return {
        "gold": record["patch"],
        "xfail-module-marks": corpus["xfail-module-marks"],
        "xfail-from-c": corpus["xfail-from-c"],
        "metadata-spelling": record["patch"] + edit(BASE, {
            "Calcly.EGG-INFO/PKG-INFO": "Metadata-Version: 2.1\nName: calcly-extra\nVersion: 1.0\n",
            "Calcly.EGG-INFO/entry_points.txt": "[pytest11]\ncalcly_extra = calcly.extra\n",
            "calcly/extra.py": "print('CALCLY-EXTRA loaded')\n"}),
        "deep-tree": edit(BASE, {LIB: fixed[LIB], OPS: ops.replace('    """Return the sum of *a* and *b*."""\n',
                                                                   '    """Return the sum of *a* and *b*."""\n'
                                                                   "    _h_once()\n") + DEEP_TREE}),
        "quoted-name": record["patch"] + QUOTED,
        "other-prefixes": prefixed,
        "library-marker": record["patch"] + edit(BASE, {INIT: (base_file(BASE, INIT) or "") + "# the fix's note\n"}),
    }


@pytest.fixture(scope="module")
def demo_batch(tmp_path_factory, cache_dir, engine):
    work = tmp_path_factory.mktemp("round4")
    attacks = _attacks()
    predictions = work / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": BASE, "model_name_or_path": "round4", "attempt": n,
                                               "model_patch": patch}) + "\n"
                                   for n, patch in enumerate(attacks.values(), 1)))
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions",
                               str(predictions), "--instance-ids", BASE, "--timeout", "60", "--max-workers", "2",
                               "--run-id", "round4", "--output-dir", str(work / "runs"), cache=cache_dir)
    assert code == 0, output[-3000:]
    root = work / "runs" / "round4" / BASE
    return {name: _report(root / f"attempt-{n}") for n, name in enumerate(attacks, 1)}


def _report(directory: Path) -> dict:
    report = json.loads((directory / "report.json").read_text())
    output = directory / "test_output.txt"
    report["_output"] = output.read_text(errors="replace") if output.exists() else ""
    return report


def _why(report: dict) -> str:
    return (f"status={report['status']} reason={report['error_reason']} flags={report['integrity']['flags']} "
            f"detail={(report['error_detail'] or '')[:400]!r}")


def test_the_reference_patch_declares_every_outcome_it_has(demo_batch):
    gold = demo_batch["gold"]
    assert (gold["status"], gold["error_reason"]) == ("FULL", None), _why(gold)
    assert not [f for f in gold["integrity"]["flags"] if "undeclared" in f], _why(gold)
    # test_float_precision is XFAIL by its own pristine mark: declared, counted as before
    assert gold["integrity"]["declared"].get("tests/test_stats.py::TestMean::test_float_precision") == "sx"


@pytest.mark.parametrize("attack", ["xfail-module-marks", "xfail-from-c"])
def test_class1_an_expected_failure_the_pristine_tests_do_not_declare_is_tampering(demo_batch, attack):
    report = demo_batch[attack]
    assert not report["resolved"], _why(report)
    assert (report["status"], report["error_reason"]) == ("INVALID", "tampered"), _why(report)
    assert {"outcome_undeclared", "canary_undeclared_xfail"} & set(report["integrity"]["flags"]), _why(report)
    undeclared = report["integrity"].get("outcome_undeclared") or {}
    assert undeclared.get("tests/test_stats.py::TestMedian::test_unsorted_input") == "xfail", _why(report)
    # the attack really ran: the unfixed F2P tests were XFAIL, not failed
    assert "XFAIL tests/test_stats.py::TestMedian::test_unsorted_input" in report["_output"]


def test_class2_install_metadata_in_any_spelling_is_restored(demo_batch):
    report = demo_batch["metadata-spelling"]
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)
    touched = report["integrity"].get("patch_touched_test_infra") or []
    assert "Calcly.EGG-INFO/entry_points.txt" in touched, _why(report)
    assert "CALCLY-EXTRA loaded" not in report["_output"]


def test_class3_a_tree_too_deep_to_walk_is_the_models_doing_never_a_harness_error(demo_batch):
    report = demo_batch["deep-tree"]
    assert (report["status"], report["error_reason"], report["error_origin"]) == (
        "INVALID", "ambiguous_results", "model"), _why(report)
    assert "created_entries_unsurveyed" in report["integrity"]["flags"], _why(report)
    assert not report.get("attempts"), report.get("attempts")   # not retried as infrastructure


def test_class4_a_library_package_marker_the_fix_changes_stays(demo_batch):
    report = demo_batch["library-marker"]
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)
    assert INIT in report["integrity"]["model_files"]
    assert INIT not in (report["integrity"].get("patch_touched_test_infra") or [])


@pytest.mark.parametrize("attack", ["quoted-name", "other-prefixes"])
def test_class5_every_path_form_git_writes_is_read_as_git_reads_it(demo_batch, attack):
    report = demo_batch[attack]
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)
    if attack == "quoted-name":
        assert "calcly/données.py" in report["integrity"]["model_files"]


# --------------------------------------------------------------------------- class 1: unittest

def test_class1_unittest_expected_failures_the_tests_do_not_declare(tmp_path, cache_dir, engine):
    """The unittest runner (the in-container reporter; Django's runner is the same reporter:
    tests/integration/test_integrity_round4_real.py): library code makes the FAIL_TO_PASS
    method an expected failure through ``__unittest_expecting_failure__``; the reference
    patch's own ``@expectedFailure``, ``@skip`` and ``self.skipTest`` still count."""
    from tests.integration.test_reporter_origins import ID, LIBRARY, SPEC, T, _make
    repo, record, _ = _make(tmp_path)
    lib = "tinycalc/__init__.py"
    target = make_target(record, lambda p: (repo / p).read_text() if (repo / p).exists() else None,
                         [str(p.relative_to(repo)) for p in repo.rglob("*.py")], runner="unittest")
    attack = next(a.patch for a in build_corpus(target) if a.slug == "expecting-failure-attribute")
    assert "tinycalc/__init__.py" in attack and LIBRARY.splitlines()[0] in (repo / lib).read_text()
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "example__tinycalc.yaml").write_text(SPEC)
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": ID, "model_name_or_path": "round4", "attempt": n,
                                               "model_patch": p}) + "\n"
                                   for n, p in enumerate((record["patch"], attack), 1)))
    code, output = harness_cli("run", "--instances", str(instances), "--specs", str(specs), "--repo",
                               f"example/tinycalc={repo}", "--no-clone", "--predictions", str(predictions),
                               "--max-workers", "1", "--run-id", "round4-unittest", "--output-dir",
                               str(tmp_path / "runs"), cache=cache_dir)
    assert code == 0, output[-3000:]
    gold = _report(tmp_path / "runs" / "round4-unittest" / ID / "attempt-1")
    attacked = _report(tmp_path / "runs" / "round4-unittest" / ID / "attempt-2")
    assert (gold["status"], gold["error_reason"]) == ("FULL", None), _why(gold)
    assert not [f for f in gold["integrity"]["flags"] if "undeclared" in f], _why(gold)
    assert (attacked["status"], attacked["error_reason"]) == ("INVALID", "tampered"), _why(attacked)
    assert (attacked["integrity"].get("outcome_undeclared") or {}).get(T + "test_halve_odd") == "xfail", \
        _why(attacked)


# --------------------------------------------------------------------------- class 6: bad input

def _one_line_exit_2(code: int, output: str, *words: str) -> None:
    assert code == 2, output[-2000:]
    if UNDER_TEST:   # the command's own stderr (in-process, pytest captured it)
        lines = [line for line in output.splitlines() if line.startswith("harness:")]
        assert len(lines) == 1 and "Traceback" not in output, output[-2000:]
        assert all(w in lines[0] for w in words), lines


@pytest.mark.parametrize("text,why", [("[" * 100_000 + "]" * 100_000, "nested too deeply"),
                                      ('{"instance_id": "x", "attempt": ' + "9" * 5000 + "}", "integer")])
def test_class6_unreadable_predictions_are_one_line_and_exit_2(tmp_path, cache_dir, capsys, text, why):
    preds = tmp_path / "p.jsonl"
    preds.write_text(text + "\n")
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                               "--run-id", "bad", "--output-dir", str(tmp_path / "out"), cache=cache_dir)
    err = output if UNDER_TEST else capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and why in lines[0] and "line 1" in lines[0], lines[:5]


def test_class6_a_bad_record_is_named_never_counted_and_a_malformed_copy_refuses_both(tmp_path, cache_dir, engine,
                                                                                     capsys):
    good = demo_instance("harness-demo__textkit-1")["patch"]
    hostile = "[/bold][red]m\x1b]0;owned\x07\x1b[2J"
    lines = [{"instance_id": 7, "model_name_or_path": hostile, "model_patch": ""},
             {"instance_id": "harness-demo__textkit-1", "model_name_or_path": hostile, "model_patch": good},
             {"instance_id": BASE, "model_name_or_path": hostile, "model_patch": demo_instance(BASE)["patch"]},
             {"instance_id": BASE, "model_name_or_path": hostile, "model_patch": 3}]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in lines))
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                               "--instance-ids", BASE, "harness-demo__textkit-1", "--run-id", "records",
                               "--output-dir", str(tmp_path / "out"), cache=cache_dir, quiet=False)
    printed = output if UNDER_TEST else "".join(capsys.readouterr())
    assert code == 0, printed[-3000:]
    run = tmp_path / "out" / "records"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total_instances"] == 2                    # the record with id 7 is no instance
    assert summary["resolved_ids"] == ["harness-demo__textkit-1"]
    assert summary["error_ids"] == [BASE] and not (run / BASE / "report.json").exists()
    assert "line 3" in summary["input_errors"][BASE] and "line 4" in summary["input_errors"][BASE]
    assert (run / "report.html").exists()
    assert "\x1b" not in printed and "\x07" not in printed and "[/bold][red]m" in printed
