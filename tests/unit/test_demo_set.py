"""Tests of ``harness.inputs.demo`` (the builder) and of the embedded demo set's data.

The outcome tests grade every demo prediction *on the host, without Docker*:
check out ``base_commit`` in a temp clone, ``git apply`` the model patch,
restore the files the test patch touches to their base versions (deleting
the ones it creates), ``git apply`` the test patch, run
``python -m pytest -rA <test files>`` and grade:

* a FAIL_TO_PASS test is fixed when it PASSED or XFAILed;
* a PASS_TO_PASS test is kept when it PASSED, XFAILed or was SKIPPED;
* FULL = all F2P fixed and all P2P kept; PARTIAL = all P2P kept and
  0 < fixed fraction < 1; NO otherwise; INVALID when the model patch does not apply.

The results must match ``instances/demo/expected.json``.  This checks the
data, not the harness's own grading code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from unidiff import PatchSet

from harness.inputs import demo
DEMO_DIR = demo.DEMO_DIR
EXPECTED = json.loads((DEMO_DIR / "expected.json").read_text(encoding="utf-8"))
INSTANCES = demo.load_jsonl(DEMO_DIR / "instances.jsonl")
BY_ID = {r["instance_id"]: r for r in INSTANCES}
SPECS = {s["instance_id"]: s for s in demo.load_instance_specs(DEMO_DIR)}
PREDICTION_FILES = ("predictions.jsonl", "predictions-extra.jsonl")
PREDICTIONS = {f: {p["instance_id"]: p for p in demo.load_jsonl(DEMO_DIR / f)} for f in PREDICTION_FILES}
STATUSES = {"FULL", "PARTIAL", "NO", "INVALID"}

#: Extra design intent of some predictions, beyond their final status.
DESIGN = {
    ("predictions.jsonl", "harness-demo__textkit-1"): "regression",  # fixes all F2P, breaks a P2P
    ("predictions-extra.jsonl", "harness-demo__calcly-1"): "edits-tests",  # only touches test files
    ("predictions-extra.jsonl", "harness-demo__inventory-1"): "edits-tests",  # ... incl. one the test patch creates
    ("predictions-extra.jsonl", "harness-demo__textkit-1"): "adds-source-file",
}

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
RESULT_RE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)")


# ----------------------------------------------------------------------------- helpers


@dataclass
class Outcome:
    status: str
    resolved: bool
    error_reason: str | None
    results: dict[str, str] = field(default_factory=dict)
    f2p_fixed: list[str] = field(default_factory=list)
    p2p_broken: list[str] = field(default_factory=list)

    def as_expected(self) -> dict:
        return {"status": self.status, "resolved": self.resolved, "error_reason": self.error_reason}


def parse_rA(output: str) -> dict[str, str]:
    """Node id -> status from pytest's ``-rA`` short test summary."""
    results: dict[str, str] = {}
    for line in output.splitlines():
        m = RESULT_RE.match(line)
        if m and "::" in m.group(2):
            results[m.group(2)] = m.group(1)
    return results


def grade(results: dict[str, str], f2p: list[str], p2p: list[str]) -> Outcome:
    fixed = [t for t in f2p if results.get(t) in ("PASSED", "XFAIL")]
    broken = [t for t in p2p if results.get(t) not in ("PASSED", "XFAIL", "SKIPPED")]
    if not broken and len(fixed) == len(f2p):
        status = "FULL"
    elif not broken and 0 < len(fixed) < len(f2p):
        status = "PARTIAL"
    else:
        status = "NO"
    return Outcome(status, status == "FULL", None, results, fixed, broken)


