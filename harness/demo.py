"""The embedded demo instance set (``instances/demo``).

The demo set is three tiny, stdlib-only Python projects whose git histories
are stored in this repository as plain files::

    instances/demo/repos/<owner>__<name>/history.yaml
    instances/demo/repos/<owner>__<name>/commits/<NN-slug>/...   (full tree snapshots)

``history.yaml`` is an ordered list of ``{dir, message}`` mappings; commit *i*
(0-based) of the history has exactly the tree of ``commits/<dir>``.

:func:`build_demo_repos` turns those snapshots into real (non-bare) git
repositories with deterministic commit SHAs: fixed author and committer
(``Harness Demo <demo@harness.invalid>``), fixed dates (2024-01-01T00:00:00Z
plus *i* hours for commit *i*), every file stored with mode 100644, and no
dependence on the user's or system's git configuration.  Because the object
format is fixed, the expected SHAs are also computed in pure Python
(:func:`history_shas`), which is how an existing build is recognised as
up to date without rebuilding it.

``instances.jsonl`` is derived from the histories plus
``instances.src.yaml``; ``python -m harness.demo regenerate`` rewrites it and
``python -m harness.demo check`` verifies it is current.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import resources

DEMO_DIR = resources.demo_dir()
"""Absolute path of ``instances/demo``, shipped in the package (or ``$HARNESS_DATA_DIR/instances/demo``;
see harness.resources): independent of the working directory. Read at import."""

DEMO_OWNER = "harness-demo"
DEMO_MODEL_NAME = "demo-model"
AUTHOR_NAME = "Harness Demo"
AUTHOR_EMAIL = "demo@harness.invalid"
DEFAULT_BRANCH = "main"
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
"""Date of commit 0; commit *i* is dated ``EPOCH + i hours``."""

FILE_MODE = "100644"
"""Every snapshot file is committed with this mode (filesystem modes are ignored)."""

IGNORED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
"""Junk that running tools inside a snapshot directory may leave behind; never committed."""

TEST_DIR_NAMES = frozenset({"tests", "test", "testing"})

HISTORY_FILE = "history.yaml"
COMMITS_SUBDIR = "commits"
REPOS_SUBDIR = "repos"
INSTANCES_SRC_FILE = "instances.src.yaml"
INSTANCES_FILE = "instances.jsonl"

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


class DemoSetError(RuntimeError):
    """The demo set's source files are inconsistent, or a build went wrong."""


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class HistoryEntry:
    dir: str
    message: str


@dataclass(frozen=True)
class SourceRepo:
    full_name: str  # "harness-demo/calcly"
    path: Path  # instances/demo/repos/harness-demo__calcly

    @property
    def dir_name(self) -> str:
        return self.path.name


def repo_dir_name(full_name: str) -> str:
    """``"owner/name"`` -> ``"owner__name"`` (the SWE-bench instance-id convention)."""
    owner, sep, name = full_name.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ValueError(f"not an owner/name repository: {full_name!r}")
    return f"{owner}__{name}"


def repo_full_name(dir_name: str) -> str:
    """``"owner__name"`` -> ``"owner/name"``."""
    owner, sep, name = dir_name.partition("__")
    if not sep or not owner or not name:
        raise ValueError(f"not an owner__name directory: {dir_name!r}")
    return f"{owner}/{name}"


def _repos_root(source_dir: Path) -> Path:
    """Accept either the demo dir (containing ``repos/``) or the ``repos/`` dir itself."""
    source_dir = Path(source_dir)
    if (source_dir / REPOS_SUBDIR).is_dir():
        return source_dir / REPOS_SUBDIR
    if any(p.joinpath(HISTORY_FILE).is_file() for p in source_dir.iterdir() if p.is_dir()):
        return source_dir
    raise DemoSetError(f"no {REPOS_SUBDIR}/<owner>__<name>/{HISTORY_FILE} under {source_dir}")


