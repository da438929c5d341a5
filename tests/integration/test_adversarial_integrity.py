"""The adversarial suite, part two: the classes of issue 11, from the corpus the package
ships (``harness.integrity.corpus``, also what ``harness audit`` runs).

Every attack is generated against a demo instance from its repository at the base
commit and runs as one attempt of one prediction of that instance (they share its
image), all in one batch. None may be resolved, and each must leave the evidence its
:class:`~harness.integrity.corpus.CorpusAttack` names. The class-9 tests feed the CLI
bad input at the boundary.

``HARNESS_UNDER_TEST=/path/to/a/checkout`` runs the same batch and the same CLI calls
through another checkout's ``harness`` (in a subprocess): pointed at a checkout of the
code before issue 11, these tests fail; see docs/SECURITY.md for the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.inputs.demo import DEMO_DIR
from harness.integrity import audit
from harness.integrity.corpus import CorpusAttack, build_corpus, payload
from harness.integrity.corpus.target import make_target
from tests.conftest import leftover_containers
from tests.patchgen import base_file, demo_instance, demo_paths, edit, write_predictions

UNDER_TEST = os.environ.get("HARNESS_UNDER_TEST")
BASES = ("harness-demo__calcly-1", "harness-demo__inventory-1")
CLASSES = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "unread-code", "size-cap", "canary-pairing", "code-loading",
           "compiled", "runner-rebinding", "reinstall"}
RUN_ID = "adversarial-integrity"


def harness_cli(*args: str, cache: Path) -> tuple[int, str]:
    """``harness ARGS`` from this checkout (in-process) or from HARNESS_UNDER_TEST."""
    full = [*args, "--cache-dir", str(cache), "--quiet"]
    if UNDER_TEST:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", *full], cwd=UNDER_TEST, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": UNDER_TEST}, timeout=3600)
        return proc.returncode, proc.stdout + proc.stderr
    from harness.cli import main
    try:
        return main(full), ""
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0), ""


def payload_text(name: str) -> str:
    return (Path(__file__).resolve().parent.parent / "adversarial" / "extra" / name).read_text()


def extra_attacks(base: str) -> list[CorpusAttack]:
    """Attacks for the sealed tests and the runtime monitor that the generic corpus does
    not cover on every instance."""
    library = "calcly/stats.py" if base.startswith("harness-demo__calcly") else "inventory/stock.py"
    read = lambda p: base_file(base, p)  # noqa: E731
    rewrite = payload_text("rewrite_from_library.py.in")
    walker = "_walk = [type(o).__name__ for o in getattr(__import__('g' + 'c'), 'get_' + 'objects')()][:1]\n"
    shifted = "".join(chr(ord(c) + 1) for c in walker)
    # runner access no scan can see: the code is data no folder undoes (each character
    # shifted by one), exec'd under a made-up site-packages file name: only the monitor sees it
    hidden = ("\n\n_blob = " + repr(shifted) + "\n"
              "exec(compile(''.join(chr(ord(c) - 1) for c in _blob),"
              " '/opt/harness/venv/lib/python3.11/site-packages/six.py', 'exec'))\n")
    return [
        CorpusAttack("rewrite-from-library", "6", "library code rewrites the sealed test files at import",
                     edit(base, {library: read(library) + rewrite}), base, evidence=("ATTACK-SEAL errno 13",)),
        CorpusAttack("hidden-gc-walk", "monitor", "a gc walk from data exec'd under a site-packages file name",
                     edit(base, {library: read(library) + hidden}), base, reasons=frozenset({"tampered"}),
                     flags=("monitor_gc_get_objects",)),
    ]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, cache_dir, engine):
    work = tmp_path_factory.mktemp("adversarial-integrity")
    attacks: dict[str, list[CorpusAttack]] = {}
    for base in BASES:
        target = make_target(demo_instance(base), lambda p, b=base: base_file(b, p), demo_paths(base))
        attacks[base] = [a for a in build_corpus(target) if a.klass in CLASSES] + extra_attacks(base)
    index = audit.write_predictions(work / "predictions.jsonl", attacks)
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions",
                               str(work / "predictions.jsonl"), "--instance-ids", *BASES, "--timeout", "30",
                               "--max-workers", "2", "--run-id", RUN_ID, "--output-dir", str(work / "runs"),
                               cache=cache_dir)
    assert code == 0, output[-3000:]
    return work / "runs" / RUN_ID, index


def _cases():
    out = []
    for base in BASES:
        target = make_target(demo_instance(base), lambda p, b=base: base_file(b, p), demo_paths(base))
        attacks = [a for a in build_corpus(target) if a.klass in CLASSES] + extra_attacks(base)
        out += [pytest.param(base, n, a, id=f"{a.klass}-{a.slug}-{base.split('__')[1]}")
                for n, a in enumerate(attacks, 1)]
    return out


@pytest.mark.parametrize("base,attempt,attack", _cases())
def test_issue11_attack_is_not_resolved(corpus_run, base, attempt, attack):
    root, index = corpus_run
    assert index[(base, attempt)].slug == attack.slug
    directory = root / base / f"attempt-{attempt}"
    report = json.loads((directory / "report.json").read_text())
    output = (directory / "test_output.txt").read_text(errors="replace") if (directory / "test_output.txt").exists() \
        else ""
    resolved, problems = audit.check(attack, report, output)
    why = (f"{attack.slug} ({attack.what}): status={report['status']} reason={report['error_reason']} "
           f"flags={report['integrity']['flags']} detail={(report['error_detail'] or '')[:300]!r}")
    assert not resolved, why
    assert problems == "", f"{problems}: {why}"


def test_issue11_batch_leaves_nothing_behind(corpus_run, engine):
    # this run directory's scope only: another session may run this module (same run id) now
    from harness.run.batch import run_scope
    from harness.engine.sandbox import LABEL_RUN_DIR
    root, _ = corpus_run
    left = [o for o in leftover_containers(engine, RUN_ID)
            if (getattr(o, "labels", None) or o.attrs.get("Labels") or {}).get(LABEL_RUN_DIR) == run_scope(root)]
    assert left == []


# --------------------------------------------------------------------------- class 9: bad input

def _instances(tmp_path: Path, **changes) -> Path:
    record = dict(demo_instance("harness-demo__calcly-1"), **changes)
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(demo_instance("harness-demo__textkit-1")) + "\n")
    return path


@pytest.mark.parametrize("bad_id", ["..", "x" * 300, "harness.log", "summary.json", "SUMMARY.JSON"])
def test_bad_instance_id_is_refused_naming_the_record(tmp_path, cache_dir, engine, bad_id):
    instances = _instances(tmp_path, instance_id=bad_id)
    out = tmp_path / "out"
    code, output = harness_cli("run", "--instances", str(instances), "--predictions", "gold", "--run-id", "ids",
                               "--output-dir", str(out), cache=cache_dir)
    assert code == 0, output[-2000:]
    summary = json.loads((out / "ids" / "summary.json").read_text())
    assert summary["resolved_ids"] == ["harness-demo__textkit-1"]
    assert list(summary["input_errors"]) and "instance_id" in next(iter(summary["input_errors"].values()))
    written = {p.name for p in out.iterdir()}
    assert written == {"ids"}, written          # nothing beside the run directory
    assert not (tmp_path / "report.json").exists() and not (out / "report.json").exists()


def test_duplicate_instance_ids_are_refused_naming_both_records(tmp_path, cache_dir, engine):
    """Two records with one id: neither is graded (no report.json that the summary would
    contradict), the summary names both lines, the rest of the batch is graded."""
    calcly, textkit = demo_instance("harness-demo__calcly-1"), demo_instance("harness-demo__textkit-1")
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in (calcly, textkit, dict(calcly, version="other"))))
    out = tmp_path / "out"
    code, output = harness_cli("run", "--instances", str(instances), "--predictions", "gold", "--run-id", "dups",
                               "--output-dir", str(out), cache=cache_dir)
    assert code == 0, output[-2000:]
    summary = json.loads((out / "dups" / "summary.json").read_text())
    assert summary["resolved_ids"] == ["harness-demo__textkit-1"]
    message = summary["input_errors"]["harness-demo__calcly-1"]
    assert "duplicate" in message and "line 1" in message and "line 3" in message, message
    assert not (out / "dups" / "harness-demo__calcly-1").exists()


@pytest.mark.parametrize("option,value", [("--timeout", "-1"), ("--max-workers", "0")])
def test_numeric_option_out_of_range_is_refused_before_anything_runs(tmp_path, cache_dir, option, value):
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                               option, value, "--run-id", "range", "--output-dir", str(tmp_path / "out"),
                               cache=cache_dir)
    assert code == 2
    assert not (tmp_path / "out").exists()


def test_lone_surrogate_in_a_patch_does_not_stop_the_batch(tmp_path, cache_dir, engine):
    preds = tmp_path / "p.jsonl"
    good = demo_instance("harness-demo__textkit-1")["patch"]
    preds.write_text(json.dumps({"instance_id": "harness-demo__calcly-1", "model_name_or_path": "m",
                                 "model_patch": "diff --git a/x b/x\n+\ud800\n"}) + "\n"
                     + json.dumps({"instance_id": "harness-demo__textkit-1", "model_name_or_path": "m",
                                   "model_patch": good}) + "\n")
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                               "--instance-ids", "harness-demo__calcly-1", "harness-demo__textkit-1",
                               "--run-id", "surrogate", "--output-dir", str(tmp_path / "out"), cache=cache_dir)
    assert code == 0, output[-2000:]
    summary = json.loads((tmp_path / "out" / "surrogate" / "summary.json").read_text())
    assert summary["resolved_ids"] == ["harness-demo__textkit-1"]
    assert summary["error_reasons"] == {"harness-demo__calcly-1": "patch_rejected"}


def test_non_utf8_predictions_file_is_a_clear_error(tmp_path, cache_dir):
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(b'{"instance_id": "harness-demo__calcly-1", "model_name_or_path": "m", "model_patch": "\xff"}\n')
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                               "--run-id", "utf8", "--output-dir", str(tmp_path / "out"), cache=cache_dir)
    assert code == 2
    if not UNDER_TEST:
        return  # the in-process message goes to the captured stderr, checked at unit level
    assert "not UTF-8" in output and "Traceback" not in output


@pytest.mark.parametrize("run_id", ["../../escaped", "ABSOLUTE"])
def test_run_id_cannot_leave_the_output_directory(tmp_path, cache_dir, run_id):
    out = tmp_path / "deep" / "er" / "out"
    absolute = tmp_path / "absolute-run-id"
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                               "--instance-ids", "harness-demo__calcly-1",
                               "--run-id", str(absolute) if run_id == "ABSOLUTE" else run_id,
                               "--output-dir", str(out), cache=cache_dir)
    assert code == 2, output[-2000:]
    assert not (tmp_path / "deep" / "escaped").exists() and not absolute.exists()


def test_thousands_of_long_paths_are_the_models_doing(tmp_path, cache_dir, engine):
    """A patch creating many deeply nested conftest.py files: graded against the model
    (never a harness error, never retried)."""
    segment = "d" * 200
    files = {f"f{i}/{'/'.join([segment] * 10)}/conftest.py": "X = 1\n" for i in range(1000)}
    patch = "".join(f"--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+X = 1\n" for p in files)
    preds = write_predictions(tmp_path / "p.jsonl", {"harness-demo__calcly-1": patch})
    code, output = harness_cli("run", "--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                               "--instance-ids", "harness-demo__calcly-1", "--run-id", "argv",
                               "--output-dir", str(tmp_path / "out"), cache=cache_dir)
    assert code == 0, output[-2000:]
    report = json.loads((tmp_path / "out" / "argv" / "harness-demo__calcly-1" / "report.json").read_text())
    assert report["error_origin"] == "model", report["error_detail"][:500]
    assert report["attempts"] == []


def test_payloads_ship_with_the_package():
    assert "pytest.xfail" in payload("body_xfail.py.in")


def test_harness_audit_prints_the_table_and_exits_by_resolution(tmp_path, cache_dir, engine, capsys):
    """`harness audit` on one demo instance, class 1 only (quick: the conftests are restored
    away or the patch rejected): the table, audit.json, and exit status 0. Since issue 36 a
    C-quoted name is read as git reads it, so the quoted conftest is restored, not refused."""
    code, out = harness_cli("audit", "--instance-ids", "harness-demo__calcly-1", "--classes", "1", "--output-dir",
                            str(tmp_path), "--run-id", "audit", cache=cache_dir)
    out += capsys.readouterr().out
    assert code == 0, out
    summary = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert summary["attacks"] == 3 and summary["resolved"] == 0 and summary["unexpected"] == []
    assert "| 1 | quoted-conftest | harness-demo__calcly-1 | NO | patch_touched_test_infra | ok |" in out
    assert "| 1 | context-conftest | harness-demo__calcly-1 | INVALID (patch_rejected) |" in out
