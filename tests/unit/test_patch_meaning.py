"""What a patch means (issue 39, docs/SECURITY.md "What a patch means"): the section reader
(harness.patch_sections), what harness.patches.prepare_model_patch takes out of a model
patch (content-less binary stubs, new symlinks inside the repository) and what it still
refuses, and the set-up step's already-present fallback (harness/incontainer/prepare.py)
run for real on two git working copies.

The diffs are written by real ``git diff`` wherever the shape matters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import PatchRejected
from harness.incontainer import prepare as prepare_module
from harness.integrity.steps import apply_strategies
from harness.integrity.tree import parse_tree_report
from harness.patch_sections import split_sections
from harness.patches import check_model_patch, prepare_model_patch
from tests.unit.test_patches import REJECTED, Repo

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
SHARED = Path(__file__).resolve().parents[3] / "shared"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "repo").mkdir()
    r = Repo(tmp_path / "repo")
    r.write("pkg/mod.py", "def f():\n    return 1\n")
    r.write("setup.py", 'install_requires = [\n    "Jinja2>=2.3",\n    "docutils",\n]\n')
    r.write("pic.png", "not really a picture\n")
    r.git("add", "-A")
    r.git("commit", "-q", "-m", "base")
    return r


def _fix(repo: Repo) -> None:
    repo.write("pkg/mod.py", "def f():\n    return 2\n")


# --------------------------------------------------------------------------- the section reader

@needs_git
def test_sections_give_the_text_back_and_each_hunk_alone(repo):
    _fix(repo)
    repo.write("pkg/new.py", "x = 1\n\ny = 2\n")
    (repo.root / "pic.png").unlink()
    lines = "".join(f"line {i}\n" for i in range(40))
    repo.write("setup.py", lines)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "more")
    repo.write("setup.py", lines.replace("line 2\n", "line two\n").replace("line 35\n", "\n"))
    patch = repo.diff()
    split = split_sections(patch)
    assert split is not None and split.text == patch
    setup = next(s for s in split.sections if s.path == "setup.py")
    assert len(setup.hunks) == 2 and all(h.startswith("@@ ") for h in setup.hunks)


def test_sections_read_plain_diffs_and_refuse_what_they_do_not_know():
    plain = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old\n+new\n"
    assert split_sections(plain).sections[0].path == "x.py"
    assert split_sections("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-only one line\n") is None
    assert split_sections(REJECTED["binary hunk"]) is None           # a payload: left whole
    context = "*** a/x.py\n--- b/x.py\n***************\n*** 1 ****\n! old\n--- 1 ----\n! new\n"
    assert split_sections(context).sections == ()                     # no section: all preamble


def test_a_removed_and_an_added_line_that_look_like_a_header_stay_in_their_hunk():
    """``-- a/y`` removed and ``++ b/y`` added read as ``--- a/y`` / ``+++ b/y``: the
    hunk's counts, not the look of a line, say where it ends."""
    patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n--- a/y\n+++ b/y\n"
    split = split_sections(patch)
    assert split is not None and len(split.sections) == 1
    assert split.sections[0].hunks == ("@@ -1 +1 @@\n--- a/y\n+++ b/y\n",)


@pytest.mark.skipif(not (SHARED / "swebench" / "verified-test.jsonl").exists(), reason="no shared data here")
def test_every_reference_and_vendor_patch_held_here_is_read_and_given_back():
    files = [SHARED / "swebench" / "verified-test.jsonl", SHARED / "swebench" / "lite-test.jsonl",
             *sorted((SHARED / "swebench").glob("*preds.jsonl")),
             SHARED / "trajectories" / "mini-swe-agent-1.15.0__gemini-3-pro-preview" / "predictions.jsonl"]
    count = 0
    for path in files:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for key in ("patch", "test_patch", "model_patch"):
                if record.get(key):
                    split = split_sections(record[key])
                    assert split is not None and split.text == record[key], (path.name, record["instance_id"], key)
                    count += 1
    assert count > 1500


# --------------------------------------------------------------------------- stubs and symlinks

