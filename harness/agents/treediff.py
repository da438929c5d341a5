"""A working tree read out of a sandbox, turned into a patch on the host (*tree truth*).

The tree arrives as the engine's tar stream of ``/testbed`` (harness/engine/interactive.py
``open_archive``); nothing of it runs and the sandbox's ``.git`` is never read. On the host,
in a temporary directory of its own::

    <tmp>/git/     a repository of our own: config written here, no hooks, HEAD unborn,
                   objects/info/alternates -> the base's objects (the one-commit export)
    <tmp>/index    its index, seeded with the base tree (``git read-tree``)
    <tmp>/tree/    the tree, materialised from the stream (harness/agents/treeread.py: safely,
                   and only what differs from the base; the rest is marked ``skip-worktree``
                   in the index, unless an attribute of the tree converts it when git adds
                   it, and then the base's copy is written for git to read)
    <tmp>/home/    an empty HOME and XDG_CONFIG_HOME for git
    <tmp>/pristine/, <tmp>/pristine.index
                   the same for the pristine tree, when one is given (removed once added)

then ``git add -A`` and ``git diff --cached <tree>``: what mini-swe-agent's own
``git add -A && git diff --cached`` submission prints (the tree's .gitignore honoured,
untracked files included, symlinks as links, binary files as git's "Binary files ... differ"
stub), measured against the base rather than whatever HEAD the agent left. ``<tree>`` is the
base's, or, given the pristine tree (what the agent started from), the tree ``git add -A``
makes of that onto the base: the patch then holds the agent's changes only, not those the
image's build made to tracked files (harness/agents/workspace.py says why). A tree git
refuses (a symlinked ``.gitmodules``, a ``.GIT`` directory), past the
:class:`~harness.agents.treeread.TreeLimits` or with a patch past its limit is refused
(:class:`~harness.errors.WorkingTreeRefused`, one message).

Git runs with no system or global configuration (``GIT_CONFIG_NOSYSTEM``,
``GIT_CONFIG_GLOBAL=/dev/null``, no system attributes), hooks, fsmonitor and the untracked
cache off, no external diff or textconv: no filter or diff driver a tree's .gitattributes
names is defined, so it runs nothing. Git >= 2.32 is required: it reads a tree's own
.gitignore and .gitattributes without following links.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from harness.agents.treeread import (BaseListing, CappedReader, TreeLimits, materialise, refused, write_files)
from harness.errors import InfrastructureError, WorkingTreeRefused

#: ``mode`` of a symbolic link in git's listings
SYMLINK_MODE = "120000"
MIN_GIT = (2, 32)
#: the attributes under which ``git add`` converts a file's bytes (a filter is never defined here)
CONVERTING = ("text", "eol", "crlf", "ident", "working-tree-encoding")


@dataclass(frozen=True)
class TreeDiff:
    """The tree's patch (see the module's docstring). ``files``: every path the patch touches
    (both sides of a rename); ``binary_files``: those shown as git's binary stub;
    ``symlinks``: those that are a link on either side; ``sha256``: of ``patch`` as UTF-8;
    ``base_tree``: the id of the git tree it is taken against."""

    patch: str
    files: tuple[str, ...]
    binary_files: tuple[str, ...]
    symlinks: tuple[str, ...]
    sha256: str
    #: the git tree the patch is taken against (the pristine tree's, or the base commit's)
    base_tree: str = ""


@dataclass(frozen=True)
class BaseTree:
    """What the tree is compared with: a git tree id and the objects directory holding it."""

    objects: Path
    tree: str


# ----------------------------------------------------------------------------- git
def git_version(text: str) -> tuple[int, int]:
    """(major, minor) of ``git version 2.39.5`` (and vendor suffixes); (0, 0) if unreadable."""
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


@dataclass(frozen=True)
class Scratch:
    """One side of the scratch directory: the repository and home are shared, each side has a
    work tree and an index of its own (``tree``/``index``, ``pristine``/``pristine.index``)."""

    top: Path
    side: str = "tree"

    @property
    def work(self) -> Path:
        return self.top / self.side

    @property
    def index(self) -> Path:
        return self.top / ("index" if self.side == "tree" else f"{self.side}.index")


def git_env(scratch: Scratch) -> dict[str, str]:
    """The environment host git runs in: nothing of the user's or the system's configuration."""
    home = scratch.top / "home"
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1", "LC_ALL": "C", "GIT_DIR": str(scratch.top / "git"),
            "GIT_WORK_TREE": str(scratch.work), "GIT_INDEX_FILE": str(scratch.index)}


#: the scratch repository's configuration: nothing runs, nothing is guessed from the host
REPO_CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tautocrlf = false
\tfsmonitor = false
\tuntrackedCache = false
\thooksPath = /dev/null
\tattributesFile = /dev/null
\texcludesFile = /dev/null
[gc]
\tauto = 0
[maintenance]
\tauto = false
"""