def iter_source_repos(source_dir: Path = DEMO_DIR) -> list[SourceRepo]:
    """All ``repos/<owner>__<name>`` source directories, sorted by name."""
    root = _repos_root(source_dir)
    repos = [
        SourceRepo(repo_full_name(p.name), p)
        for p in sorted(root.iterdir())
        if p.is_dir() and (p / HISTORY_FILE).is_file()
    ]
    if not repos:
        raise DemoSetError(f"no demo repositories under {root}")
    return repos


def load_history(repo_src: Path) -> list[HistoryEntry]:
    """Parse and validate ``history.yaml`` of one source repository."""
    repo_src = Path(repo_src)
    raw = yaml.safe_load((repo_src / HISTORY_FILE).read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not raw:
        raise DemoSetError(f"{repo_src / HISTORY_FILE}: expected a non-empty list")
    entries: list[HistoryEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"dir", "message"}:
            raise DemoSetError(f"{repo_src / HISTORY_FILE}[{i}]: expected {{dir, message}}, got {item!r}")
        d, msg = str(item["dir"]), str(item["message"])
        if d in seen:
            raise DemoSetError(f"{repo_src / HISTORY_FILE}: duplicate dir {d!r}")
        if not (repo_src / COMMITS_SUBDIR / d).is_dir():
            raise DemoSetError(f"{repo_src / HISTORY_FILE}: missing snapshot {COMMITS_SUBDIR}/{d}")
        if not msg.strip():
            raise DemoSetError(f"{repo_src / HISTORY_FILE}: empty message for {d!r}")
        seen.add(d)
        entries.append(HistoryEntry(d, msg))
    return entries


def commit_message(entry: HistoryEntry) -> str:
    """The exact message stored in the commit object (stripped, one trailing newline)."""
    return entry.message.strip() + "\n"


def commit_datetime(index: int) -> dt.datetime:
    return EPOCH + dt.timedelta(hours=index)


def _git_date(index: int) -> str:
    return f"{int(commit_datetime(index).timestamp())} +0000"


def _is_ignored(rel_parts: Sequence[str]) -> bool:
    return any(part in IGNORED_NAMES for part in rel_parts) or rel_parts[-1].endswith(IGNORED_SUFFIXES)


def snapshot_files(snapshot_dir: Path) -> dict[str, bytes]:
    """``{posix relative path: bytes}`` of every file in a snapshot, sorted by path.

    Symlinks and special files are rejected; tool caches (``__pycache__`` etc.)
    are skipped.
    """
    snapshot_dir = Path(snapshot_dir)
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(snapshot_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for fn in sorted(filenames):
            full = Path(dirpath) / fn
            rel = full.relative_to(snapshot_dir)
            if _is_ignored(rel.parts):
                continue
            if full.is_symlink() or not full.is_file():
                raise DemoSetError(f"{full}: only regular files are supported in snapshots")
            files[rel.as_posix()] = full.read_bytes()
    if not files:
        raise DemoSetError(f"{snapshot_dir}: empty snapshot")
    return dict(sorted(files.items()))


# ------------------------------------------------------------ git object hashing (pure Python)


def _object_sha(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def blob_sha(data: bytes) -> str:
    return _object_sha("blob", data)


def tree_sha(files: Mapping[str, bytes]) -> str:
    """SHA-1 of the git tree holding *files* (all mode 100644)."""
    root: dict[str, Any] = {}
    for path, data in files.items():
        *dirs, leaf = path.split("/")
        node = root
        for d in dirs:
            node = node.setdefault(d, {})
        node[leaf] = blob_sha(data)

    def hash_node(node: dict[str, Any]) -> str:
        entries: list[tuple[bytes, bytes]] = []
        for name, value in node.items():
            bname = name.encode("utf-8")
            if isinstance(value, dict):
                entry = b"40000 " + bname + b"\0" + bytes.fromhex(hash_node(value))
                entries.append((bname + b"/", entry))
            else:
                entry = FILE_MODE.encode() + b" " + bname + b"\0" + bytes.fromhex(value)
                entries.append((bname, entry))
        entries.sort(key=lambda e: e[0])
        return _object_sha("tree", b"".join(e for _, e in entries))

    return hash_node(root)


def commit_sha(tree: str, parent: str | None, message: str, index: int) -> str:
    ident = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}> {_git_date(index)}"
    lines = [f"tree {tree}"]
    if parent:
        lines.append(f"parent {parent}")
    lines += [f"author {ident}", f"committer {ident}"]
    return _object_sha("commit", ("\n".join(lines) + "\n\n" + message).encode("utf-8"))


def history_shas(repo_src: Path) -> dict[str, str]:
    """``{commit dir: expected commit SHA}`` in history order, computed without git."""
    shas: dict[str, str] = {}
    parent: str | None = None
    for i, entry in enumerate(load_history(repo_src)):
        tree = tree_sha(snapshot_files(Path(repo_src) / COMMITS_SUBDIR / entry.dir))
        parent = commit_sha(tree, parent, commit_message(entry), i)
        shas[entry.dir] = parent
    return shas


def expected_head(repo_src: Path) -> str:
    return list(history_shas(repo_src).values())[-1]


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


def _git_out(args: Sequence[str], cwd: Path, **kw: Any) -> str:
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
    return _git_out(["rev-list", "--reverse", ref], Path(repo_path)).split()


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
        blobs = _git_out(["hash-object", "-w", "--no-filters", "--stdin-paths"], target, input=paths.encode())
        if blobs.split() != [blob_sha(data) for data in files.values()]:
            raise DemoSetError(f"{src.full_name} {entry.dir}: blob hashes differ from the snapshot files")
        git(["read-tree", "--empty"], target, env=index_env)
        index_info = "".join(f"{FILE_MODE} {blob_sha(data)}\t{rel}\n" for rel, data in files.items())
        git(["update-index", "--add", "--index-info"], target, input=index_info.encode("utf-8"), env=index_env)
        tree = _git_out(["write-tree"], target, env=index_env)
        date = _git_date(i)
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
        sha = _git_out(args, target, input=commit_message(entry).encode("utf-8"), env=commit_env)
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
    (:class:`harness.repos.RepoResolver`) asks it like any other source."""
    if not full_name.startswith(DEMO_OWNER + "/"):
        return None
    return build_demo_repos(DEMO_DIR, Path(cache_dir) / "demo-repos").get(full_name)


# ------------------------------------------------------------------------ instances


INSTANCE_FIELDS = (
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
)
SRC_FIELDS = frozenset(
    {"instance_id", "repo", "base", "fix", "version", "fix_marker", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS"}
)


def is_test_path(path: str) -> bool:
    """True for files that belong in ``test_patch`` rather than ``patch``."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p in TEST_DIR_NAMES for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def load_instance_specs(source_dir: Path = DEMO_DIR) -> list[dict[str, Any]]:
    """Parse and validate ``instances.src.yaml``."""
    path = Path(source_dir) / INSTANCES_SRC_FILE
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not raw:
        raise DemoSetError(f"{path}: expected a non-empty list")
    ids: set[str] = set()
    for spec in raw:
        if not isinstance(spec, dict) or set(spec) != SRC_FIELDS:
            raise DemoSetError(f"{path}: each entry needs exactly the keys {sorted(SRC_FIELDS)}, got {spec!r}")
        if spec["instance_id"] in ids:
            raise DemoSetError(f"{path}: duplicate instance_id {spec['instance_id']!r}")
        ids.add(spec["instance_id"])
    return raw


def _diff(repo: Path, base: str, fix: str, paths: Sequence[str]) -> str:
    if not paths:
        return ""
    out = git(["diff", "--no-color", "--no-ext-diff", base, fix, "--", *paths], repo).stdout
    return out.decode("utf-8")


def make_instance_records(source_dir: Path, repo_paths: Mapping[str, Path]) -> list[dict[str, Any]]:
    """SWE-bench instance records for every entry of ``instances.src.yaml``.

    *repo_paths* maps ``owner/name`` to a repository built by :func:`build_demo_repos`.
    """
    source_dir = Path(source_dir)
    repo_srcs = {r.full_name: r for r in iter_source_repos(source_dir)}
    records = []
    for spec in load_instance_specs(source_dir):
        repo_name = spec["repo"]
        if repo_name not in repo_srcs:
            raise DemoSetError(f"{spec['instance_id']}: unknown repo {repo_name!r}")
        shas = history_shas(repo_srcs[repo_name].path)
        order = list(shas)
        base_dir, fix_dir = spec["base"], spec["fix"]
        if base_dir not in shas or fix_dir not in shas or order.index(base_dir) >= order.index(fix_dir):
            raise DemoSetError(f"{spec['instance_id']}: base {base_dir!r} must precede fix {fix_dir!r}")
        repo = Path(repo_paths[repo_name])
        base, fix = shas[base_dir], shas[fix_dir]
        if base not in rev_list(repo, fix):
            raise DemoSetError(f"{spec['instance_id']}: {repo} does not contain the expected history")
        changed = _git_out(["diff", "--name-only", "--no-renames", base, fix], repo).splitlines()
        src_paths = [p for p in changed if not is_test_path(p)]
        test_paths = [p for p in changed if is_test_path(p)]
        if not src_paths or not test_paths:
            raise DemoSetError(f"{spec['instance_id']}: the fix must change both source and test files")
        created = commit_datetime(order.index(fix_dir)).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = {
            "repo": repo_name,
            "instance_id": spec["instance_id"],
            "base_commit": base,
            "patch": _diff(repo, base, fix, src_paths),
            "test_patch": _diff(repo, base, fix, test_paths),
            "problem_statement": spec["problem_statement"],
            "hints_text": "",
            "created_at": created,
            "version": str(spec["version"]),
            "FAIL_TO_PASS": list(spec["FAIL_TO_PASS"]),
            "PASS_TO_PASS": list(spec["PASS_TO_PASS"]),
            "environment_setup_commit": base,
        }
        records.append({k: record[k] for k in INSTANCE_FIELDS})
    return records


def dump_jsonl(records: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def render_instances(source_dir: Path = DEMO_DIR) -> str:
    """The text ``instances.jsonl`` should have, from a fresh build in a temp dir."""
    with tempfile.TemporaryDirectory(prefix="harness-demo-") as tmp:
        repos = build_demo_repos(source_dir, Path(tmp))
        return dump_jsonl(make_instance_records(source_dir, repos))


def regenerate(source_dir: Path = DEMO_DIR) -> bool:
    """Rewrite ``instances.jsonl``; returns True when its content changed."""
    target = Path(source_dir) / INSTANCES_FILE
    text = render_instances(source_dir)
    old = target.read_text(encoding="utf-8") if target.exists() else None
    if old == text:
        return False
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEMO_DIR, help="demo set directory (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("regenerate", help="rebuild the repos in a temp dir and rewrite instances.jsonl")
    sub.add_parser("check", help="exit 1 if instances.jsonl is not what 'regenerate' would write")
    p_build = sub.add_parser("build", help="build the demo git repositories into DEST")
    p_build.add_argument("dest", type=Path)
    args = parser.parse_args(argv)

    if args.command == "regenerate":
        changed = regenerate(args.source)
        print(f"{args.source / INSTANCES_FILE}: {'rewritten' if changed else 'already up to date'}")
        return 0
    if args.command == "check":
        target = args.source / INSTANCES_FILE
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != render_instances(args.source):
            print(f"{target} is stale; run: python -m harness.demo regenerate", file=sys.stderr)
            return 1
        print(f"{target}: up to date")
        return 0
    for name, path in build_demo_repos(args.source, args.dest).items():
        print(f"{name}\t{path}\t{read_head(path)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
