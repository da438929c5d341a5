"""The demo set's sources and their commits, computed in pure Python: the snapshots under
``instances/demo/repos/`` (:func:`iter_source_repos`, :func:`load_history`,
:func:`snapshot_files`) and the git object ids a build of them must have
(:func:`history_shas`, :func:`expected_head`). See :mod:`harness.inputs.demo`."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Mapping, Sequence
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


def git_date(index: int) -> str:
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
    ident = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}> {git_date(index)}"
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