@needs_git
def test_a_content_less_binary_stub_is_dropped_and_recorded(repo):
    _fix(repo)
    (repo.root / "test_plot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    patch = repo.diff()
    assert "Binary files /dev/null and b/test_plot.png differ" in patch
    with pytest.raises(PatchRejected, match="binary"):
        check_model_patch(patch)                                   # the old check alone refuses it
    model = prepare_model_patch(patch)
    assert [(d.path, d.what) for d in model.dropped] == [("test_plot.png", "binary_stub")]
    assert "Binary files" not in model.text and "return 2" in model.text
    assert model.files.all == ("pkg/mod.py",)


@needs_git
def test_modified_and_deleted_binary_stubs_carry_nothing_either(repo):
    (repo.root / "pic.png").write_bytes(b"\x00\x01\x02")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "binary")
    (repo.root / "pic.png").write_bytes(b"\x00\x01\x03")
    modified = prepare_model_patch(repo.diff())
    (repo.root / "pic.png").unlink()
    deleted = prepare_model_patch(repo.diff())
    assert [d.what for d in modified.dropped] == [d.what for d in deleted.dropped] == ["binary_stub"]
    assert modified.text == deleted.text == ""


@needs_git
def test_a_binary_patch_with_content_is_refused_as_before(repo):
    _fix(repo)
    (repo.root / "blob.bin").write_bytes(bytes(range(256)))
    with pytest.raises(PatchRejected, match="binary"):
        prepare_model_patch(repo.diff("--binary"))


@needs_git
def test_bytecode_sent_as_text_is_not_a_stub(repo):
    """The round-3 attack's shape: a .pyc whose bytes are valid UTF-8 travels as a text
    hunk. It is applied like any file (and refused by its content later:
    integrity/artefacts.py), never dropped as a stub."""
    repo.write("pkg/__pycache__/mod.cpython-39.pyc", "a\rb\x0c\n")   # text to git
    patch = repo.diff()
    assert "Binary files" not in patch
    model = prepare_model_patch(patch)
    assert model.dropped == () and model.files.created == ("pkg/__pycache__/mod.cpython-39.pyc",)


def test_a_stub_line_beside_a_hunk_is_not_a_stub():
    section = ("diff --git a/x.pyc b/x.pyc\nnew file mode 100644\nindex 0000000..1111111\n"
               "Binary files /dev/null and b/x.pyc differ\n--- /dev/null\n+++ b/x.pyc\n@@ -0,0 +1 @@\n+bytecode\n")
    with pytest.raises(PatchRejected, match="binary"):
        prepare_model_patch(section)


@needs_git
def test_a_new_symlink_inside_the_repository_is_dropped_and_recorded(repo):
    _fix(repo)
    os.symlink(".", repo.root / "symlink_dir")
    os.symlink("mod.py", repo.root / "pkg" / "alias.py")
    patch = repo.diff()
    model = prepare_model_patch(patch)
    assert sorted((d.path, d.what, d.detail) for d in model.dropped) == [
        ("pkg/alias.py", "symlink", "mod.py"), ("symlink_dir", "symlink", ".")]
    assert "120000" not in model.text and model.files.all == ("pkg/mod.py",)


@needs_git
@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../../etc/passwd", "..", ".git", "pkg/../.git/hooks",
                                    "/testbed/tests"])
def test_a_new_symlink_out_of_the_repository_is_refused(repo, target):
    _fix(repo)
    os.symlink(target, repo.root / "link")
    with pytest.raises(PatchRejected, match="symlink"):
        prepare_model_patch(repo.diff())


@needs_git
def test_other_symlink_forms_are_refused_as_before(repo):
    os.symlink("setup.py", repo.root / "link")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "link")
    (repo.root / "link").unlink()
    os.symlink("pkg/mod.py", repo.root / "link")                   # a new target, inside
    with pytest.raises(PatchRejected, match="symlink"):
        prepare_model_patch(repo.diff())
    (repo.root / "link").unlink()                                   # a deletion
    with pytest.raises(PatchRejected, match="symlink"):
        prepare_model_patch(repo.diff())


@pytest.mark.parametrize("name", list(REJECTED))
def test_every_hostile_patch_is_still_refused_but_the_content_less_stubs(name):
    if name in ("binary files differ", "CRLF binary"):
        assert [d.what for d in prepare_model_patch(REJECTED[name]).dropped] == ["binary_stub"]
        return
    with pytest.raises(PatchRejected):
        prepare_model_patch(REJECTED[name])


def test_a_dropped_section_with_an_unsafe_path_is_refused():
    stub = "diff --git a/../x.png b/../x.png\nnew file mode 100644\nindex 0000000..1111111\n" \
           "Binary files /dev/null and b/../x.png differ\n"
    with pytest.raises(PatchRejected, match="escapes"):
        prepare_model_patch(stub)


# --------------------------------------------------------------------------- the already-present fallback

def _set_up(tmp_path: Path, repo: Repo, patch: str) -> dict:
    """prepare.py for real, as the set-up step runs it: the pristine tree is the committed
    base plus an environment's own edit (setup.py pinned, as sphinx's pre_install does)."""
    pristine, testbed = tmp_path / "pristine", tmp_path / "testbed"
    shutil.copytree(repo.root, pristine, symlinks=True)
    for argv in (["reset", "-q", "--hard"], ["clean", "-qfdx"]):   # the base commit, as exported
        subprocess.run(["git", *argv], cwd=pristine, env=repo.env, check=True)
    (pristine / "setup.py").write_text((pristine / "setup.py").read_text().replace("Jinja2>=2.3", "Jinja2<3.0"))
    testbed.mkdir()
    model = prepare_model_patch(patch)
    patch_path, remaining = tmp_path / "in" / "model.diff", tmp_path / "in" / "remaining.diff"
    patch_path.parent.mkdir()
    patch_path.write_bytes(model.text.encode())
    request = {"testbed": str(testbed), "pristine": str(pristine), "timeout": 60, "patch": str(patch_path),
               "env": {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1"},
               "strategies": apply_strategies(str(patch_path)), "max_changes": 1000, "content_limit": 1 << 20,
               "content_total": 1 << 24,
               "fallback": {"sections": [s.as_json() for s in model.sections or ()], "remaining": str(remaining),
                            "strategies": apply_strategies(str(remaining))}}
    (tmp_path / "request.json").write_text(json.dumps(request))
    out = subprocess.run([sys.executable, "-I", "-S", prepare_module.__file__, str(tmp_path / "request.json")],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@needs_git
def test_a_hunk_the_tree_already_holds_is_left_out_and_the_rest_applied(tmp_path, repo):
    _fix(repo)
    repo.write("setup.py", repo.root.joinpath("setup.py").read_text().replace("Jinja2>=2.3", "Jinja2<3.0")
               .replace('"docutils"', '"docutils<0.18"'))
    (repo.root / "setup.py").write_text((repo.root / "setup.py").read_text().replace('"docutils<0.18"', '"docutils"'))
    patch = repo.diff()
    report = _set_up(tmp_path, repo, patch)
    tree = parse_tree_report(json.dumps(report), 1 << 26)
    assert tree.applied == "git_apply"
    assert tree.already_present == [{"path": "setup.py", "hunk": "@@ -1,4 +1,4 @@"}]
    assert tree.git_changed == []
    assert [(c.path, c.change) for c in tree.changes] == [("pkg/mod.py", "modified")]
    assert (tmp_path / "testbed" / "pkg" / "mod.py").read_text().endswith("return 2\n")
    assert "Jinja2<3.0" in (tmp_path / "testbed" / "setup.py").read_text()
    phases = [c["phase"] for c in report["commands"]]
    assert phases[-2:] == ["apply:already_present", "apply:git_apply+without_present"]
    assert not (tmp_path / "in" / "remaining.diff").exists()


@needs_git
def test_a_file_with_a_present_hunk_and_a_new_one_keeps_the_new_one(tmp_path, repo):
    lines = "".join(f"line {i}\n" for i in range(40))
    repo.write("setup.py", 'install_requires = [\n    "Jinja2>=2.3",\n    "docutils",\n]\n' + lines)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "longer")
    repo.write("setup.py", 'install_requires = [\n    "Jinja2<3.0",\n    "docutils",\n]\n'
               + lines.replace("line 30\n", "line thirty\n"))
    report = _set_up(tmp_path, repo, repo.diff())
    assert [p["hunk"] for p in report["already_present"]] == ["@@ -1,5 +1,5 @@"]
    text = (tmp_path / "testbed" / "setup.py").read_text()
    assert "line thirty" in text and "Jinja2<3.0" in text


@needs_git
def test_a_hunk_that_neither_applies_nor_is_present_still_fails_the_patch(tmp_path, repo):
    _fix(repo)
    repo.write("setup.py", 'install_requires = [\n    "Jinja2<3.0",\n    "docutils",\n]\n')
    patch = repo.diff().replace(' install_requires = [', ' install_requires = (')  # context nobody has
    report = _set_up(tmp_path, repo, patch)
    assert report["applied"] is None and report["already_present"] == []
    assert [c["phase"] for c in report["commands"]][-1] == "apply:already_present"
    assert (tmp_path / "testbed" / "pkg" / "mod.py").read_text().endswith("return 1\n")   # reset


@needs_git
def test_a_patch_that_applies_never_reaches_the_fallback(tmp_path, repo):
    _fix(repo)
    report = _set_up(tmp_path, repo, repo.diff())
    assert report["applied"] == "git_apply" and "already_present" not in report
    assert [c["phase"] for c in report["commands"]] == ["history_check", "apply:git_apply"]
