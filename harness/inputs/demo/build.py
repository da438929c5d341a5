"""The demo set's git repositories, built from the snapshots with deterministic commit ids
(:func:`build_demo_repos`), and the one place that decides how a demo repository is
obtained (:func:`demo_repository`). See :mod:`harness.inputs.demo`."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.inputs.demo.history import (AUTHOR_EMAIL, AUTHOR_NAME, COMMITS_SUBDIR, DEFAULT_BRANCH, DEMO_DIR,
                                         DEMO_OWNER, FILE_MODE, DemoSetError, SourceRepo, blob_sha, commit_message,
                                         expected_head, git_date, history_shas, iter_source_repos, load_history,
                                         snapshot_files)

#: git configuration forced on every git invocation made by this module.
GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("user.name", AUTHOR_NAME),
    ("user.email", AUTHOR_EMAIL),
    ("commit.gpgsign", "false"),
    ("tag.gpgsign", "false"),
    ("core.autocrlf", "false"),
    ("core.eol", "lf"),
    ("core.fileMode", "true"),
    ("core.hooksPath", os.devnull),
    ("init.defaultBranch", DEFAULT_BRANCH),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("color.ui", "false"),
)


# ------------------------------------------------------------------------------ git


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for git that ignores inherited GIT_* variables and all config files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "LANG": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git`` with the forced configuration of :data:`GIT_CONFIG`."""
    cmd = ["git"]
    for key, value in GIT_CONFIG:
        cmd += ["-c", f"{key}={value}"]
    cmd += list(args)
    proc = subprocess.run(
        cmd, cwd=cwd, input=input, env=git_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if check and proc.returncode != 0:
        raise DemoSetError(
            f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}):\n"
            + proc.stderr.decode("utf-8", "replace")
        )
    return proc


def git_out(args: Sequence[str], cwd: Path, **kw: Any) -> str:
    return git(args, cwd, **kw).stdout.decode("utf-8").strip()


def read_head(repo_path: Path) -> str | None:
    """HEAD commit of the repository whose work tree is *repo_path*, or None.

    Only a repository rooted exactly at *repo_path* counts (never an enclosing one).
    """
    git_dir = Path(repo_path) / ".git"
    if not git_dir.is_dir():
        return None
    proc = git([f"--git-dir={git_dir}", "rev-parse", "--verify", "-q", "HEAD^{commit}"], Path(repo_path), check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().strip() or None


def rev_list(repo_path: Path, ref: str = "HEAD") -> list[str]:
    """Commits reachable from *ref*, oldest first."""
    return git_out(["rev-list", "--reverse", ref], Path(repo_path)).split()


def _build_repo(src: SourceRepo, target: Path) -> str:
    """Create the git repository for *src* at *target* (which must not exist)."""
    history = load_history(src.path)
    expected = history_shas(src.path)
    target.mkdir(parents=True)
    git(["init", "-q", f"--initial-branch={DEFAULT_BRANCH}", "."], target)
    index_env = {"GIT_INDEX_FILE": str(target / ".git" / "index")}
    parent: str | None = None
    for i, entry in enumerate(history):
        snap = src.path / COMMITS_SUBDIR / entry.dir
        files = snapshot_files(snap)
        # Blobs: stored byte-for-byte, no clean/smudge or eol filters.
        paths = "".join(f"{(snap / rel).resolve()}\n" for rel in files)
        blobs = git_out(["hash-object", "-w", "--no-filters", "--stdin-paths"], target, input=paths.encode())
        if blobs.split() != [blob_sha(data) for data in files.values()]:
            raise DemoSetError(f"{src.full_name} {entry.dir}: blob hashes differ from the snapshot files")
        git(["read-tree", "--empty"], target, env=index_env)
        index_info = "".join(f"{FILE_MODE} {blob_sha(data)}\t{rel}\n" for rel, data in files.items())
        git(["update-index", "--add", "--index-info"], target, input=index_info.encode("utf-8"), env=index_env)
        tree = git_out(["write-tree"], target, env=index_env)
        date = git_date(i)
        commit_env = {
            **index_env,
            "GIT_AUTHOR_NAME": AUTHOR_NAME,
            "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": AUTHOR_NAME,
            "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
            "GIT_COMMITTER_DATE": date,
        }
        args = ["commit-tree", tree]
        if parent:
            args += ["-p", parent]
        args += ["-F", "-"]
        sha = git_out(args, target, input=commit_message(entry).encode("utf-8"), env=commit_env)
        if sha != expected[entry.dir]:
            raise DemoSetError(
                f"{src.full_name} commit {entry.dir}: git produced {sha}, expected {expected[entry.dir]}"
            )
        parent = sha
    assert parent is not None
    git(["update-ref", f"refs/heads/{DEFAULT_BRANCH}", parent], target)
    git(["symbolic-ref", "HEAD", f"refs/heads/{DEFAULT_BRANCH}"], target)
    git(["reset", "-q", "--hard", DEFAULT_BRANCH], target)
    return parent


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock (POSIX ``flock``; a no-op where unavailable)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _rmtree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _install(src: SourceRepo, final: Path, expected: str) -> None:
    """Build into a private temp dir next to *final*, then rename it into place."""
    dest_dir = final.parent
    tmp = dest_dir / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        head = _build_repo(src, tmp)
        if head != expected:  # pragma: no cover - _build_repo already checks every commit
            raise DemoSetError(f"{src.full_name}: built HEAD {head} != expected {expected}")
        for _ in range(10):
            if read_head(final) == expected:
                return  # somebody else installed an identical build meanwhile
            try:
                os.rename(tmp, final)
                return
            except OSError:
                if not final.exists() and not final.is_symlink():
                    raise
                # A stale (wrong HEAD) repository is in the way: move it aside atomically.
                trash = dest_dir / f".{final.name}.stale-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                try:
                    os.rename(final, trash)
                except FileNotFoundError:
                    continue
                _rmtree(trash)
        raise DemoSetError(f"could not install {final} (concurrent modification?)")
    finally:
        if tmp.exists():
            _rmtree(tmp)


def build_demo_repos(source_dir: Path, dest_dir: Path) -> dict[str, Path]:
    """Materialise every demo repository as a git repo under *dest_dir*.

    Returns ``{"harness-demo/<name>": dest_dir/"harness-demo__<name>"}``.  An
    existing ``dest_dir/<owner>__<name>`` whose HEAD is already the expected
    commit is kept untouched; anything else there is replaced.  Safe to call
    concurrently from several processes with the same *dest_dir*.
    """
    dest_dir = Path(dest_dir).resolve()
    dest_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Path] = {}
    for src in iter_source_repos(Path(source_dir)):
        final = dest_dir / src.dir_name
        expected = expected_head(src.path)
        if read_head(final) != expected:
            with _file_lock(dest_dir / f".{src.dir_name}.lock"):
                if read_head(final) != expected:
                    _install(src, final, expected)
        result[src.full_name] = final
    return result


def demo_repository(full_name: str, cache_dir: Path) -> Path | None:
    """The demo set's repository ``full_name`` (``harness-demo/<name>``), built up to date
    under ``<cache_dir>/demo-repos``; None when the demo set has no such repository. The
    one place that decides how a demo repository is obtained: the repository resolver
    (:class:`harness.inputs.repos.RepoResolver`) asks it like any other source."""
    if not full_name.startswith(DEMO_OWNER + "/"):
        return None
    return build_demo_repos(DEMO_DIR, Path(cache_dir) / "demo-repos").get(full_name)