def init_scratch(scratch: Path, base: BaseTree) -> None:
    """The layout of the module's docstring, minus the trees."""
    git = scratch / "git"
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (git / sub).mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text(REPO_CONFIG)
    (git / "objects" / "info" / "alternates").write_text(f"{base.objects.resolve()}\n")
    (scratch / "home").mkdir()


def _git(scratch: Scratch, *args: str, limit: int = 1 << 20, what: str = "", stdin: bytes | None = None) -> bytes:
    """Run host git in the scratch repository; its stdout, refused past ``limit`` bytes."""
    with tempfile.TemporaryFile() as errors, tempfile.TemporaryFile() as given:
        given.write(stdin or b"")
        given.seek(0)
        proc = subprocess.Popen(["git", *args], cwd=scratch.work, env=git_env(scratch), stdin=given,
                                stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None
        out = proc.stdout.read(limit + 1)
        if len(out) > limit:
            proc.kill()
            proc.wait()
            raise refused(None, f"{what or 'git ' + args[0]} printed more than {limit} bytes")
        proc.stdout.close()
        code = proc.wait()
        errors.seek(0)
        message = errors.read(4000).decode("utf-8", "replace").strip()
    if code != 0:
        if args[0] == "add":  # git refused a path of the tree (a symlinked .gitmodules, ".GIT/...")
            raise refused(None, f"git add -A failed: {message}")
        raise InfrastructureError(f"git {' '.join(args[:2])} failed (exit {code}): {message}")
    return out


@functools.cache
def check_git() -> None:
    """Raise InfrastructureError unless the host's git is recent enough (module docstring);
    asked once per process."""
    try:
        text = subprocess.run(["git", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"the host's git cannot run: {exc}") from None
    if git_version(text) < MIN_GIT:
        raise InfrastructureError(f"the agent stage needs git >= {'.'.join(map(str, MIN_GIT))} on the host "
                                  f"(it reads a tree's .gitignore without following links); found {text.strip()!r}")


def split_z(data: bytes) -> list[str]:
    return [field.decode("utf-8", "replace") for field in data.split(b"\0")]


def parse_raw(data: bytes) -> tuple[list[str], list[str]]:
    """(every path, the symlinks) of ``git diff --raw -z --no-renames``."""
    fields = split_z(data)
    paths, links = [], []
    for meta, path in zip(fields[0::2], fields[1::2]):
        modes = meta.lstrip(":").split()[:2]
        paths.append(path)
        if SYMLINK_MODE in modes:
            links.append(path)
    return paths, links


def parse_numstat_binary(data: bytes) -> list[str]:
    """The paths ``git diff --numstat -z --no-renames`` counts as binary (``-\\t-\\tpath``)."""
    return [record[4:] for record in split_z(data) if record.startswith("-\t-\t")]


def parse_ls_tree(data: bytes) -> BaseListing:
    """path -> (mode, id) of the blobs of ``git ls-tree -r -z --full-tree``."""
    listing: BaseListing = {}
    for record in data.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) == 3 and fields[1] == "blob":
            listing[path.decode("utf-8", "surrogateescape")] = (fields[0], fields[2])
    return listing


def parse_check_attr(data: bytes) -> set[str]:
    """The paths ``git check-attr -z`` gives a value other than unspecified or unset."""
    fields = data.split(b"\0")
    return {path.decode("utf-8", "surrogateescape")
            for path, value in zip(fields[0::3], fields[2::3]) if value not in (b"unspecified", b"unset")}


def parse_batch(data: bytes) -> dict[str, bytes]:
    """id -> content of ``git cat-file --batch`` output (``<id> <type> <size>\\n<content>\\n``)."""
    blobs, at = {}, 0
    while at < len(data):
        end = data.index(b"\n", at)
        oid, _, size = data[at:end].decode("ascii").split()
        blobs[oid] = data[end + 1:end + 1 + int(size)]
        at = end + 2 + int(size)
    return blobs


def _paths_in(paths: Iterable[str]) -> bytes:
    return b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)


