"""The django runner, parser, id convention and spec, end to end on a real Django tree.

The Django history is too large to mirror, so the instance is built from Django's own
sdists on PyPI (they carry tests/runtests.py and the whole suite): the base is Django
4.2.1, the reference patch is the real fix of ticket #34568 as released in 4.2.2
("makemigrations --update didn't respect the --name option"), and the test patch is the
regression test 4.2.2 added for it. Both patches are cut from the two sdists at test time
(nothing of Django is committed here). The instance uses images/specs/django__django.yaml
(version 4.2) unchanged.

The sdists are downloaded once with pip on the host and kept in the test cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

F2P = "test_makemigrations_update_custom_name (migrations.test_commands.MakeMigrationsTests)"
P2P = [
    "test_makemigrations_update (migrations.test_commands.MakeMigrationsTests)",
    # docstring labels: the dataset id is the docstring's first line (SWE-bench's parse_log_django)
    "`makemigrations --merge --dry-run` writes the merge migration file to",
    "makemigrations exits if it detects a conflict.",
    "Tests basic usage of the migrate command.",          # MigrateTests.test_migrate's docstring
]
FIXED_FILE = "django/core/management/commands/makemigrations.py"
TEST_FILE = "tests/migrations/test_commands.py"


def _sdist(cache: Path, version: str) -> Path:
    target = cache / "sdists" / f"Django-{version}.tar.gz"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
                               "--disable-pip-version-check", "-q", f"Django=={version}", "-d",
                               str(target.parent)], capture_output=True, text=True)
        if proc.returncode != 0 or not target.exists():
            pytest.fail(f"could not download Django {version} from PyPI: {proc.stderr[-2000:]}", pytrace=False)
    return target


def _extract(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    return dest / sdist.name[:-len(".tar.gz")]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def django_instance(cache_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("django")
    base = _extract(_sdist(cache_dir, "4.2.1"), root / "base")
    fixed = _extract(_sdist(cache_dir, "4.2.2"), root / "fixed")
    repo = root / "django"
    base.rename(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "Django 4.2.1 (sdist)")
    commit = _git(repo, "rev-parse", "HEAD").strip()

    def patch_of(path: str) -> str:
        shutil.copyfile(fixed / path, repo / path)
        diff = _git(repo, "diff", "--", path)
        _git(repo, "checkout", "--", path)
        return diff

    patch, test_patch = patch_of(FIXED_FILE), patch_of(TEST_FILE)
    assert "self.migration_name or leaf_migration.suggest_name()" in patch
    assert "def test_makemigrations_update_custom_name" in test_patch
    record = {"instance_id": "django__django-34568", "repo": "django/django", "base_commit": commit,
              "patch": patch, "test_patch": test_patch, "version": "4.2",
              "FAIL_TO_PASS": [F2P], "PASS_TO_PASS": P2P}
    instances = root / "instances.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    return instances, repo


def test_django_gold_is_full_and_empty_is_no(harness_run, django_instance):
    instances, repo = django_instance
    common = ("--instances", str(instances), "--repo", f"django/django={repo}", "--no-clone")
    gold = harness_run(*common, "--predictions", "gold", run_id="django-gold")
    report = gold.report("django__django-34568")
    assert (report["status"], report["error_reason"]) == ("FULL", None), report["error_detail"]
    assert report["parser"]["runner"] == "django" and report["parser"]["source"] == "junit"
    assert report["parser"]["id_convention"] == "django"
    # dotted labels derived from the test patch, after the spec's command (as SWE-bench ran it)
    tests = [c for c in report["commands"] if c["phase"] == "tests"][0]
    assert tests["argv"][-1].endswith("--parallel 1 migrations.test_commands")
    # no canary here: the file's checks are assertIn on output (not exact comparisons), and
    # the tests with exact literal checks are decorated (a decorator may skip or expect a
    # failure); a run without canaries says so rather than passing for proven
    assert report["integrity"]["canaries"] == [] and "canary_unavailable" in report["integrity"]["flags"]
    assert report["test_exit_code"] == 0   # every test of the module passes with the fix (and no canary fails)

    empty = harness_run(*common, "--predictions", "empty", run_id="django-empty")
    report = empty.report("django__django-34568")
    assert (report["status"], report["error_reason"]) == ("NO", None), report["error_detail"]
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == [F2P]
    assert sorted(report["tests_status"]["PASS_TO_PASS"]["success"]) == sorted(P2P)
    assert report["missing"] == []


def test_a_library_skip_hiding_a_django_regression_is_not_kept(harness_run, django_instance, tmp_path):
    """The real fix, plus makemigrations raising ``unittest.SkipTest`` on the path the P2P
    test ``test_makemigrations_update`` takes (``--update`` without ``--name``): without
    the outcome origins (Python 3.9: unittest reports the skip after the exception is
    gone, so the reporter takes it on its way through ``_Outcome.testPartExecutor``) the
    P2P test was SKIPPED, kept, and the run FULL."""
    instances, repo = django_instance
    record = json.loads(instances.read_text())
    subprocess.run(["git", "apply"], input=record["patch"], text=True, cwd=repo, check=True)
    try:
        fixed = (repo / FIXED_FILE).read_text()
        anchor = "    def write_to_last_migration_files(self, changes):\n"
        assert anchor in fixed
        (repo / FIXED_FILE).write_text(fixed.replace(anchor, anchor + (
            "        if not self.migration_name:\n            import unittest\n"
            "            raise unittest.SkipTest('updating a migration without a name is not supported')\n")))
        attack = _git(repo, "diff", "--", FIXED_FILE)
    finally:
        _git(repo, "checkout", "--", FIXED_FILE)
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"instance_id": "django__django-34568", "model_name_or_path": "attack",
                                       "model_patch": attack}) + "\n")
    run = harness_run("--instances", str(instances), "--repo", f"django/django={repo}", "--no-clone",
                      "--predictions", str(predictions), run_id="django-skip-attack")
    report = run.report("django__django-34568")
    assert not report["resolved"], report["status"]
    p2p = "test_makemigrations_update (migrations.test_commands.MakeMigrationsTests)"
    assert "outcome_raised_by_code" in report["integrity"]["flags"], report["integrity"]["flags"]
    assert p2p in report["integrity"]["outcome_raised_by_code"]
    assert p2p in report["tests_status"]["PASS_TO_PASS"]["failure"]
    assert report["integrity"]["skipped_or_xfailed"].get(p2p) == "SKIPPED"
    assert F2P in report["tests_status"]["FAIL_TO_PASS"]["success"]    # the fix itself is there
