"""Issue 36 on a real instance of each runner (the demo set's batch:
tests/integration/test_integrity_round4.py).

* pytest, ``psf__requests-2317``: an xfail ``pytestmark`` set by library code on the test
  modules being imported (class 1) -> ``tampered``; install metadata spelled
  ``Requests.EGG-INFO`` with a ``pytest11`` entry point (class 2) is restored and its plugin
  never loads; the reference patch FULL, no undeclared outcome;
* sympy's runner, ``sympy__sympy-11400``: an exception class named ``XPass`` raised under
  the FAIL_TO_PASS tests, which sympy's runner reports as passes (class 1) -> ``tampered``;
  the fix beside an edit of ``sympy/printing/__init__.py``, the package above the tests
  (class 4) -> FULL, the file kept;
* Django's runner (the unittest reporter), Django 4.2.1's tree with ticket #34568
  (tests/integration/test_django_runner.py builds it): ``__unittest_expecting_failure__``
  set by library code on the FAIL_TO_PASS method (class 1) -> ``tampered``.

At 6eb3dd5 (the same patches through ``git archive 6eb3dd5``'s harness) the requests and the
sympy attacks are both FULL (requests with ``canary_ok_xfail``: the canaries xfailed beside
their xfailed originals accused nothing).
"""

from __future__ import annotations

import json
import pytest

from harness.integrity.corpus import build_corpus
from harness.integrity.corpus.target import make_target
from tests import realdata
from tests.integration.test_django_runner import django_instance  # noqa: F401  (the fixture: Django 4.2.1's tree)
from tests.integration.test_integrity_round4 import _report, _why, harness_cli

REQUESTS, SYMPY = "psf__requests-2317", "sympy__sympy-11400"


def _target(instance_id: str, runner: str):
    from harness.inputs.repos import GitDir
    record = realdata.record(instance_id)
    repo = GitDir(realdata.REPOS / (record["repo"].replace("/", "__") + ".git"))

    def read(path: str) -> str | None:
        data = repo.read_blob(record["base_commit"], path)
        return None if data is None else data.decode("utf-8", "replace")
    paths = [e.path for e in repo.ls_tree(record["base_commit"]) if e.type == "blob"]
    return record, read, make_target(record, read, paths, runner=runner)


def _corpus(target, slug: str) -> str:
    return next(a.patch for a in build_corpus(target) if a.slug == slug)


def _edit(read, edits: dict[str, str]) -> str:
    from harness.integrity.corpus import diffs
    return diffs.edit(read, edits)


@pytest.fixture(scope="module")
def real_batch(tmp_path_factory, cache_dir, engine):
    realdata.require()
    work = tmp_path_factory.mktemp("round4-real")
    record, read, target = _target(REQUESTS, "pytest")
    requests_attempts = {
        "gold": record["patch"],
        "xfail-module-marks": _corpus(target, "xfail-module-marks"),
        "metadata-spelling": record["patch"] + _edit(read, {
            "Requests.EGG-INFO/PKG-INFO": "Metadata-Version: 2.1\nName: requests-extra\nVersion: 1.0\n",
            "Requests.EGG-INFO/entry_points.txt": "[pytest11]\nrequests_extra = requests_extra_plugin\n",
            "requests_extra_plugin.py": "print('REQUESTS-EXTRA loaded')\n"}),
    }
    s_record, s_read, s_target = _target(SYMPY, "sympy")
    init = "sympy/printing/__init__.py"
    sympy_attempts = {
        "gold": s_record["patch"],
        "xpass-by-name": _corpus(s_target, "xpass-by-name"),
        "library-marker": s_record["patch"] + _edit(s_read, {init: (s_read(init) or "") + "# the fix's note\n"}),
    }
    lines = [{"instance_id": iid, "model_name_or_path": "round4", "attempt": n, "model_patch": patch}
             for iid, attempts in ((REQUESTS, requests_attempts), (SYMPY, sympy_attempts))
             for n, patch in enumerate(attempts.values(), 1)]
    predictions = work / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    instances = realdata.write_instances(work / "instances.jsonl", [REQUESTS, SYMPY])
    code, output = harness_cli("run", "--instances", str(instances), "--predictions", str(predictions),
                               "--repos-dir", str(realdata.REPOS), "--no-clone", "--timeout", "600",
                               "--max-workers", "2", "--run-id", "round4-real", "--output-dir", str(work / "runs"),
                               cache=cache_dir)
    assert code == 0, output[-3000:]
    root = work / "runs" / "round4-real"
    return ({name: _report(root / REQUESTS / f"attempt-{n}") for n, name in enumerate(requests_attempts, 1)},
            {name: _report(root / SYMPY / f"attempt-{n}") for n, name in enumerate(sympy_attempts, 1)})