def run_pytest(workdir: Path, files: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GIT_", "PYTHONPATH"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *files],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), f"pytest crashed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return parse_rA(proc.stdout)


def checkout_base(repo: Path, base: str, workdir: Path) -> Path:
    demo.git(["clone", "-q", "--no-checkout", str(repo), str(workdir)], repo.parent)
    demo.git(["checkout", "-q", "--detach", base], workdir)
    return workdir


def git_apply(workdir: Path, patch: str, patch_file: Path, *extra: str) -> subprocess.CompletedProcess:
    patch_file.write_text(patch, encoding="utf-8")
    return demo.git(["apply", *extra, str(patch_file)], workdir, check=False)


def patched_test_files(test_patch: str) -> PatchSet:
    return PatchSet(test_patch)


def evaluate(repo: Path, instance: dict, model_patch: str, tmp: Path) -> Outcome:
    base = instance["base_commit"]
    work = checkout_base(repo, base, tmp / "work")
    if model_patch.strip():
        proc = git_apply(work, model_patch, tmp / "model.diff")
        if proc.returncode != 0:
            return Outcome("INVALID", False, "patch_apply_failed")
    patch_set = patched_test_files(instance["test_patch"])
    for pf in patch_set:  # restore pristine test files
        if pf.is_added_file:
            (work / pf.path).unlink(missing_ok=True)
        else:
            demo.git(["checkout", base, "--", pf.path], work)
    proc = git_apply(work, instance["test_patch"], tmp / "test.diff")
    assert proc.returncode == 0, proc.stderr.decode()
    files = [pf.path for pf in patch_set if not pf.is_removed_file]
    results = run_pytest(work, files)
    return grade(results, instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"])


def model_patch_for(kind: str, iid: str) -> str:
    if kind == "gold":
        return BY_ID[iid]["patch"]
    if kind == "empty":
        return ""
    return PREDICTIONS[kind][iid]["model_patch"]


CASES = [(kind, iid) for kind in EXPECTED for iid in EXPECTED[kind]]


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    return demo.build_demo_repos(DEMO_DIR, tmp_path_factory.mktemp("demo-repos"))


@pytest.fixture(scope="module")
def outcomes(built, tmp_path_factory):
    """Lazily evaluated, cached ``(kind, instance_id) -> Outcome``."""
    cache: dict[tuple[str, str], Outcome] = {}

    def get(kind: str, iid: str) -> Outcome:
        if (kind, iid) not in cache:
            inst = BY_ID[iid]
            tmp = tmp_path_factory.mktemp("eval")
            cache[kind, iid] = evaluate(built[inst["repo"]], inst, model_patch_for(kind, iid), tmp)
        return cache[kind, iid]

    return get


def _heads(repos: dict[str, Path]) -> dict[str, str | None]:
    return {name: demo.read_head(path) for name, path in repos.items()}


def _leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.iterdir() if ".tmp-" in p.name or ".stale-" in p.name)


# --------------------------------------------------------------------- builder tests


def test_demo_dir_is_absolute_and_independent_of_cwd(tmp_path):
    assert DEMO_DIR.is_absolute()
    # demo.__file__ is harness/inputs/demo/__init__.py
    assert DEMO_DIR == Path(demo.__file__).resolve().parents[3] / "instances" / "demo"
    assert (DEMO_DIR / "instances.jsonl").is_file()
    out = subprocess.run(
        [sys.executable, "-c", "from harness.inputs.demo import DEMO_DIR; print(DEMO_DIR)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out) == DEMO_DIR


def test_build_returns_all_repos(built):
    names = {r.full_name for r in demo.iter_source_repos(DEMO_DIR)}
    assert set(built) == names == {"harness-demo/calcly", "harness-demo/textkit", "harness-demo/inventory"}
    for name, path in built.items():
        assert path.name == demo.repo_dir_name(name)
        assert (path / ".git").is_dir(), "must be a normal (non-bare) repository"
        assert demo.git(["rev-parse", "--is-bare-repository"], path).stdout.decode().strip() == "false"
        assert demo.git(["symbolic-ref", "HEAD"], path).stdout.decode().strip() == "refs/heads/main"
        assert demo.git(["status", "--porcelain", "--untracked-files=all"], path).stdout == b""
        assert not _leftovers(path.parent)


def test_shas_are_deterministic(tmp_path, built):
    a = demo.build_demo_repos(DEMO_DIR, tmp_path / "a")
    b = demo.build_demo_repos(DEMO_DIR, tmp_path / "b")
    assert _heads(a) == _heads(b) == _heads(built)
    for name in a:
        src = DEMO_DIR / "repos" / demo.repo_dir_name(name)
        expected = list(demo.history_shas(src).values())
        assert demo.rev_list(a[name]) == demo.rev_list(b[name]) == expected
        assert all(SHA_RE.match(s) for s in expected)


def test_commits_match_snapshots_and_metadata(built):
    for name, path in built.items():
        src = DEMO_DIR / "repos" / demo.repo_dir_name(name)
        history = demo.load_history(src)
        commits = demo.rev_list(path)
        assert len(commits) == len(history) >= 4
        for i, (sha, entry) in enumerate(zip(commits, history)):
            files = demo.snapshot_files(src / "commits" / entry.dir)
            listing = demo.git(["ls-tree", "-r", "-z", sha], path).stdout.decode().split("\0")
            tree = {}
            for row in filter(None, listing):
                meta, rel = row.split("\t", 1)
                mode, kind, blob = meta.split()
                tree[rel] = (mode, kind, blob)
            assert tree == {rel: ("100644", "blob", demo.blob_sha(data)) for rel, data in files.items()}, entry.dir
            fmt = "%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
            an, ae, ad, cn, ce, cd, body = (
                demo.git(["log", "-1", f"--format={fmt}", sha], path).stdout.decode().split("\0")
            )
            date = f"2024-01-01T{i:02d}:00:00+00:00"
            assert (an, ae, ad, cn, ce, cd) == ("Harness Demo", "demo@harness.invalid", date) * 2
            assert body.strip() == entry.message.strip()


def test_files_deleted_between_snapshots_are_deleted(built):
    def files_at(name: str, ref: str) -> set[str]:
        out = demo.git(["ls-tree", "-r", "--name-only", ref], built[name]).stdout.decode()
        return set(out.split())

    assert "TODO.txt" in files_at("harness-demo/textkit", "HEAD~2")
    assert "TODO.txt" not in files_at("harness-demo/textkit", "HEAD~1")
    assert "inventory/_compat.py" in files_at("harness-demo/inventory", "HEAD~2")
    assert "inventory/_compat.py" not in files_at("harness-demo/inventory", "HEAD~1")
    assert not (built["harness-demo/textkit"] / "TODO.txt").exists()


def test_build_is_independent_of_user_git_config(tmp_path, monkeypatch, built):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Someone Else\n\temail = else@example.com\n"
        "[commit]\n\tgpgsign = true\n[core]\n\tautocrlf = true\n[init]\n\tdefaultBranch = trunk\n"
        "[diff]\n\tnoprefix = true\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Intruder")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00+00:00")
    repos = demo.build_demo_repos(DEMO_DIR, tmp_path / "repos")
    assert _heads(repos) == _heads(built)
    assert demo.dump_jsonl(demo.make_instance_records(DEMO_DIR, repos)) == (DEMO_DIR / "instances.jsonl").read_text()


def test_existing_repo_with_right_head_is_kept(tmp_path):
    dest = tmp_path / "repos"
    first = demo.build_demo_repos(DEMO_DIR, dest)
    sentinels = {}
    for name, path in first.items():
        sentinel = path / ".git" / "sentinel"
        sentinel.write_text(name)
        sentinels[name] = (sentinel, path.stat().st_ino)
    second = demo.build_demo_repos(DEMO_DIR, dest)
    assert second == first
    for name, (sentinel, inode) in sentinels.items():
        assert sentinel.exists(), f"{name} was rebuilt although its HEAD was right"
        assert second[name].stat().st_ino == inode


def test_stale_or_broken_repo_is_recreated(tmp_path, built):
    dest = tmp_path / "repos"
    repos = demo.build_demo_repos(DEMO_DIR, dest)
    demo.git(["reset", "-q", "--hard", "HEAD~1"], repos["harness-demo/calcly"])
    shutil.rmtree(repos["harness-demo/textkit"])
    repos["harness-demo/textkit"].mkdir()
    (repos["harness-demo/textkit"] / "junk.txt").write_text("not a repo")
    shutil.rmtree(repos["harness-demo/inventory"] / ".git")
    again = demo.build_demo_repos(DEMO_DIR, dest)
    assert _heads(again) == _heads(built)
    assert not (again["harness-demo/textkit"] / "junk.txt").exists()
    assert not _leftovers(dest)


def test_concurrent_builds(tmp_path, built):
    dest = tmp_path / "shared"
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from harness.inputs.demo import DEMO_DIR, build_demo_repos, read_head
        repos = build_demo_repos(DEMO_DIR, Path(sys.argv[1]))
        print(sorted((k, read_head(v)) for k, v in repos.items()))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(dest)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert len({out for out, _ in outs}) == 1
    final = {demo.repo_full_name(p.name): p for p in dest.iterdir() if not p.name.startswith(".")}
    assert _heads(final) == _heads(built)
    assert not _leftovers(dest)


def test_tool_caches_in_snapshots_are_ignored(tmp_path, built):
    src = tmp_path / "demo"
    shutil.copytree(DEMO_DIR / "repos", src / "repos")
    snap = src / "repos" / "harness-demo__calcly" / "commits" / "03-stats"
    (snap / "calcly" / "__pycache__").mkdir()
    (snap / "calcly" / "__pycache__" / "stats.cpython-311.pyc").write_bytes(b"\0junk")
    (snap / ".pytest_cache").mkdir()
    (snap / ".pytest_cache" / "README.md").write_text("cache")
    (snap / "tests" / "stray.pyc").write_bytes(b"junk")
    repos = demo.build_demo_repos(src, tmp_path / "repos")
    assert _heads(repos) == _heads(built)


def test_snapshot_change_changes_shas(tmp_path, built):
    src = tmp_path / "demo"
    shutil.copytree(DEMO_DIR / "repos", src / "repos")
    readme = src / "repos" / "harness-demo__textkit" / "commits" / "01-initial" / "README.md"
    readme.write_text(readme.read_text() + "changed\n")
    dest = tmp_path / "repos"
    first = demo.build_demo_repos(DEMO_DIR, dest)
    assert _heads(first) == _heads(built)
    second = demo.build_demo_repos(src, dest)  # same dest: stale textkit must be replaced
    assert second["harness-demo/textkit"] == first["harness-demo/textkit"]
    assert demo.read_head(second["harness-demo/textkit"]) != demo.read_head(built["harness-demo/textkit"])
    assert demo.read_head(second["harness-demo/calcly"]) == demo.read_head(built["harness-demo/calcly"])


def test_history_yaml_validation(tmp_path):
    repo = tmp_path / "harness-demo__broken"
    (repo / "commits" / "01-initial").mkdir(parents=True)
    (repo / "commits" / "01-initial" / "a.txt").write_text("a\n")
    (repo / "history.yaml").write_text("- dir: 01-initial\n  message: init\n- dir: 02-missing\n  message: x\n")
    with pytest.raises(demo.DemoSetError, match="missing snapshot"):
        demo.load_history(repo)


# ------------------------------------------------------------------- instance set data


def test_instances_match_fresh_regeneration(built):
    text = (DEMO_DIR / "instances.jsonl").read_text(encoding="utf-8")
    assert demo.dump_jsonl(demo.make_instance_records(DEMO_DIR, built)) == text


def test_check_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.inputs.demo", "check"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_regenerate_command_rewrites_stale_file(tmp_path):
    src = tmp_path / "demo"
    shutil.copytree(DEMO_DIR, src)
    (src / "instances.jsonl").write_text("stale\n")
    for cmd, rc in (("check", 1), ("regenerate", 0), ("check", 0)):
        proc = subprocess.run(
            [sys.executable, "-m", "harness.inputs.demo", "--source", str(src), cmd], capture_output=True, text=True
        )
        assert proc.returncode == rc, (cmd, proc.stdout, proc.stderr)
    assert (src / "instances.jsonl").read_text() == (DEMO_DIR / "instances.jsonl").read_text()


def test_instance_records_schema():
    assert 3 <= len(INSTANCES) <= 4
    assert len(BY_ID) == len(INSTANCES), "duplicate instance ids"
    assert list(BY_ID) == list(SPECS)
    for r in INSTANCES:
        assert tuple(r) == demo.INSTANCE_FIELDS
        owner, name = r["repo"].split("/")
        assert owner == "harness-demo"
        assert re.fullmatch(rf"harness-demo__{name}-\d+", r["instance_id"])
        assert SHA_RE.match(r["base_commit"])
        assert r["environment_setup_commit"] == r["base_commit"]
        assert r["version"] == "1.0"
        assert r["hints_text"] == ""
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["created_at"])
        assert r["problem_statement"].strip()
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            assert isinstance(r[key], list) and r[key] and all(isinstance(t, str) for t in r[key])
            assert len(set(r[key])) == len(r[key])
            assert all(t.startswith("tests/") and "::" in t and " " not in t for t in r[key])
        assert not set(r["FAIL_TO_PASS"]) & set(r["PASS_TO_PASS"])
    all_ids = [t for r in INSTANCES for t in r["FAIL_TO_PASS"] + r["PASS_TO_PASS"]]
    assert any(re.fullmatch(r"tests/[\w/]+\.py::Test\w+::test_\w+", t) for t in all_ids), "class-based id"
    assert any(re.fullmatch(r"tests/[\w/]+\.py::test_\w+\[[^\]]*-[^\]]*\]", t) for t in all_ids), "param id"
    assert any("[" in t for r in INSTANCES for t in r["FAIL_TO_PASS"]), "a parametrized FAIL_TO_PASS id"


def test_patch_and_test_patch_partition():
    created_somewhere = modified_somewhere = False
    for r in INSTANCES:
        patch, test_patch = PatchSet(r["patch"]), PatchSet(r["test_patch"])
        assert len(patch) and len(test_patch)
        assert all(not demo.is_test_path(f.path) for f in patch)
        assert all(f.path.startswith("tests/") for f in test_patch)
        created_somewhere |= any(f.is_added_file for f in test_patch)
        modified_somewhere |= any(f.is_modified_file for f in test_patch)
        run_files = {f.path for f in test_patch}
        assert {t.split("::")[0] for t in r["FAIL_TO_PASS"] + r["PASS_TO_PASS"]} <= run_files
        assert r["patch"].endswith("\n") and r["test_patch"].endswith("\n")
    assert created_somewhere and modified_somewhere
    inv = PatchSet(BY_ID["harness-demo__inventory-1"]["test_patch"])
    assert {f.path for f in inv if f.is_added_file} == {"tests/test_report.py"}
    assert {f.path for f in inv if f.is_modified_file} == {"tests/test_stock.py"}


def test_fix_commit_exists_after_base_and_markers_are_secret(built):
    for iid, spec in SPECS.items():
        r, repo = BY_ID[iid], built[SPECS[iid]["repo"]]
        shas = demo.history_shas(DEMO_DIR / "repos" / demo.repo_dir_name(r["repo"]))
        base, fix = shas[spec["base"]], shas[spec["fix"]]
        assert r["base_commit"] == base
        history = demo.rev_list(repo)
        assert history.index(base) < history.index(fix), "the fix must come after the base in the source repo"
        marker = spec["fix_marker"]
        assert marker.startswith("FIX-SECRET-")
        fix_msg = demo.git(["log", "-1", "--format=%B", fix], repo).stdout.decode()
        assert marker in fix_msg
        everything = demo.git(["log", "--format=%H %B", "HEAD"], repo).stdout.decode()
        assert everything.count(marker) == 1, "marker must appear in the fix commit only"
        upto_base = demo.git(["log", "--format=%B", base], repo).stdout.decode()
        assert marker not in upto_base
        grep = demo.git(["grep", "-q", marker, base], repo, check=False)
        assert grep.returncode == 1
        for rec_field in ("patch", "test_patch", "problem_statement"):
            assert "FIX-SECRET" not in r[rec_field]


def test_gold_patches_reproduce_the_fix_tree(built, tmp_path):
    for iid, spec in SPECS.items():
        r = BY_ID[iid]
        work = checkout_base(built[r["repo"]], r["base_commit"], tmp_path / iid)
        for name in ("patch", "test_patch"):
            proc = git_apply(work, r[name], tmp_path / f"{iid}.{name}.diff")
            assert proc.returncode == 0, proc.stderr.decode()
        demo.git(["add", "-A"], work)
        tree = demo.git(["write-tree"], work).stdout.decode().strip()
        fix_files = demo.snapshot_files(DEMO_DIR / "repos" / demo.repo_dir_name(r["repo"]) / "commits" / spec["fix"])
        assert tree == demo.tree_sha(fix_files), iid


# ------------------------------------------------------------------------ predictions


def test_prediction_files_shape():
    for fname in PREDICTION_FILES:
        rows = demo.load_jsonl(DEMO_DIR / fname)
        assert [p["instance_id"] for p in rows] == list(BY_ID), f"{fname}: exactly one prediction per instance"
        for p in rows:
            assert set(p) == {"instance_id", "model_name_or_path", "model_patch"}
            assert p["model_name_or_path"] == demo.DEMO_MODEL_NAME == "demo-model"
            assert p["model_patch"].startswith("diff --git ") and p["model_patch"].endswith("\n")
            assert p["model_patch"] != BY_ID[p["instance_id"]]["patch"]


def test_expected_json_shape():
    assert set(EXPECTED) == {*PREDICTION_FILES, "gold", "empty"}
    for kind, entries in EXPECTED.items():
        assert set(entries) == set(BY_ID), kind
        for e in entries.values():
            assert set(e) == {"status", "resolved", "error_reason"}
            assert e["status"] in STATUSES
            assert e["resolved"] is (e["status"] == "FULL")
            assert e["error_reason"] == ("patch_apply_failed" if e["status"] == "INVALID" else None)
    assert all(e["status"] == "FULL" for e in EXPECTED["gold"].values())
    assert all(e["status"] == "NO" for e in EXPECTED["empty"].values())
    covered = {e["status"] for f in PREDICTION_FILES for e in EXPECTED[f].values()}
    assert covered == STATUSES
    assert {e["status"] for e in EXPECTED["predictions.jsonl"].values()} == STATUSES


@pytest.mark.parametrize("kind,iid", CASES, ids=[f"{k}:{i}" for k, i in CASES])
def test_prediction_outcome(kind, iid, outcomes):
    outcome = outcomes(kind, iid)
    assert outcome.as_expected() == EXPECTED[kind][iid], (outcome.f2p_fixed, outcome.p2p_broken, outcome.results)
    if outcome.status != "INVALID":
        inst = BY_ID[iid]
        missing = set(inst["FAIL_TO_PASS"] + inst["PASS_TO_PASS"]) - set(outcome.results)
        assert not missing, f"tests not reported by pytest: {missing}"
    design = DESIGN.get((kind, iid))
    if design == "regression":
        assert len(outcome.f2p_fixed) == len(BY_ID[iid]["FAIL_TO_PASS"]) and outcome.p2p_broken
    if design == "adds-source-file":
        assert any(f.is_added_file and not demo.is_test_path(f.path) for f in PatchSet(model_patch_for(kind, iid)))


@pytest.mark.parametrize("kind,iid", [k for k, v in DESIGN.items() if v == "edits-tests"])
def test_test_editing_predictions_need_the_pristine_restore(kind, iid, built, tmp_path):
    """They only touch files the test patch touches, and the test patch cannot be
    applied on top of them: the harness must restore/delete those files first."""
    inst = BY_ID[iid]
    model_files = {f.path for f in PatchSet(model_patch_for(kind, iid))}
    test_files = {f.path for f in PatchSet(inst["test_patch"])}
    assert model_files and model_files <= test_files
    work = checkout_base(built[inst["repo"]], inst["base_commit"], tmp_path / "work")
    assert git_apply(work, model_patch_for(kind, iid), tmp_path / "model.diff").returncode == 0
    assert git_apply(work, inst["test_patch"], tmp_path / "test.diff", "--check").returncode != 0
    # Run as-is (without the real test patch): the edited tests pass trivially.
    results = run_pytest(work, sorted(model_files))
    assert all(results.get(t) == "PASSED" for t in inst["FAIL_TO_PASS"]), results


def test_invalid_patch_fails_even_with_fuzzy_patch(built, tmp_path):
    invalid = [(f, i) for f in PREDICTION_FILES for i, e in EXPECTED[f].items() if e["status"] == "INVALID"]
    assert invalid
    for fname, iid in invalid:
        inst = BY_ID[iid]
        work = checkout_base(built[inst["repo"]], inst["base_commit"], tmp_path / iid)
        patch_text = PREDICTIONS[fname][iid]["model_patch"]
        proc = git_apply(work, patch_text, tmp_path / "model.diff", "--check")
        assert proc.returncode != 0 and b"patch does not apply" in proc.stderr, proc.stderr
        assert b"corrupt" not in proc.stderr, "the patch must be well-formed, only its context is wrong"
        rej = git_apply(work, patch_text, tmp_path / "model.diff", "--reject")
        assert rej.returncode != 0
        if shutil.which("patch"):
            fuzzy = subprocess.run(
                ["patch", "--batch", "--dry-run", "--fuzz=5", "-p1", "-i", str(tmp_path / "model.diff")],
                cwd=work,
                capture_output=True,
            )
            assert fuzzy.returncode != 0, fuzzy.stdout


def test_fail_to_pass_and_pass_to_pass_are_exact(outcomes):
    """F2P = fails without the fix, passes with it; P2P = passes in both; nothing else runs."""
    for iid, inst in BY_ID.items():
        before, after = outcomes("empty", iid).results, outcomes("gold", iid).results
        ok = {"PASSED", "XFAIL"}
        assert set(before) == set(after), iid
        assert {t for t in after if after[t] in ok and before[t] not in ok} == set(inst["FAIL_TO_PASS"]), iid
        assert {t for t in after if after[t] in ok and before[t] in ok} == set(inst["PASS_TO_PASS"]), iid
        assert set(after) == set(inst["FAIL_TO_PASS"]) | set(inst["PASS_TO_PASS"]), iid
    statuses = {s for iid in BY_ID for s in outcomes("gold", iid).results.values()}
    assert "XFAIL" in statuses, "one PASS_TO_PASS test is an expected failure (exercises the XFAIL rule)"
