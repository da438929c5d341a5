"""Patch analysis and model-patch validation (harness.patches).

Where it matters, the diffs are produced by real ``git diff`` in a temporary repository,
so the parser is checked against what git actually writes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import patches
from harness.errors import GradingOutcome, PatchRejected
from harness.patches import (PatchFiles, check_model_patch, matches_any, patch_files,
                             unsafe_path_reason)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def hunk(src: str, dst: str) -> str:
    return f"--- {src}\n+++ {dst}\n@@ -1 +1 @@\n-old\n+new\n"


def git_diff(src: str, dst: str) -> str:
    return f"diff --git {src} {dst}\nindex 1111111..2222222 100644\n" + hunk(src, dst)


NORMAL = git_diff("a/src/pkg/mod.py", "b/src/pkg/mod.py")


# --------------------------------------------------------------------------- real git

class Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1", HOME=str(root))
        self.env = env
        self.git("init", "-q", ".")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=self.root, env=self.env,
                              check=True, capture_output=True, text=True).stdout

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def diff(self, *extra: str) -> str:
        self.git("add", "-A")
        return self.git("diff", "--cached", *extra)


@pytest.fixture
def repo(tmp_path):
    r = Repo(tmp_path)
    r.write("src/keep.py", "a = 1\n")
    r.write("src/gone.py", "b = 2\n")
    r.write("src/old_name.py", "".join(f"line {i}\n" for i in range(30)))
    r.write("docs/readme.txt", "hello\n")
    r.git("add", "-A")
    r.git("commit", "-q", "-m", "base")
    return r


@needs_git
def test_patch_files_on_a_real_git_diff(repo):
    repo.write("src/keep.py", "a = 2\n")                      # modified
    repo.write("src/new_mod.py", "c = 3\n")                   # created
    (repo.root / "src/gone.py").unlink()                      # deleted
    (repo.root / "src/old_name.py").rename(repo.root / "src/new_name.py")  # renamed
    patch = repo.diff("-M")
    assert "rename from src/old_name.py" in patch  # git saw a rename, not delete+add
    files = patch_files(patch)
    assert files.modified == ("src/keep.py",)
    assert set(files.created) == {"src/new_mod.py", "src/new_name.py"}
    assert set(files.deleted) == {"src/gone.py", "src/old_name.py"}
    assert set(files.all) == {"src/keep.py", "src/new_mod.py", "src/new_name.py", "src/gone.py",
                              "src/old_name.py"}
    assert check_model_patch(patch) == files


@needs_git
def test_rename_with_edits_on_a_real_git_diff(repo):
    text = (repo.root / "src/old_name.py").read_text().replace("line 3\n", "line three\n")
    (repo.root / "src/old_name.py").unlink()
    repo.write("src/new_name.py", text)
    patch = repo.diff("-M")
    assert "rename to src/new_name.py" in patch and "@@" in patch
    files = patch_files(patch)
    assert (files.modified, files.created, files.deleted) == ((), ("src/new_name.py",), ("src/old_name.py",))


@needs_git
def test_mode_change_only_is_a_modification(repo):
    os.chmod(repo.root / "src/keep.py", 0o755)
    patch = repo.diff()
    assert "new mode 100755" in patch and "@@" not in patch
    assert patch_files(patch) == PatchFiles(("src/keep.py",), (), ())
    assert check_model_patch(patch).modified == ("src/keep.py",)


@needs_git
def test_real_binary_patch_is_rejected(repo):
    (repo.root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    patch = repo.diff("--binary")
    assert "GIT binary patch" in patch
    with pytest.raises(PatchRejected, match="binary"):
        check_model_patch(patch)


@needs_git
def test_real_binary_without_payload_is_rejected(repo):
    (repo.root / "blob.bin").write_bytes(bytes(range(256)))
    patch = repo.diff()
    assert "Binary files" in patch
    with pytest.raises(PatchRejected, match="binary"):
        check_model_patch(patch)


@needs_git
def test_real_new_symlink_is_rejected(repo):
    os.symlink("/etc/passwd", repo.root / "link")
    patch = repo.diff()
    assert "new file mode 120000" in patch
    with pytest.raises(PatchRejected, match="symlink"):
        check_model_patch(patch)


@needs_git
def test_real_retargeted_symlink_is_rejected(repo):
    """Changing an existing symlink's target puts the mode only on the index line."""
    os.symlink("docs/readme.txt", repo.root / "link")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "link")
    (repo.root / "link").unlink()
    os.symlink("/etc/shadow", repo.root / "link")
    patch = repo.diff()
    assert "new file mode" not in patch and " 120000\n" in patch
    with pytest.raises(PatchRejected, match="symlink"):
        check_model_patch(patch)


@needs_git
def test_crlf_symlink_header_is_still_rejected(repo):
    """git apply accepts 'new file mode 120000\\r': so must the check see it."""
    os.symlink("/etc/passwd", repo.root / "link")
    patch = repo.diff().replace("\n", "\r\n")
    with pytest.raises(PatchRejected, match="symlink"):
        check_model_patch(patch)


# --------------------------------------------------------------------------- patch_files

def test_created_and_deleted_from_dev_null():
    created = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n"
    deleted = "diff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    files = patch_files(created + deleted)
    assert files == PatchFiles((), ("n.py",), ("d.py",))


def test_plain_unified_diff_without_git_headers():
    # as git applies it: a traditional diff's strip count is guessed (1 when the name has a
    # "/"), so a prefix-less "pkg/m.py" is m.py (tests/unit/test_patch_paths.py checks git)
    assert patch_files(hunk("pkg/m.py", "pkg/m.py")).modified == ("m.py",)
    assert patch_files(hunk("a/pkg/m.py", "b/pkg/m.py")).modified == ("pkg/m.py",)


def test_pure_rename_without_hunks():
    patch = "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to y.py\n"
    files = patch_files(patch)
    assert files.created == ("y.py",) and files.deleted == ("x.py",) and files.modified == ()


def test_empty_patch_touches_nothing():
    assert patch_files("") == PatchFiles((), (), ())
    assert patch_files("  \n") == PatchFiles((), (), ())
    assert check_model_patch("") == PatchFiles((), (), ())


def test_files_are_deduplicated_in_order():
    patch = NORMAL + git_diff("a/z.py", "b/z.py") + git_diff("a/src/pkg/mod.py", "b/src/pkg/mod.py")
    assert patch_files(patch).modified == ("src/pkg/mod.py", "z.py")


def test_unparsable_patch_is_rejected():
    broken = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-only one line\n"
    with pytest.raises(PatchRejected) as info:
        patch_files(broken)
    assert info.value.reason == "patch_rejected" and info.value.origin == "model"
    assert isinstance(info.value, GradingOutcome)


# --------------------------------------------------------------------------- check_model_patch

def test_normal_patch_is_accepted():
    assert check_model_patch(NORMAL) == PatchFiles(("src/pkg/mod.py",), (), ())


@pytest.mark.parametrize("name", [".gitignore", ".github/workflows/ci.yml", "a..b/c.py", "x/..y/z.py",
                                  "docs/.gitattributes", "tests/test_git.py"])
def test_lookalike_paths_are_fine(name):
    assert check_model_patch(git_diff(f"a/{name}", f"b/{name}")).modified == (name,)


REJECTED = {
    "binary hunk": "diff --git a/b.bin b/b.bin\nnew file mode 100644\nindex 0000000..1111111\n"
                   "GIT binary patch\nliteral 3\nKcmZ>Y%K!iX\n\nliteral 0\nHcmV?d00001\n\n",
    "binary files differ": "diff --git a/b.bin b/b.bin\nindex 1..2 100644\nBinary files a/b.bin and b/b.bin differ\n",
    "new symlink": "diff --git a/l b/l\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/l\n"
                   "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
    "mode to symlink": "diff --git a/l b/l\nold mode 100644\nnew mode 120000\n",
    "symlink on index line": "diff --git a/l b/l\nindex 1111111..2222222 120000\n--- a/l\n+++ b/l\n"
                             "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+/etc\n\\ No newline at end of file\n",
    "absolute ---/+++": hunk("/etc/passwd", "/etc/passwd"),
    "absolute after prefix": hunk("a//etc/passwd", "b//etc/passwd"),
    "absolute windows": hunk("a/C:/x.py", "b/C:/x.py"),
    "dotdot in ---/+++": hunk("a/../outside.py", "b/../outside.py"),
    "dotdot only in +++": hunk("a/inside.py", "b/../outside.py"),
    "dotdot in the middle": hunk("a/src/../../outside.py", "b/src/../../outside.py"),
    "bare dotdot": hunk("a/..", "b/.."),
    "dotdot with timestamp": "--- a/../x.py\t2020-01-01 00:00:00\n+++ b/../x.py\t2020-01-01 00:00:00\n"
                             "@@ -1 +1 @@\n-old\n+new\n",
    "dotdot in diff --git header": "diff --git a/../x.sh b/../x.sh\nold mode 100644\nnew mode 100755\n",
    "header disagrees with ---/+++": "diff --git a/ok.py b/../../evil.py\n" + hunk("a/ok.py", "b/ok.py"),
    "dotdot in rename to": "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to ../y.py\n",
    "dotdot in rename from": "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from ../x.py\nrename to y.py\n",
    "dotdot in copy to": "diff --git a/x.py b/y.py\nsimilarity index 100%\ncopy from x.py\ncopy to ../../y.py\n",
    "dotdot in a quoted path": 'diff --git "a/x y.py" "b/../x y.py"\n--- "a/x y.py"\n+++ "b/../x y.py"\n'
                               "@@ -1 +1 @@\n-old\n+new\n",
    ".git hook": hunk("a/.git/hooks/pre-commit", "b/.git/hooks/pre-commit"),
    ".git config in header": "diff --git a/.git/config b/.git/config\nold mode 100644\nnew mode 100755\n",
    "nested .git": hunk("a/vendor/lib/.git/config", "b/vendor/lib/.git/config"),
    ".git file itself": "diff --git a/.git b/.git\nnew file mode 100644\n--- /dev/null\n+++ b/.git\n"
                        "@@ -0,0 +1 @@\n+gitdir: /tmp/elsewhere\n",
    ".git via dot segment": hunk("a/./.git/config", "b/./.git/config"),
    "CRLF dotdot": "--- a/../x.py\r\n+++ b/../x.py\r\n@@ -1 +1 @@\r\n-old\r\n+new\r\n",
    "CRLF symlink": "diff --git a/l b/l\r\nnew file mode 120000\r\n--- /dev/null\r\n+++ b/l\r\n@@ -0,0 +1 @@\r\n+/etc\r\n",
    "CRLF binary": "diff --git a/b b/b\r\nindex 1..2 100644\r\nBinary files a/b and b/b differ\r\n",
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_hostile_patches_are_rejected(name):
    with pytest.raises(PatchRejected) as info:
        check_model_patch(REJECTED[name])
    assert info.value.reason == "patch_rejected"


def test_rejection_messages_say_why():
    with pytest.raises(PatchRejected, match="escapes the repository"):
        check_model_patch(REJECTED["dotdot in rename to"])
    with pytest.raises(PatchRejected, match="absolute"):
        check_model_patch(REJECTED["absolute ---/+++"])
    with pytest.raises(PatchRejected, match=r"\.git"):
        check_model_patch(REJECTED[".git hook"])
    with pytest.raises(PatchRejected, match="symlink"):
        check_model_patch(REJECTED["mode to symlink"])


def test_crlf_paths_are_reported_without_the_cr():
    patch = NORMAL.replace("\n", "\r\n")
    assert check_model_patch(patch).modified == ("src/pkg/mod.py",)


def test_oversize_patch_is_rejected(monkeypatch):
    monkeypatch.setattr(patches, "MAX_PATCH_BYTES", len(NORMAL.encode()) + 10)
    assert check_model_patch(NORMAL)
    big = NORMAL + git_diff("a/other_file_name.py", "b/other_file_name.py")
    with pytest.raises(PatchRejected, match="limit"):
        check_model_patch(big)


def test_size_limit_counts_utf8_bytes_not_characters(monkeypatch):
    text = NORMAL.replace("+new", "+" + "é" * 50)
    monkeypatch.setattr(patches, "MAX_PATCH_BYTES", len(text) + 10)  # chars fit, bytes do not
    with pytest.raises(PatchRejected, match="limit"):
        check_model_patch(text)


def test_default_size_limit_is_applied():
    filler = "".join(f"+line {i} {'x' * 60}\n" for i in range(patches.MAX_PATCH_BYTES // 60))
    with pytest.raises(PatchRejected, match="limit"):
        check_model_patch(NORMAL + filler)


# --------------------------------------------------------------------------- helpers

@pytest.mark.parametrize("path, fine", [
    ("src/x.py", True), (".gitignore", True), ("a/.github/x", True), ("..foo", True),
    ("", False), ("/abs", False), ("C:/x", False), ("../x", False), ("a/../../x", False),
    ("a/../b", False), ("..", False), (".git", False), (".git/HEAD", False), ("a/.git/x", False),
    ("x\x00y", False),
])
def test_unsafe_path_reason(path, fine):
    assert (unsafe_path_reason(path) is None) is fine


def test_matches_any_checks_path_and_basename():
    assert matches_any("tests/conftest.py", ("conftest.py",))
    assert matches_any("setup.cfg", ("*.cfg",))
    assert matches_any("a/b/pytest.ini", ("a/*/pytest.ini",))
    assert not matches_any("src/conftest_helper.py", ("conftest.py",))
    assert not matches_any("src/x.py", ())