def test_pytest_reference_is_full_and_an_undeclared_xfail_is_tampering(real_batch):
    requests, _ = real_batch
    gold = requests["gold"]
    assert (gold["status"], gold["error_reason"]) == ("FULL", None), _why(gold)
    assert not [f for f in gold["integrity"]["flags"] if "undeclared" in f], _why(gold)
    attack = requests["xfail-module-marks"]
    assert (attack["status"], attack["error_reason"]) == ("INVALID", "tampered"), _why(attack)
    assert {"outcome_undeclared", "canary_undeclared_xfail"} & set(attack["integrity"]["flags"]), _why(attack)
    assert "XFAIL" in attack["_output"]   # the attack really ran


def test_pytest_install_metadata_in_any_spelling_is_restored_and_loads_nothing(real_batch):
    requests, _ = real_batch
    report = requests["metadata-spelling"]
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)
    assert "Requests.EGG-INFO/entry_points.txt" in (report["integrity"].get("patch_touched_test_infra") or [])
    assert "REQUESTS-EXTRA loaded" not in report["_output"]


def test_sympy_reference_is_full_and_an_undeclared_xpass_is_tampering(real_batch):
    _, sympy = real_batch
    gold = sympy["gold"]
    assert (gold["status"], gold["error_reason"]) == ("FULL", None), _why(gold)
    assert not [f for f in gold["integrity"]["flags"] if "undeclared" in f], _why(gold)
    attack = sympy["xpass-by-name"]
    assert (attack["status"], attack["error_reason"]) == ("INVALID", "tampered"), _why(attack)
    undeclared = attack["integrity"].get("outcome_undeclared") or {}
    assert set(undeclared.values()) == {"xpass"} and set(undeclared) & set(realdata.record(SYMPY)["FAIL_TO_PASS"])


def test_sympy_a_package_marker_above_the_tests_is_library_code(real_batch):
    _, sympy = real_batch
    report = sympy["library-marker"]
    assert (report["status"], report["error_reason"]) == ("FULL", None), _why(report)
    assert "sympy/printing/__init__.py" in report["integrity"]["model_files"]
    assert "sympy/printing/__init__.py" not in (report["integrity"].get("patch_touched_test_infra") or [])


def test_django_runner_an_expected_failure_set_by_the_library_is_tampering(django_instance, tmp_path,  # noqa: F811
                                                                           cache_dir, engine):
    instances, repo = django_instance
    record = json.loads(instances.read_text())
    paths = [str(p.relative_to(repo)) for p in repo.rglob("*.py")]

    def read(path: str) -> str | None:
        target = repo / path
        return target.read_text() if target.is_file() else None
    attack = _corpus(make_target(record, read, paths, runner="django"), "expecting-failure-attribute")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"instance_id": record["instance_id"], "model_name_or_path": "round4",
                                       "model_patch": attack}) + "\n")
    code, output = harness_cli("run", "--instances", str(instances), "--repo", f"django/django={repo}", "--no-clone",
                               "--predictions", str(predictions), "--run-id", "round4-django", "--output-dir",
                               str(tmp_path / "runs"), cache=cache_dir)
    assert code == 0, output[-3000:]
    report = _report(tmp_path / "runs" / "round4-django" / record["instance_id"])
    assert (report["status"], report["error_reason"]) == ("INVALID", "tampered"), _why(report)
    f2p = record["FAIL_TO_PASS"][0]
    assert (report["integrity"].get("outcome_undeclared") or {}).get(f2p) == "xfail", _why(report)
