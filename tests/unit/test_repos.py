"""Repositories as they are (harness.inputs.repos), with real git and no engine: config-less
bare directories, ``.git`` suffixes, partial clones lacking a blob, submodules exported
with their content or refused with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.inputs.repos import (GitDir, RepoResolver, RepositoryUnavailable, check_objects, export_tree,
                                  github_repo_name, missing_objects)

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "c1", cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


def listing(repo: GitDir, commit: str) -> set[tuple[str, str]]:
    return {(e.path, e.oid) for e in repo.ls_tree(commit)}


def test_a_bare_directory_without_config_is_opened_as_git_opens_it(tmp_path):
    commit = make_repo(tmp_path / "src", {"a.py": "x = 1\n", "pkg/b.py": "y = 2\n"})
    bare = tmp_path / "mirror" / "repo"
    git("clone", "-q", "--bare", str(tmp_path / "src"), str(bare))
    (bare / "config").unlink()                     # like /work/.mirror/*/repo
    for leftover in ("description", "hooks", "info"):
        shutil.rmtree(bare / leftover, ignore_errors=True)
    repo = GitDir(bare)
    assert repo.resolve_commit(commit[:10]) == commit
    assert repo.read_blob(commit, "pkg/b.py") == b"y = 2\n"
    exported = export_tree(repo, commit, tmp_path / "export")
    assert exported.tree_sha == git("rev-parse", f"{commit}^{{tree}}", cwd=tmp_path / "src")
    assert (tmp_path / "export" / "pkg" / "b.py").read_text() == "y = 2\n"


def test_exporting_runs_no_command_the_repositorys_configuration_names(tmp_path):
    commit = make_repo(tmp_path / "src", {"a.py": "x = 1\n"})
    marker = tmp_path / "fsmonitor-ran"
    git("config", "core.fsmonitor", f"touch {marker}", cwd=tmp_path / "src")  # checkout-index would start it
    repo = GitDir(tmp_path / "src")
    export_tree(repo, commit, tmp_path / "export")
    assert repo.read_blob(commit, "a.py") == b"x = 1\n"
    assert not marker.exists()


def test_repos_dir_finds_plain_bare_and_dot_git_names(tmp_path):
    make_repo(tmp_path / "src", {"a.py": "1\n"})
    repos = tmp_path / "repos"
    git("clone", "-q", "--bare", str(tmp_path / "src"), str(repos / "o__bare.git"))
    git("clone", "-q", str(tmp_path / "src"), str(repos / "o__work"))
    resolver = RepoResolver(tmp_path / "cache", repos, allow_clone=False)
    assert resolver.path_for("o/bare") == repos / "o__bare.git"
    assert GitDir(resolver.path_for("o/work")).git_dir == (repos / "o__work" / ".git").resolve()
    with pytest.raises(RepositoryUnavailable, match="not found locally"):
        resolver.path_for("o/absent")


def test_a_partial_clone_lacking_one_blob_names_path_and_blob(tmp_path):
    commit = make_repo(tmp_path / "src", {"small.py": "s = 1\n", "data/big.txt": "x" * 5000})
    git("config", "uploadpack.allowfilter", "true", cwd=tmp_path / "src")
    partial = tmp_path / "partial.git"
    git("clone", "-q", "--bare", "--no-local", "--filter=blob:limit=1k", f"file://{tmp_path / 'src'}", str(partial))
    big = git("rev-parse", f"{commit}:data/big.txt", cwd=tmp_path / "src")
    shutil.rmtree(tmp_path / "src")                 # the promisor is gone: nothing can be fetched
    repo = GitDir(partial)
    assert missing_objects(repo, commit) == [("data/big.txt", big)]
    with pytest.raises(RepositoryUnavailable) as info:
        check_objects(repo, commit, "o__r-1")
    assert "data/big.txt" in str(info.value) and big in str(info.value) and info.value.record == "o__r-1"
    with pytest.raises(RepositoryUnavailable, match="data/big.txt"):
        export_tree(repo, commit, tmp_path / "export")
    assert not (tmp_path / "export").exists()


def _with_submodule(tmp_path: Path) -> tuple[Path, str, Path, str]:
    helpers_commit = make_repo(tmp_path / "helpers", {"ah/__init__.py": "VERSION = '2.0'\n", "setup.py": "# h\n"})
    main = tmp_path / "main"
    make_repo(main, {"setup.py": "# main\n"})
    # .gitmodules names the public URL; the gitlink is written directly (no network)
    (main / ".gitmodules").write_text('[submodule "astropy_helpers"]\n\tpath = astropy_helpers\n'
                                      '\turl = https://github.com/astropy/astropy-helpers.git\n')
    git("update-index", "--add", "--cacheinfo", f"160000,{helpers_commit},astropy_helpers", cwd=main)
    git("add", ".gitmodules", cwd=main)
    git("commit", "-qm", "add submodule", cwd=main)
    return main, git("rev-parse", "HEAD", cwd=main), tmp_path / "helpers", helpers_commit


def test_a_submodule_is_exported_with_its_content_from_its_own_repository(tmp_path):
    main, commit, helpers, helpers_commit = _with_submodule(tmp_path)
    asked = []

    def source(path: str, url: str, sha: str) -> GitDir:
        asked.append((path, github_repo_name(url), sha))
        return GitDir(helpers)

    exported = export_tree(GitDir(main), commit, tmp_path / "export", source)
    assert asked == [("astropy_helpers", "astropy/astropy-helpers", helpers_commit)]
    assert (tmp_path / "export" / "astropy_helpers" / "ah" / "__init__.py").read_text() == "VERSION = '2.0'\n"
    assert exported.submodules == (("astropy_helpers", str(helpers), helpers_commit),)
    export = GitDir(tmp_path / "export")
    expected = {p: o for p, o in listing(GitDir(main), commit) if p != "astropy_helpers"}
    expected.update({f"astropy_helpers/{p}": o for p, o in listing(GitDir(helpers), helpers_commit)})
    assert dict(listing(export, "HEAD")) == expected
    assert git("rev-list", "--count", "HEAD", cwd=tmp_path / "export") == "1"


def test_a_submodule_without_its_repository_is_refused_with_the_reason(tmp_path):
    main, commit, _, helpers_commit = _with_submodule(tmp_path)
    with pytest.raises(RepositoryUnavailable) as info:
        export_tree(GitDir(main), commit, tmp_path / "export")
    assert "astropy_helpers" in str(info.value) and helpers_commit in str(info.value)
    resolver = RepoResolver(tmp_path / "cache", tmp_path / "empty", allow_clone=False)

    def source(path: str, url: str, sha: str) -> GitDir:
        return GitDir(resolver.path_for(github_repo_name(url)))

    with pytest.raises(RepositoryUnavailable, match="astropy/astropy-helpers"):
        export_tree(GitDir(main), commit, tmp_path / "export", source)


def test_github_names():
    assert github_repo_name("https://github.com/astropy/astropy-helpers.git") == "astropy/astropy-helpers"
    assert github_repo_name("git@github.com:numpy/numpydoc") == "numpy/numpydoc"
    assert github_repo_name("https://gitlab.com/x/y.git") is None


def test_the_pristine_reader_reads_each_file_once_as_git_has_it(tmp_path):
    """The evaluator's view of the base commit: bytes and mode of files and symlinks, None for
    directories and absent paths, from one listing; a file asked for again is not re-read."""
    from harness.evaluation.node import _PristineReader
    commit = make_repo(tmp_path / "src", {"a.py": "x = 1\n", "pkg/b.py": "y = 2\n", "run.sh": "echo\n"})
    os.chmod(tmp_path / "src" / "run.sh", 0o755)
    os.symlink("pkg/b.py", tmp_path / "src" / "link.py")
    git("add", "-A", cwd=tmp_path / "src")
    git("commit", "-qm", "c2", cwd=tmp_path / "src")
    commit = git("rev-parse", "HEAD", cwd=tmp_path / "src")
    reader = _PristineReader(tmp_path / "src", commit)
    assert reader.read("pkg/b.py") == (b"y = 2\n", 0o100644)
    assert reader.read("run.sh") == (b"echo\n", 0o100755)
    assert reader.read("link.py") == (b"pkg/b.py", 0o120000)
    assert reader.read("pkg") is None and reader.read("nope.py") is None
    assert reader.paths() == {"a.py", "pkg/b.py", "run.sh", "link.py"}
    (tmp_path / "src" / ".git" / "objects").rename(tmp_path / "objects-gone")  # nothing is read again
    assert reader.read("pkg/b.py") == (b"y = 2\n", 0o100644) and reader.read("nope.py") is None


def test_a_read_only_copy_without_refs_is_opened_through_a_view(tmp_path):
    """A repository copied by a tool that drops empty directories has no ``refs/``; git
    alone says "not a git repository". It is opened without writing where it is."""
    commit = make_repo(tmp_path / "src", {"a.py": "x = 1\n", "pkg/b.py": "y = 2\n"})
    bare = tmp_path / "repos" / "o__r.git"
    git("clone", "-q", "--bare", str(tmp_path / "src"), str(bare))
    git("--git-dir", str(bare), "update-ref", f"refs/base/{commit}", commit)
    git("--git-dir", str(bare), "pack-refs", "--all")
    shutil.rmtree(bare / "refs")
    for name in ("config", "description", "hooks", "info"):
        shutil.rmtree(bare / name, ignore_errors=True) if (bare / name).is_dir() else (bare / name).unlink()
    proc = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", commit], capture_output=True, text=True)
    assert proc.returncode != 0 and "not a git repository" in proc.stderr   # what git alone does
    modes = {p: p.stat().st_mode for p in [bare, *bare.rglob("*")]}
    for path in modes:
        path.chmod(modes[path] & ~0o222)
    try:
        resolver = RepoResolver(tmp_path / "cache", tmp_path / "repos", allow_clone=False)
        repo = resolver.open("o/r")
        assert repo.path == bare and repo.git_dir != bare
        assert repo.resolve_commit(commit[:12]) == commit
        assert repo.read_blob(commit, "pkg/b.py") == b"y = 2\n"
        exported = export_tree(repo, commit, tmp_path / "export")
        assert exported.tree_sha == git("rev-parse", f"{commit}^{{tree}}", cwd=tmp_path / "src")
        with pytest.raises(RepositoryUnavailable) as info:
            repo.resolve_commit("0" * 40)
        assert str(bare) in str(info.value)          # the message names the repository, not the view
        assert {p: p.stat().st_mode for p in modes} == {p: m & ~0o222 for p, m in modes.items()}
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


# --------------------------------------------------------------------------- the demo set as a source

def test_the_demo_set_is_a_repository_source_beside_a_repos_dir(tmp_path):
    """``--repos-dir`` and the demo set mix: a demo repository no other source holds is
    built into the cache from the packaged snapshots (it was repository_unavailable)."""
    import pickle

    from harness.inputs import demo
    make_repo(tmp_path / "src", {"a.py": "1\n"})
    repos = tmp_path / "repos"
    git("clone", "-q", "--bare", str(tmp_path / "src"), str(repos / "o__real.git"))
    resolver = RepoResolver(tmp_path / "cache", repos, allow_clone=False)
    calcly = resolver.path_for("harness-demo/calcly")
    assert calcly == (tmp_path / "cache" / "demo-repos" / "harness-demo__calcly").resolve()
    assert demo.read_head(calcly) == demo.expected_head(demo.DEMO_DIR / "repos" / "harness-demo__calcly")
    assert resolver.path_for("o/real") == repos / "o__real.git"
    with pytest.raises(RepositoryUnavailable, match="not found locally"):
        resolver.path_for("harness-demo/absent")   # not one of the demo set's: looked up as any other
    # what it built stays on this machine: a node's copy builds into its own cache
    assert pickle.loads(pickle.dumps(resolver))._demo == {}


def test_an_override_or_a_repos_dir_holding_a_demo_repository_wins_over_the_demo_set(tmp_path):
    make_repo(tmp_path / "mine", {"a.py": "1\n"})
    repos = tmp_path / "repos"
    git("clone", "-q", "--bare", str(tmp_path / "mine"), str(repos / "harness-demo__textkit.git"))
    resolver = RepoResolver(tmp_path / "cache", repos, {"harness-demo/calcly": tmp_path / "mine"}, allow_clone=False)
    assert resolver.path_for("harness-demo/calcly") == tmp_path / "mine"
    assert resolver.path_for("harness-demo/textkit") == repos / "harness-demo__textkit.git"
    assert not (tmp_path / "cache" / "demo-repos").exists()
