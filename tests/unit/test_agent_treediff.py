"""The working sandbox's host side without a container: hostile tar streams materialised
(harness/agents/treediff.py), the patch against a real git base, and the pure helpers of
harness/agents/workspace.py and harness/engine/interactive.py."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.agents import treediff, treeread
from harness.agents.treediff import BaseTree, diff_tree, git_version, parse_numstat_binary, parse_raw
from harness.agents.treeread import CappedReader, TreeLimits, materialise, member_parts
from harness.agents.workspace import check_arguments, parse_user, setup_command
from harness.engine.interactive import OutputCapture
from harness.errors import WorkingTreeRefused


def tar_of(*entries: tuple) -> bytes:
    """(name, kind, payload[, mode]) → a tar stream; kind: file, dir, symlink, hardlink, fifo, chr."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload, *rest in entries:
            info = tarfile.TarInfo(name)
            info.mode = rest[0] if rest else (0o755 if kind == "dir" else 0o644)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                info.linkname = payload
            tar.addfile(info)
    return buffer.getvalue()


def chunks(data: bytes, size: int = 7000):
    return (data[i:i + size] for i in range(0, len(data), size))


def unpack(data: bytes, dest: Path, limits: TreeLimits | None = None, base=None):
    dest.mkdir(exist_ok=True)
    return materialise(CappedReader(chunks(data), 1 << 30), dest, "testbed", limits or TreeLimits(), base)


def listing(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = path.read_bytes().decode()
    return out


# ----------------------------------------------------------------------------- materialise
def test_a_plain_tree_is_written_with_links_as_links_and_git_left_out(tmp_path):
    stats = unpack(tar_of(("testbed", "dir", None), ("testbed/.git", "dir", None),
                          ("testbed/.git/config", "file", b"[core]\n\tfsmonitor = evil\n"),
                          ("testbed/a", "dir", None), ("testbed/a/x.py", "file", b"x = 1\n", 0o755),
                          ("testbed/a/sub/.git", "file", b"gitdir: /etc\n"),
                          ("testbed/up", "symlink", "../../etc/passwd"), ("testbed/abs", "symlink", "/"),
                          ("testbed/a/same.py", "hardlink", "testbed/a/x.py"),
                          ("testbed/fifo", "fifo", None), ("testbed/dev", "chr", None),
                          ("testbed/new\nline", "file", b"odd\n")), tmp_path / "tree")
    tree = tmp_path / "tree"
    assert listing(tree) == {"a": "dir", "a/x.py": "x = 1\n", "a/same.py": "x = 1\n", "abs": "-> /",
                             "up": "-> ../../etc/passwd", "new\nline": "odd\n"}
    assert os.stat(tree / "a/x.py").st_mode & 0o777 == 0o755
    assert (stats.skipped_git, stats.skipped_special) == (3, 2)


@pytest.mark.parametrize("entries, message", [
    # a link to a host directory, then an entry through it (the tree changed while it was read)
    ((("testbed/evil", "symlink", "{victim}"), ("testbed/evil/pwned", "file", b"x")), "symbolic link"),
    ((("testbed/evil", "symlink", "{victim}"), ("testbed/evil/d", "dir", None)), "symbolic link"),
    ((("testbed/evil", "symlink", "/"), ("testbed/evil", "file", b"x")), "entry twice"),
    ((("testbed/evil", "symlink", "{victim}"), ("testbed/evil", "dir", None)), "entry twice"),
    ((("testbed/d", "dir", None), ("testbed/d", "symlink", "/")), "entry twice"),
    ((("testbed/d/f", "file", b"1"), ("testbed/d", "symlink", "/")), "entry twice"),
    ((("testbed/d/f", "file", b"1"), ("testbed/d", "file", b"2")), "entry twice"),
    ((("testbed/f", "file", b"1"), ("testbed/f", "file", b"2")), "entry twice"),
    ((("testbed/f", "file", b"1"), ("testbed/f/g", "file", b"2")), "symbolic link or a file"),
    ((("testbed/../outside", "file", b"x"),), "'..'"),
    ((("/abs/path", "file", b"x"),), "absolute"),
    ((("elsewhere/x", "file", b"x"),), "outside the tree"),
    ((("testbed/./x", "file", b"x"),), "'.'"),
    ((("testbed/h", "hardlink", "/etc/passwd"),), "outside the tree"),
    ((("testbed/h", "hardlink", "testbed/../../etc/passwd"),), "'..'"),
    ((("testbed/.git/config", "file", b"x"), ("testbed/h", "hardlink", "testbed/.git/config")), "never read"),
    ((("testbed/l", "symlink", "x"), ("testbed/h", "hardlink", "testbed/l")), "not a file"),
])
def test_hostile_streams_are_refused_and_nothing_lands_outside(tmp_path, entries, message):
    victim = tmp_path / "victim"
    victim.mkdir()
    filled = [tuple(str(v).replace("{victim}", str(victim)) if isinstance(v, str) and k == 2 else v
                    for k, v in enumerate(e)) for e in entries]
    with pytest.raises(WorkingTreeRefused, match=message.replace("(", r"\(")):
        unpack(tar_of(*filled), tmp_path / "tree")
    assert list(victim.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree", "victim"]
    assert not (tmp_path / "outside").exists()


def test_the_limits_refuse_with_the_path_named(tmp_path):
    deep = "testbed/" + "d/" * 5 + "f"
    with pytest.raises(WorkingTreeRefused, match=r"deeper than 4 directories"):
        unpack(tar_of((deep, "file", b"x")), tmp_path / "a", TreeLimits(depth=4))
    with pytest.raises(WorkingTreeRefused, match="more than 2 entries"):
        unpack(tar_of(*[(f"testbed/f{i}", "file", b"x") for i in range(3)]), tmp_path / "b", TreeLimits(entries=2))
    with pytest.raises(WorkingTreeRefused, match="over 20 bytes"):
        unpack(tar_of(("testbed/" + "n" * 30, "file", b"x")), tmp_path / "c", TreeLimits(path_bytes=20))
    data = tar_of(("testbed/big", "file", b"z" * 100_000))
    with pytest.raises(WorkingTreeRefused, match="over 50000 bytes"):
        materialise(CappedReader(chunks(data), 50_000), tmp_path / "c", "testbed", TreeLimits())


def test_a_deep_chain_is_written_without_running_out_of_descriptors(tmp_path):
    # Counted against what was open before: the suite's earlier tests leave descriptors of
    # their own (CI saw 91 open in the whole run), and a walk holding one descriptor per
    # level would leave 200 more open here.
    names = [("testbed/" + "/".join(["d"] * n), "dir", None) for n in range(1, 201)]
    before = len(os.listdir("/proc/self/fd"))
    unpack(tar_of(*names, ("testbed/" + "d/" * 200 + "leaf", "file", b"deep")), tmp_path / "tree")
    assert (tmp_path / "tree" / ("d/" * 200 + "leaf")).read_bytes() == b"deep"
    assert len(os.listdir("/proc/self/fd")) - before < 8


def test_member_parts():
    assert member_parts("testbed", "testbed") is None
    assert member_parts("testbed/", "testbed") is None
    assert member_parts("testbed/a/b/", "testbed") == ("a", "b")
    for bad in ("/testbed/a", "testbed//a", "testbed/a/../b", "other/a", "", "testbed/."):
        with pytest.raises(WorkingTreeRefused):
            member_parts(bad, "testbed")


def test_the_capped_reader_streams_and_refuses_past_its_limit():
    reader = CappedReader([b"abc", b"", b"defg"], 7)
    assert reader.read() == b"abcdefg"
    with pytest.raises(WorkingTreeRefused, match="over 6 bytes"):
        CappedReader([b"abc", b"defg"], 6).read()


# ----------------------------------------------------------------------------- the patch
def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True).stdout.decode()


@pytest.fixture
def base_repo(tmp_path) -> tuple[Path, BaseTree]:
    repo = tmp_path / "base"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "keep.txt").write_text("one\ntwo\n")
    (repo / "gone.txt").write_text("bye\n")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "tracked.log").write_text("tracked though ignored\n")
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-qm", "base")
    return repo, BaseTree(repo / ".git" / "objects", git(repo, "rev-parse", "HEAD^{tree}").strip())


def test_the_patch_is_git_add_all_against_the_base(tmp_path, base_repo):
    repo, base = base_repo
    stream = tar_of(("testbed", "dir", None), ("testbed/.git", "dir", None),
                    ("testbed/.gitignore", "file", b"*.log\n"), ("testbed/keep.txt", "file", b"one\nTWO\n"),
                    ("testbed/tracked.log", "file", b"changed\n"), ("testbed/new.log", "file", b"ignored\n"),
                    ("testbed/added.txt", "file", b"hello\n"), ("testbed/blob.bin", "file", b"\0\1\2"),
                    ("testbed/link", "symlink", "/etc/passwd"))
    diff = diff_tree(chunks(stream), "testbed", base, scratch_dir=tmp_path)
    # the same changes made in a checkout, measured by git itself
    (repo / "keep.txt").write_text("one\nTWO\n")
    (repo / "tracked.log").write_text("changed\n")
    (repo / "new.log").write_text("ignored\n")
    (repo / "added.txt").write_text("hello\n")
    (repo / "blob.bin").write_bytes(b"\0\1\2")
    (repo / "link").symlink_to("/etc/passwd")
    (repo / "gone.txt").unlink()
    git(repo, "add", "-A")
    assert diff.patch == git(repo, "diff", "--cached")
    assert diff.files == ("added.txt", "blob.bin", "gone.txt", "keep.txt", "link", "tracked.log")
    assert diff.binary_files == ("blob.bin",) and diff.symlinks == ("link",)
    assert "new.log" not in diff.patch
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness-tree-")] == []


def test_the_host_s_own_git_configuration_never_applies(tmp_path, base_repo, monkeypatch):
    """A filter or diff driver the tree's .gitattributes names is defined nowhere host git
    looks: not in the user's configuration, not in the environment's."""
    _, base = base_repo
    marker = tmp_path / "ran"
    home = tmp_path / "home"
    (home / "git").mkdir(parents=True)
    config = f"[filter \"pwn\"]\n\tclean = touch {marker}\n[diff \"pwn\"]\n\ttextconv = touch {marker}\n"
    (home / ".gitconfig").write_text(config)
    (home / "git" / "config").write_text(config)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'filter.pwn.clean'='touch {marker}'")
    stream = tar_of(("testbed/.gitattributes", "file", b"* filter=pwn diff=pwn\n"),
                    ("testbed/keep.txt", "file", b"changed\n"))
    diff = diff_tree(chunks(stream), "testbed", base, scratch_dir=tmp_path)
    assert "keep.txt" in diff.files and "+changed" in diff.patch
    assert not marker.exists()


def test_only_what_differs_from_the_base_is_written(tmp_path, base_repo, monkeypatch):
    repo, base = base_repo
    listing = treediff.parse_ls_tree(git(repo, "ls-tree", "-r", "-z", "--full-tree", base.tree).encode())
    monkeypatch.setattr(treeread, "IN_MEMORY", 4)  # keep.txt (8 bytes) takes the big-file path
    stats = unpack(tar_of(("testbed/keep.txt", "file", b"one\ntwo\n"), ("testbed/gone.txt", "file", b"bye\n"),
                          ("testbed/.gitignore", "file", b"*.log\n"), ("testbed/tracked.log", "file", b"new\n"),
                          ("testbed/exec.txt", "file", b"bye\n")), tmp_path / "tree", base=listing)
    assert sorted(stats.unchanged) == ["gone.txt", "keep.txt"]
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == [".gitignore", "exec.txt", "tracked.log"]


def test_a_hard_link_to_an_unchanged_file_gets_the_base_s_bytes(tmp_path, base_repo):
    _, base = base_repo
    stream = tar_of(("testbed/gone.txt", "file", b"bye\n"), ("testbed/keep.txt", "hardlink", "testbed/gone.txt"))
    diff = diff_tree(chunks(stream), "testbed", base, scratch_dir=tmp_path)
    assert diff.files == (".gitignore", "keep.txt", "tracked.log")
    assert "-one\n-two\n+bye" in diff.patch


