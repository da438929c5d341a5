"""Source repositories and the one-commit export.

A repository comes from (in order): ``--repo OWNER/NAME=PATH``, ``--repos-dir DIR``
holding ``DIR/OWNER__NAME`` (bare or not), or a bare clone kept in the cache, made once
from the public URL when the machine is online.

:func:`export_tree` writes the tree at ``base_commit`` into a fresh repository with
exactly one commit: no earlier or later history, no remotes, tags, reflog, packed refs,
hooks or alternates. The new commit's tree is checked to be identical to the source
commit's tree (same git tree hash).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from harness.errors import InputError
from harness.locks import file_lock

#: Identity and date of the single commit: fixed, so the export is reproducible.
EXPORT_ENV = {
    "GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}
PUBLIC_URL = "https://github.com/{repo}.git"


class RepositoryUnavailable(InputError):
    """The repository or the commit cannot be found."""


@dataclass(frozen=True)
class ExportedTree:
    """A one-commit repository on the host. ``tree_sha`` is the git tree hash of the
    base commit (a content hash of every file)."""

    path: Path
    tree_sha: str
    commit_sha: str


class RepoResolver:
    def __init__(self, cache_dir: Path, repos_dir: Path | None = None,
                 overrides: dict[str, Path] | None = None, allow_clone: bool = True) -> None:
        self.cache_dir = Path(cache_dir)
        self.repos_dir = Path(repos_dir) if repos_dir else None
        self.overrides = {k: Path(v) for k, v in (overrides or {}).items()}
        self.allow_clone = allow_clone

    def path_for(self, repo: str) -> Path:
        """Where the repository lives locally, cloning it into the cache if needed."""
        if repo in self.overrides:
            path = self.overrides[repo]
            if not _is_git_dir(path):
                raise RepositoryUnavailable(f"--repo {repo}={path} is not a git repository", field="repo")
            return path
        dirname = repo.replace("/", "__")
        if self.repos_dir is not None:
            for candidate in (self.repos_dir / dirname, self.repos_dir / f"{dirname}.git"):
                if _is_git_dir(candidate):
                    return candidate
        cached = self.cache_dir / "repos" / f"{dirname}.git"
        if _is_git_dir(cached):
            return cached
        if not self.allow_clone:
            raise RepositoryUnavailable(f"repository {repo} not found locally (looked in "
                                        f"{self.repos_dir or '-'} and {cached.parent}); pass --repos-dir "
                                        "or --repo OWNER/NAME=PATH", field="repo")
        with file_lock(self.cache_dir / "locks", f"clone-{dirname}"):
            if not _is_git_dir(cached):
                tmp = cached.with_name(cached.name + ".tmp")
                shutil.rmtree(tmp, ignore_errors=True)
                try:
                    git.Repo.clone_from(PUBLIC_URL.format(repo=repo), tmp, bare=True, mirror=True)
                except git.GitCommandError as exc:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise RepositoryUnavailable(f"repository {repo} not found locally and cloning failed: "
                                                f"{exc.stderr.strip()[:300]}", field="repo") from None
                tmp.rename(cached)
        return cached

    def open(self, repo: str) -> git.Repo:
        return git.Repo(self.path_for(repo))


def _is_git_dir(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        git.Repo(path)
        return True
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return False


def resolve_commit(repo: git.Repo, sha: str, instance_id: str) -> str:
    """Full sha of ``sha`` (which must name a commit). Raises RepositoryUnavailable."""
    try:
        return repo.git.rev_parse("--verify", "--quiet", f"{sha}^{{commit}}")
    except git.GitCommandError:
        raise RepositoryUnavailable(f"commit {sha} not in {repo.git_dir}", record=instance_id,
                                    field="base_commit") from None


def read_blob(repo: git.Repo, commit: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``commit``, or None when the path does not exist there."""
    try:
        blob = repo.commit(commit).tree / path
    except KeyError:
        return None
    if blob.type != "blob":
        return None
    return blob.data_stream.read()


def blob_mode(repo: git.Repo, commit: str, path: str) -> int | None:
    try:
        return (repo.commit(commit).tree / path).mode
    except KeyError:
        return None


def export_tree(repo: git.Repo, commit: str, dest: Path) -> ExportedTree:
    """Write ``commit``'s tree into a new one-commit repository at ``dest`` (replaced).

    Raises RepositoryUnavailable when the commit is missing, and RuntimeError if the
    exported tree does not hash to the source tree (it never should).
    """
    full = resolve_commit(repo, commit, "")
    source_tree = repo.commit(full).tree.hexsha
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=dest.parent))
    try:
        env = {**os.environ, **EXPORT_ENV}
        with tempfile.NamedTemporaryFile(prefix="harness-index-") as index:
            # Populate the work tree straight from the object database (no checkout of the
            # source repository, no attribute-driven export rewriting like git-archive).
            idx_env = {**env, "GIT_INDEX_FILE": index.name}
            _git(["--git-dir", str(repo.git_dir), "read-tree", full], idx_env)
            _git(["--git-dir", str(repo.git_dir), "--work-tree", str(tmp), "checkout-index", "--all",
                  "--force", f"--prefix={tmp}/"], idx_env)
        _git(["init", "--quiet", "--initial-branch=main", str(tmp)], env)
        for key, value in (("core.logAllRefUpdates", "false"), ("core.autocrlf", "false"),
                           ("gc.auto", "0"), ("user.name", "harness"), ("user.email", "harness@localhost"),
                           ("commit.gpgsign", "false")):
            _git(["-C", str(tmp), "config", key, value], env)
        _git(["-C", str(tmp), "add", "--all", "--force", "."], env)
        _git(["-C", str(tmp), "commit", "--quiet", "--no-verify", "--allow-empty", "-m", "base"], env)
        tree = _git(["-C", str(tmp), "rev-parse", "HEAD^{tree}"], env).strip()
        head = _git(["-C", str(tmp), "rev-parse", "HEAD"], env).strip()
        if tree != source_tree:
            raise RuntimeError(f"exported tree {tree} differs from source tree {source_tree} of {full}")
        gitdir = tmp / ".git"
        for leftover in ("hooks", "logs", "description", "info", "ORIG_HEAD", "FETCH_HEAD", "packed-refs"):
            target = gitdir / leftover
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportedTree(dest, tree, head)


def _git(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(["git", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:4])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout
