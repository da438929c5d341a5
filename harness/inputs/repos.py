"""Source repositories and the one-commit export.

A repository comes from (in order): ``--repo OWNER/NAME=PATH``, ``--repos-dir DIR``
holding ``DIR/OWNER__NAME`` or ``DIR/OWNER__NAME.git`` (bare or not), the demo set
(``harness-demo/*``, built into the cache from the packaged snapshots by
:func:`harness.inputs.demo.demo_repository`), or a bare clone kept in the cache, made once from
the public URL when the machine is online.

Repositories are opened the way git opens them (:class:`GitDir`, the git command line
with ``--git-dir``): a bare directory without a ``config`` file, with or without a
``.git`` suffix, a work tree with ``.git``, all work; so does a (read-only) copy that lost
its empty ``refs/`` directory, which git alone refuses (opened through a view, below). Nothing is fetched lazily (a
partial clone's missing objects are reported, never downloaded).

:func:`export_tree` writes the tree at ``base_commit`` into a fresh repository with
exactly one commit: no earlier or later history, no remotes, tags, reflog, packed refs,
hooks or alternates. Submodules (gitlinks) are exported *with their content*, taken from
the submodule's own repository at the recorded commit, or refused with the reason. The
export is checked file by file against the source listing (every blob id and mode; for
a submodule, its commit's listing under its path).

:func:`missing_objects` finds, before anything is built, every object a commit's tree
needs that the repository lacks, naming path and blob.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Callable

from harness.errors import InputError
from harness.inputs.demo import demo_repository
from harness.locks import file_lock

#: Identity and date of the single commit: fixed, so the export is reproducible.
EXPORT_ENV = {
    "GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}
#: Every git command reading a source repository: no system/global config, no prompt,
#: and never a lazy fetch from a partial clone's promisor remote.
READ_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_LAZY_FETCH": "1", "GIT_NO_REPLACE_OBJECTS": "1"}
#: Configuration every git command reading a source repository gets on its command line:
#: any owner's repository opens, and no command the repository's own configuration names
#: runs (core.fsmonitor: ``checkout-index`` and ``diff-tree`` start it when a work tree is
#: in view, and git has one whenever a command runs with ``--git-dir`` alone)
READ_CONFIG = ("-c", "safe.directory=*", "-c", "core.fsmonitor=false")
PUBLIC_URL = "https://github.com/{repo}.git"
GITLINK_MODE = "160000"


class RepositoryUnavailable(InputError):
    """The repository, the commit or an object the commit needs cannot be found."""


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    type: str
    oid: str
    path: str


@dataclass(frozen=True)
class ExportedTree:
    """A one-commit repository on the host. ``tree_sha`` is the git tree hash of the
    export (equal to the base commit's tree when it has no submodules); ``submodules``
    maps each submodule path to ``(repository, commit)``."""

    path: Path
    tree_sha: str
    commit_sha: str
    submodules: tuple[tuple[str, str, str], ...] = ()


class GitDir:
    """A git directory read through the git command line (``git --git-dir``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        located = locate_git_dir(self.path)
        if located is None:
            raise RepositoryUnavailable(f"{self.path} is not a git repository", field="repo")
        self.git_dir = located

    def run(self, *args: str, check: bool = True, binary: bool = False) -> str | bytes:
        proc = subprocess.run(["git", *READ_CONFIG, "--git-dir", str(self.git_dir), *args],
                              capture_output=True, env={**os.environ, **READ_ENV})
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode(errors="replace"))
        return proc.stdout if binary else proc.stdout.decode(errors="surrogateescape")

    def resolve_commit(self, sha: str, instance_id: str = "") -> str:
        """Full sha of ``sha`` (which must name a commit). Raises RepositoryUnavailable."""
        try:
            return str(self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{sha}^{{commit}}")).strip()
        except GitFailed:
            raise RepositoryUnavailable(f"commit {sha} not in {self.path}", record=instance_id or None,
                                        field="base_commit") from None

    def tree_of(self, commit: str) -> str:
        return str(self.run("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")).strip()

    def ls_tree(self, commit: str) -> list[TreeEntry]:
        """Every blob, symlink and gitlink of ``commit``'s tree (recursively)."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit, binary=True)
        entries = []
        for record in bytes(out).split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, kind, oid = meta.decode().split()
            entries.append(TreeEntry(mode, kind, oid, path.decode("utf-8", "surrogateescape")))
        return entries

    def read_blob(self, commit: str, path: str) -> bytes | None:
        """The bytes of ``path`` at ``commit``, or None when no blob is there."""
        entry = self.entry(commit, path)
        if entry is None or entry.type != "blob":
            return None
        return bytes(self.run("cat-file", "blob", entry.oid, binary=True))

    def entry(self, commit: str, path: str) -> TreeEntry | None:
        out = self.run("ls-tree", "-z", "--full-tree", commit, "--", path, binary=True, check=False)
        for record in bytes(out).split(b"\0"):
            meta, _, name = record.partition(b"\t")
            if name.decode("utf-8", "surrogateescape") == path:
                mode, kind, oid = meta.decode().split()
                return TreeEntry(mode, kind, oid, path)
        return None

    def gitmodules(self, commit: str) -> dict[str, str]:
        """Submodule path → URL from ``.gitmodules`` at ``commit`` (parsed by git itself)."""
        if self.entry(commit, ".gitmodules") is None:
            return {}
        out = str(self.run("config", "--blob", f"{commit}:.gitmodules", "-z", "--get-regexp",
                           r"^submodule\..*\.(path|url)$", check=False))
        paths: dict[str, str] = {}
        urls: dict[str, str] = {}
        for record in out.split("\0"):
            key, _, value = record.partition("\n")
            if key.endswith(".path"):
                paths[key[len("submodule."):-len(".path")]] = value
            elif key.endswith(".url"):
                urls[key[len("submodule."):-len(".url")]] = value
        return {path: urls.get(name, "") for name, path in paths.items()}


class GitFailed(RuntimeError):
    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:4])} failed (exit {code}): {stderr.strip()[:500]}")
        self.stderr = stderr


def locate_git_dir(path: Path) -> Path | None:
    """The git directory at ``path`` as git would find it: ``path/.git`` of a work tree,
    or ``path`` itself when it holds ``HEAD``, ``objects/`` and ``refs/`` (a bare
    repository; a ``config`` file is not required)."""
    path = Path(path)
    dotgit = path / ".git"
    if dotgit.is_dir():
        path = dotgit
    elif dotgit.is_file():  # a worktree or submodule pointer: let git read it
        proc = subprocess.run(["git", *READ_CONFIG, "-C", str(path), "rev-parse", "--absolute-git-dir"],
                              capture_output=True, text=True, env={**os.environ, **READ_ENV})
        return Path(proc.stdout.strip()) if proc.returncode == 0 else None
    if (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir():
        return path.resolve()
    if (path / "commondir").is_file() and (path / "HEAD").is_file():
        return path.resolve()
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return _refless_view(path.resolve())
    return None


#: Where views of git directories that lack ``refs/`` are made (see :func:`_refless_view`).
REFLESS_VIEWS = Path(tempfile.gettempdir()) / "harness-git-views"


def _refless_view(path: Path) -> Path:
    """A git directory git itself opens, for one that has ``HEAD`` and ``objects/`` but no
    ``refs/`` directory (an empty ``refs/`` is lost when a repository is copied by tools
    that drop empty directories; git then says "not a git repository", and the copy may be
    read-only). The view holds copies of the small files that name commits (``HEAD``,
    ``packed-refs``, ``shallow``), an empty ``refs/`` and ``objects`` as a link to the
    original's object store, so nothing is copied or written where the repository is.
    Keyed by the path and the small files' content: a changed original gets a new view."""
    small = {name: (path / name).read_bytes() for name in ("HEAD", "packed-refs", "shallow")
             if (path / name).is_file()}
    key = hashlib.sha256(repr((str(path), sorted(small.items()))).encode()).hexdigest()[:16]
    view = REFLESS_VIEWS / f"{path.name}-{key}"
    if (view / "objects").exists():
        return view
    REFLESS_VIEWS.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=REFLESS_VIEWS))
    (tmp / "refs" / "heads").mkdir(parents=True)
    (tmp / "refs" / "tags").mkdir()
    for name, data in small.items():
        (tmp / name).write_bytes(data)
    (tmp / "objects").symlink_to(path / "objects", target_is_directory=True)
    try:
        tmp.rename(view)
    except OSError:            # another process made the same view first
        shutil.rmtree(tmp, ignore_errors=True)
    return view


def _is_git_dir(path: Path) -> bool:
    return path.exists() and locate_git_dir(path) is not None


class RepoResolver:
    """Finds each repository in the sources of the module docstring, in their order. Sent to
    the nodes of a cluster (pickled): what it built for the demo set is not, since each
    machine builds the demo repositories into its own cache."""

    def __init__(self, cache_dir: str | os.PathLike[str], repos_dir: str | os.PathLike[str] | None = None,
                 overrides: Mapping[str, str | os.PathLike[str]] | None = None, allow_clone: bool = True) -> None:
        self.cache_dir = Path(cache_dir)
        self.repos_dir = Path(repos_dir) if repos_dir else None
        self.overrides = {k: Path(v) for k, v in (overrides or {}).items()}
        self.allow_clone = allow_clone
        self._demo: dict[str, Path | None] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_demo": {}}

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
        demo = self._demo_repository(repo)
        if demo is not None:
            return demo
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
                tmp.parent.mkdir(parents=True, exist_ok=True)
                proc = subprocess.run(["git", "clone", "--quiet", "--mirror", PUBLIC_URL.format(repo=repo), str(tmp)],
                                      capture_output=True, text=True, env={**os.environ, **READ_ENV})
                if proc.returncode != 0:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise RepositoryUnavailable(f"repository {repo} not found locally and cloning failed: "
                                                f"{proc.stderr.strip()[:300]}", field="repo")
                tmp.rename(cached)
        return cached

    def open(self, repo: str) -> GitDir:
        return GitDir(self.path_for(repo))

    def _demo_repository(self, repo: str) -> Path | None:
        """The demo set's repository, built once per resolver (None: not one of the demo set's)."""
        if repo not in self._demo:
            self._demo[repo] = demo_repository(repo, self.cache_dir)
        return self._demo[repo]


# ---------------------------------------------------------------------- module-level helpers

def resolve_commit(repo: GitDir, sha: str, instance_id: str) -> str:
    return repo.resolve_commit(sha, instance_id)


def read_blob(repo: GitDir, commit: str, path: str) -> bytes | None:
    return repo.read_blob(commit, path)


def blob_mode(repo: GitDir, commit: str, path: str) -> int | None:
    entry = repo.entry(commit, path)
    return int(entry.mode, 8) if entry is not None else None


def missing_objects(repo: GitDir, commit: str) -> list[tuple[str, str]]:
    """``(path, object id)`` of every object ``commit``'s tree needs that ``repo`` lacks
    (a partial clone, a damaged copy). Never fetches; ``path`` is ``?`` when the object's
    place cannot be named (a missing tree hides its entries)."""
    out = str(repo.run("rev-list", "--objects", "--missing=print", "--no-walk", commit))
    missing = [line[1:].strip() for line in out.splitlines() if line.startswith("?")]
    if not missing:
        return []
    paths: dict[str, str] = {}
    try:
        for entry in repo.ls_tree(commit):
            paths.setdefault(entry.oid, entry.path)
    except GitFailed:
        pass
    return [(paths.get(oid, "?"), oid) for oid in missing]


def github_repo_name(url: str) -> str | None:
    """``OWNER/NAME`` of a GitHub URL (https, ssh or git), else None."""
    match = re.search(r"github\.com[:/]+([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$", url.strip())
    return f"{match.group(1)}/{match.group(2)}" if match else None


#: Finds the repository of a submodule: (path, url, commit) → its GitDir. Raises
#: RepositoryUnavailable with the reason when it cannot.
SubmoduleSource = Callable[[str, str, str], GitDir]


def export_tree(repo: GitDir, commit: str, dest: Path, submodules: SubmoduleSource | None = None) -> ExportedTree:
    """Write ``commit``'s tree (submodules with their content) into a new one-commit
    repository at ``dest`` (replaced).

    Raises RepositoryUnavailable when the commit, an object or a submodule's repository
    is missing, and RuntimeError if the export does not match the source listing.
    """
    full = repo.resolve_commit(commit)
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=dest.parent))
    try:
        expected, used = _write_tree(repo, full, tmp, "", submodules, depth=0)
        env = {**os.environ, **EXPORT_ENV}
        _git(["init", "--quiet", "--initial-branch=main", str(tmp)], env)
        for key, value in (("core.logAllRefUpdates", "false"), ("core.autocrlf", "false"),
                           ("core.symlinks", "true"), ("gc.auto", "0"), ("user.name", "harness"),
                           ("user.email", "harness@localhost"), ("commit.gpgsign", "false")):
            _git(["-C", str(tmp), "config", key, value], env)
        _git(["-C", str(tmp), "add", "--all", "--force", "."], env)
        _git(["-C", str(tmp), "commit", "--quiet", "--no-verify", "--allow-empty", "-m", "base"], env)
        tree = _git(["-C", str(tmp), "rev-parse", "HEAD^{tree}"], env).strip()
        head = _git(["-C", str(tmp), "rev-parse", "HEAD"], env).strip()
        got = sorted((e.mode, e.oid, e.path) for e in GitDir(tmp).ls_tree("HEAD"))
        if got != sorted(expected):
            differ = sorted(set(got) ^ set(expected))[:5]
            raise RuntimeError(f"exported tree of {full} differs from its source listing: {differ}")
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
    return ExportedTree(dest, tree, head, tuple(used))


def _write_tree(repo: GitDir, commit: str, root: Path, prefix: str, submodules: SubmoduleSource | None,
                depth: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """Check out ``commit``'s files under ``root/prefix``; return the expected listing
    (mode, oid, path) and the submodules used."""
    if depth > 5:
        raise RepositoryUnavailable(f"submodules nested deeper than 5 levels at {prefix!r}", field="repo")
    lacking = missing_objects(repo, commit)
    if lacking:
        raise RepositoryUnavailable(_missing_message(repo, commit, lacking), field="base_commit")
    entries = repo.ls_tree(commit)
    target = root / prefix if prefix else root
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(prefix="harness-index-") as index:
        idx_env = {**os.environ, **READ_ENV, "GIT_INDEX_FILE": index.name}
        # Straight from the object database (no checkout of the source, no attribute-
        # driven rewriting as git-archive would do).
        _git([*READ_CONFIG, "--git-dir", str(repo.git_dir), "read-tree", commit], idx_env)
        _git([*READ_CONFIG, "-c", "core.symlinks=true", "--git-dir", str(repo.git_dir),
              "--work-tree", str(target), "checkout-index", "--all", "--force", f"--prefix={target}/"], idx_env)
    expected = [(e.mode, e.oid, prefix + e.path) for e in entries if e.mode != GITLINK_MODE]
    used: list[tuple[str, str, str]] = []
    gitlinks = [e for e in entries if e.mode == GITLINK_MODE]
    urls = repo.gitmodules(commit) if gitlinks else {}
    for link in gitlinks:
        where = prefix + link.path
        url = urls.get(link.path, "")
        if submodules is None:
            raise RepositoryUnavailable(f"submodule {where!r} (commit {link.oid}, {url or 'no URL in .gitmodules'}) "
                                        "cannot be exported: no submodule source configured", field="repo")
        sub = submodules(where, url, link.oid)
        try:
            sub_commit = sub.resolve_commit(link.oid)
        except RepositoryUnavailable:
            raise RepositoryUnavailable(f"submodule {where!r}: commit {link.oid} is not in {sub.path} "
                                        f"({url})", field="repo") from None
        sub_expected, sub_used = _write_tree(sub, sub_commit, root, where + "/", submodules, depth + 1)
        expected += sub_expected
        used += [(where, str(sub.path), sub_commit), *sub_used]
    return expected, used


def _missing_message(repo: GitDir, commit: str, lacking: list[tuple[str, str]]) -> str:
    named = ", ".join(f"{path} (object {oid})" for path, oid in lacking[:10])
    more = f" and {len(lacking) - 10} more" if len(lacking) > 10 else ""
    return (f"{repo.path} lacks {len(lacking)} object(s) of commit {commit[:12]}'s tree: {named}{more} "
            "(a partial or damaged clone; fetch the full repository, or add a file whose content you "
            "have with `git hash-object -w --no-filters FILE`: git stores it only under the id its "
            "content hashes to, so a wrong file cannot stand in for the object)")


def check_objects(repo: GitDir, commit: str, instance_id: str = "") -> None:
    """Raise RepositoryUnavailable naming path and blob of every missing object."""
    full = repo.resolve_commit(commit, instance_id)
    lacking = missing_objects(repo, full)
    if lacking:
        raise RepositoryUnavailable(_missing_message(repo, full, lacking), record=instance_id or None,
                                    field="base_commit")


def _git(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(["git", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:4])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout
