"""Issue 36, class 5: every path form git writes is read the way git reads it.

The property is checked against git itself: for each file name (non-ASCII, spaces, quotes,
backslashes, tabs, a name that looks like a second path) and each operation (modify,
create, delete, rename, copy, mode change), a real repository writes the diff in every
form git offers (default C-quoting, ``core.quotePath=false``, ``--no-prefix``, custom
prefixes) and GNU diff writes a traditional one; ``git apply`` (the set-up step's first
strategy) applies it to a fresh checkout, and the paths the tree shows changed must be
exactly what :func:`harness.patches.patch_files` reads, split alike into created,
deleted and modified. At 6eb3dd5 the quoted and prefix-less forms disagree (the reader
kept the quotes and stripped only ``a/``/``b/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.patches import check_model_patch, patch_files

NAMES = ["plain.py", "café.py", "日本/語.py", "sp ace/f g.py", 'q"uote.py', "back\\slash.py", "tab\tx.py",
         "a b/c.py", "dir/b c.py", "x/ y.py", "-dash.py", "trailing .py"]
ENV = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "LC_ALL": "C"}


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, check=check)


def _repo(root: Path, files: dict[str, str]) -> Path:
    _git(root.parent, "init", "-q", str(root))
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def _changed(repo: Path) -> tuple[set[str], set[str], set[str]]:
    """(created, deleted, modified) as the tree shows them after the patch."""
    out = _git(repo, "status", "--porcelain=v1", "-z", "--no-renames", "-uall").stdout.decode("utf-8", "surrogateescape")
    created, deleted, modified = set(), set(), set()
    for entry in filter(None, out.split("\0")):
        code, path = entry[:2], entry[3:]
        (created if code == "??" else deleted if "D" in code else modified).add(path)
    return created, deleted, modified


OPERATIONS = ("modify", "create", "delete", "rename", "copy", "mode")
FORMS = {"default": [], "unquoted": ["-c", "core.quotePath=false"], "prefixes": ["--src-prefix=x/", "--dst-prefix=y/"],
         "no-prefix": ["--no-prefix"]}


def _make(tmp: Path, name: str, operation: str) -> tuple[Path, dict[str, str]]:
    """A repository at its base, and the edit that makes the change (applied by the caller)."""
    body = "".join(f"line {i}\n" for i in range(20))
    files = {"keep/other.py": "x = 1\n"}
    if operation != "create":
        files[name] = body
    return _repo(tmp / "base", files), files


def _edit(repo: Path, name: str, operation: str) -> None:
    path = repo / name
    body = "".join(f"line {i}\n" for i in range(20))
    if operation == "modify":
        path.write_text(body + "added\n")
    elif operation == "create":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("new\n")
        _git(repo, "add", "-N", "--", name)
    elif operation == "delete":
        _git(repo, "rm", "-q", "--", name)
    elif operation == "rename":
        _git(repo, "mv", "--", name, name + ".moved")
    elif operation == "copy":
        target = repo / (name + ".copy")
        shutil.copyfile(path, target)
        _git(repo, "add", "--", name + ".copy")
    elif operation == "mode":
        path.chmod(0o755)


def _diff(repo: Path, form: str, operation: str) -> str:
    extra = FORMS[form]
    config = [a for a in extra if a.startswith("core.") or a == "-c"]
    options = [a for a in extra if a not in config]
    find = ["-M"] if operation == "rename" else ["-C", "--find-copies-harder"] if operation == "copy" else []
    return _git(repo, *config, "diff", "HEAD", *find, *options).stdout.decode("utf-8", "surrogateescape")


def _applied(tmp: Path, files: dict[str, str], patch: str) -> tuple[set[str], set[str], set[str]] | None:
    target = _repo(tmp / "apply", files)
    (tmp / "p.diff").write_bytes(patch.encode("utf-8", "surrogateescape"))
    if _git(target, "apply", "--whitespace=nowarn", str(tmp / "p.diff"), check=False).returncode != 0:
        return None
    return _changed(target)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_git_path_form_reads_as_git_applies_it(tmp_path, form, operation):
    checked = 0
    for index, name in enumerate(NAMES):
        work = tmp_path / str(index)
        work.mkdir()
        repo, files = _make(work, name, operation)
        _edit(repo, name, operation)
        patch = _diff(repo, form, operation)
        assert patch, (name, operation, form)
        shown = _applied(work, files, patch)
        if shown is None:
            # git cannot apply it here (a prefix-less diff names its files one directory up,
            # where they do not exist): the names it read must still be the reader's
            assert form == "no-prefix", (name, operation, form, patch)
            assert set(patch_files(patch).all) == _numstat_names(work, patch), (name, operation, patch)
            continue
        checked += 1
        created, deleted, modified = shown
        read = patch_files(patch)
        assert (set(read.created), set(read.deleted), set(read.modified)) == (created, deleted, modified), \
            (name, operation, form, patch)
        check_model_patch(patch)   # an honest patch of any of these names is accepted
    assert checked >= (len(NAMES) if form != "no-prefix" else 1 if operation == "create" else 0)


def _numstat_names(work: Path, patch: str) -> set[str]:
    """Every name git reads from the patch (``git apply --numstat -z``, which applies nothing)."""
    (work / "n.diff").write_bytes(patch.encode("utf-8", "surrogateescape"))
    proc = _git(work, "apply", "--numstat", "-z", str(work / "n.diff"), check=False)
    if proc.returncode != 0:   # git finds no name at all ("lacks filename information"): nor does the reader
        return set()
    out = proc.stdout.decode("utf-8", "surrogateescape")
    names, fields = set(), out.split("\0")
    i = 0
    while i < len(fields):
        parts = fields[i].split("\t")
        if len(parts) == 3 and parts[2]:
            names.add(parts[2])
            i += 1
        elif len(parts) == 3:   # a rename or copy: the two names follow
            names.update(fields[i + 1:i + 3])
            i += 3
        else:
            i += 1
    return names


def test_traditional_diffs_with_timestamps_read_as_git_applies_them(tmp_path):
    for index, name in enumerate(NAMES[:8]):
        work = tmp_path / str(index)
        (work / "old" / name).parent.mkdir(parents=True)
        (work / "new" / name).parent.mkdir(parents=True)
        (work / "old" / name).write_text("a\nb\n")
        (work / "new" / name).write_text("a\nc\n")
        proc = subprocess.run(["diff", "-u", "old/" + name, "new/" + name], cwd=work, capture_output=True)
        patch = proc.stdout.decode("utf-8", "surrogateescape")
        assert "\t" in patch.splitlines()[0]   # GNU diff's timestamp follows a TAB
        files = {name: "a\nb\n"}
        shown = _applied(work, files, patch)
        assert shown == (set(), set(), {name}), (name, patch)
        assert patch_files(patch).modified == (name,)


def test_quoted_names_unquote_like_git():
    from harness.patch_paths import unquote
    assert unquote(r'"a/caf\303\251.py"') == ("a/café.py", 18)
    assert unquote(r'"a\tb\"c\\d"') == ('a\tb"c\\d', 12)
    assert unquote(r'"a/\377.py"')[0] == "a/\udcff.py"     # not UTF-8: kept as the set-up step reports it
    assert unquote('"unterminated') is None
    assert unquote(r'"bad \q escape"') is None


def test_header_names_take_the_name_both_sides_spell():
    from harness.patch_paths import header_name
    assert header_name("a/sp ace/f g.py b/sp ace/f g.py") == "sp ace/f g.py"
    assert header_name('"a/q\\"x" "b/q\\"x"') == 'q"x'
    assert header_name("a/x b/y") is None       # a rename: names come from its own lines
    assert header_name("x/a b y/a b") == "a b"


def test_hunk_lines_that_look_like_headers_are_content():
    patch = ("diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n"
             "--- a/../../etc/passwd\n x\n")
    from harness.patch_paths import read_paths
    assert [(s.old, s.new) for s in read_paths(patch)] == [("q.sql", "q.sql")]
    assert patch_files(patch).modified == ("q.sql",)


def test_quoted_names_that_escape_the_repository_are_refused():
    from harness.errors import PatchRejected
    patch = ('diff --git "a/../x.py" "b/../x.py"\nnew file mode 100644\n--- /dev/null\n'
             '+++ "b/\\056\\056/x.py"\n@@ -0,0 +1 @@\n+x\n')
    with pytest.raises(PatchRejected, match="escapes"):
        check_model_patch(patch)