def test_an_unchanged_file_an_attribute_converts_is_added_as_git_would(tmp_path):
    """A blob with CRLF line ends under ``text``: the sandbox's git re-reads it (the copy
    changed its stat data) and normalises it; so does the host."""
    repo = tmp_path / "base"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (repo / "plain.txt").write_bytes(b"c\r\n")
    git(repo, "add", "-A")
    (repo / ".gitattributes").write_text("crlf.txt text\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "base")
    base = BaseTree(repo / ".git" / "objects", git(repo, "rev-parse", "HEAD^{tree}").strip())
    stream = tar_of(("testbed/crlf.txt", "file", b"a\r\nb\r\n"), ("testbed/plain.txt", "file", b"c\r\n"),
                    ("testbed/.gitattributes", "file", b"crlf.txt text\n"))
    diff = diff_tree(chunks(stream), "testbed", base, scratch_dir=tmp_path)
    (repo / ".git" / "index").unlink()  # what the sandbox's copy does: no stat data to trust
    git(repo, "read-tree", "HEAD")
    git(repo, "add", "-A")
    assert diff.patch == git(repo, "diff", "--cached") and diff.files == ("crlf.txt",)


def test_against_the_pristine_tree_the_image_s_own_changes_stay_out(tmp_path, base_repo):
    repo, base = base_repo
    pristine = tar_of(("testbed/keep.txt", "file", b"one\ntwo\nbuild\n"), ("testbed/gone.txt", "file", b"bye\n"),
                      ("testbed/.gitignore", "file", b"*.log\n"), ("testbed/tracked.log", "file", b"tracked though "
                                                                                                b"ignored\n"),
                      ("testbed/artefact.txt", "file", b"made by the build\n"))
    agent = tar_of(("testbed/keep.txt", "file", b"one\ntwo\nbuild\nagent\n"), ("testbed/gone.txt", "file", b"bye\n"),
                   ("testbed/.gitignore", "file", b"*.log\n"), ("testbed/tracked.log", "file", b"tracked though "
                                                                                             b"ignored\n"),
                   ("testbed/artefact.txt", "file", b"made by the build\n"))
    diff = diff_tree(chunks(agent), "testbed", base, scratch_dir=tmp_path, pristine=(chunks(pristine), "testbed"))
    assert diff.files == ("keep.txt",)
    assert diff.patch.endswith(" one\n two\n build\n+agent\n")
    exported = diff_tree(chunks(agent), "testbed", base, scratch_dir=tmp_path)
    assert exported.files == ("artefact.txt", "keep.txt") and exported.base_tree == base.tree != diff.base_tree


def test_a_patch_past_its_limit_is_refused(tmp_path, base_repo):
    _, base = base_repo
    stream = tar_of(("testbed/keep.txt", "file", b"line\n" * 10_000))
    with pytest.raises(WorkingTreeRefused, match="the patch printed more than 1000 bytes"):
        diff_tree(chunks(stream), "testbed", base, TreeLimits(patch_bytes=1000), scratch_dir=tmp_path)


def test_a_path_git_refuses_is_refused_with_git_s_words(tmp_path, base_repo):
    _, base = base_repo
    stream = tar_of(("testbed/.gitmodules", "symlink", "/etc/passwd"))
    with pytest.raises(WorkingTreeRefused, match="git add -A failed"):
        diff_tree(chunks(stream), "testbed", base, scratch_dir=tmp_path)


# ----------------------------------------------------------------------------- pure helpers
def test_git_listings_parse():
    raw = (b":100644 100644 aaa bbb M\0keep.txt\0:000000 120000 000 ccc A\0a link\0"
           b":120000 100644 ddd eee T\0was\nlink\0")
    assert parse_raw(raw) == (["keep.txt", "a link", "was\nlink"], ["a link", "was\nlink"])
    assert parse_numstat_binary(b"1\t0\tkeep.txt\0-\t-\tblob.bin\0-\t-\tname\twith tab\0") == \
        ["blob.bin", "name\twith tab"]
    assert parse_raw(b"") == ([], []) and parse_numstat_binary(b"") == []
    assert git_version("git version 2.39.5") == (2, 39)
    assert git_version("git version 2.30.2.windows.1") == (2, 30) and git_version("nonsense") == (0, 0)
    assert treeread.shown("a\nb") == "'a\\nb'" and len(treeread.shown("x" * 1000)) < 210


def test_output_capture_keeps_head_and_tail():
    capture = OutputCapture(10, 4)
    for piece in (b"012", b"345678", b"9abcdef"):
        capture.add(piece)
    assert capture.truncated and capture.total == 16
    assert capture.text() == "012345\n[harness: 6 bytes of output left out]\ncdef"
    small = OutputCapture(10, 4)
    small.add(b"0123456789")
    assert not small.truncated and small.text() == "0123456789"
    bad = OutputCapture(10, 0)
    bad.add(b"\xff\xfeok")
    assert bad.text() == "\ufffd\ufffdok"
    with pytest.raises(ValueError):
        OutputCapture(4, 5)


def test_workspace_arguments_are_checked():
    check_arguments("echo hi", "/testbed", 1.5, {"A": "b"})
    for command, cwd, timeout, env in [("a\0b", "/", 1, None), ("x", "relative", 1, None), ("x", "/", 0, None),
                                       ("x", "/", float("inf"), None), ("x", "/", True, None),
                                       ("x", "/", 1, {"A=B": "c"}), ("x", "/", 1, {"": "c"}),
                                       ("x", "/", 1, {"A": "c\0"})]:
        with pytest.raises(ValueError):
            check_arguments(command, cwd, timeout, env)
    assert parse_user("1000:1001") == (1000, 1001) and parse_user("1000") == (1000, 1000)
    with pytest.raises(ValueError):
        parse_user("harness")
    argv = setup_command(1000, 1000)
    assert argv[:2] == ["/bin/sh", "-c"] and "chown 1000:1000 /testbed" in argv[2]
    assert "--bounding-set=-all" in argv[2] and argv[2].endswith("cp -a /opt/harness/testbed/. /testbed/")