def _settle_unchanged(scratch: Scratch, base: BaseListing, unchanged: list[str], limit: int) -> None:
    """Tell git the unchanged paths are as the base has them (``skip-worktree``), except those an
    attribute converts when git adds them: git reads the base's copy of those, as the sandbox's
    git re-reads every file whose stat data a copy changed."""
    if not unchanged:
        return
    files = [path for path in unchanged if base[path][0] != SYMLINK_MODE]  # a link's target is never converted
    converted = parse_check_attr(_git(scratch, "check-attr", "-z", "--stdin", *CONVERTING,
                                      stdin=_paths_in(files), limit=limit)) if files else set()
    if converted:
        ids = sorted({base[path][1] for path in converted})
        blobs = parse_batch(_git(scratch, "cat-file", "--batch", stdin="\n".join(ids).encode() + b"\n",
                                 limit=limit))
        write_files(scratch.work, ((path, base[path][0], blobs[base[path][1]]) for path in sorted(converted)))
    _git(scratch, "update-index", "-z", "--skip-worktree", "--stdin",
         stdin=_paths_in(path for path in unchanged if path not in converted))


def add_tree(scratch: Scratch, chunks: Iterable[bytes], root: str, base_tree: str, limits: TreeLimits) -> str:
    """``git add -A`` of a tree's tar stream onto ``base_tree`` in the index of ``scratch``'s
    side (materialised there: only what differs); the resulting git tree's id."""
    scratch.work.mkdir()
    listing = parse_ls_tree(_git(scratch, "ls-tree", "-r", "-z", "--full-tree", base_tree, limit=1 << 30))
    stats = materialise(CappedReader(chunks, limits.stream_bytes), scratch.work, root, limits, listing,
                        lambda blob: _git(scratch, "cat-file", "blob", blob, limit=limits.stream_bytes))
    _git(scratch, "read-tree", base_tree)
    _settle_unchanged(scratch, listing, stats.unchanged, limits.stream_bytes)
    _git(scratch, "add", "-A")
    return _git(scratch, "write-tree").decode("ascii").strip()


def diff_tree(chunks: Iterable[bytes], root: str, base: BaseTree, limits: TreeLimits | None = None,
              scratch_dir: Path | None = None, pristine: tuple[Iterable[bytes], str] | None = None) -> TreeDiff:
    """The patch of the tar stream ``chunks`` of directory ``root`` against ``base``, or, given
    ``pristine`` (the tar stream of the tree the agent was given and its root's name), against
    that tree as ``git add -A`` records it onto ``base``. Raises WorkingTreeRefused (the
    tree's doing) or InfrastructureError."""
    limits = limits or TreeLimits()
    check_git()
    top = Path(tempfile.mkdtemp(prefix="harness-tree-", dir=scratch_dir))
    try:
        init_scratch(top, base)
        against = base.tree
        if pristine is not None:
            side = Scratch(top, "pristine")
            try:
                against = add_tree(side, pristine[0], pristine[1], base.tree, limits)
            except WorkingTreeRefused as exc:
                raise InfrastructureError(f"the pristine tree cannot be read as a git tree: {exc}") from None
            shutil.rmtree(side.work, ignore_errors=True)
        scratch = Scratch(top)
        add_tree(scratch, chunks, root, against, limits)
        common = ("diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv")
        patch = _git(scratch, *common, against, "--", limit=limits.patch_bytes, what="the patch")
        paths, links = parse_raw(_git(scratch, *common, "--no-renames", "--raw", "-z", against, "--",
                                      limit=64 << 20))
        binary = parse_numstat_binary(_git(scratch, *common, "--no-renames", "--numstat", "-z", against, "--",
                                           limit=64 << 20))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    text = patch.decode("utf-8", errors="replace")
    return TreeDiff(text, tuple(paths), tuple(binary), tuple(links), hashlib.sha256(text.encode("utf-8")).hexdigest(),
                    against)
