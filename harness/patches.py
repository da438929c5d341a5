"""Pure analysis of unified diffs: which files a patch touches, creates or deletes (the
names read as ``git apply`` reads them: :mod:`harness.patch_paths`), and whether a model
patch is acceptable at all.

A model patch is hostile until graded. :func:`check_model_patch` rejects, before
anything runs: oversize patches, text that is not valid UTF-8 (lone surrogates from a
JSON file), binary hunks, paths that are absolute, contain ``..``, point into ``.git/``
or are absurdly long, more files than any fix touches, and symlink modes (a symlink
could point outside the repository). Parsing is only a first filter: what the patch
did is read from the patched tree afterwards (:mod:`harness.integrity.tree`).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass

from harness.errors import PatchRejected
from harness.patch_paths import read_paths, unquote

#: Largest model patch accepted (bytes of UTF-8).
MAX_PATCH_BYTES = 5 * 1024 * 1024
#: Most files one model patch may touch, and the longest path it may name (bytes).
MAX_PATCH_FILES = 2000
MAX_PATH_BYTES = 1024

#: ``diff --git`` names split naively: every name a header spells is checked as unsafe or
#: not, even one git itself would not use (the header disagreeing with ``---``/``+++``)
_GIT_HEADER = re.compile(r"^diff --git (?:a/)?(\S+) (?:b/)?(\S+)\r?$", re.M)
_SYMLINK_MODE = re.compile(
    r"^(?:(?:new file mode|new mode|old mode|deleted file mode) 120000|index \S+ 120000)\r?$", re.M)
_BINARY = re.compile(r"^(?:GIT binary patch|Binary files .* differ)\r?$", re.M)


@dataclass(frozen=True)
class PatchFiles:
    """Paths (repository-relative, POSIX) a patch touches, split by what it does to them."""

    modified: tuple[str, ...]
    created: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.modified, *self.created, *self.deleted)))


def _strip(path: str | None) -> str | None:
    """A name as a header line spells it (``--- a/x``, ``rename to x``): unquoted when git
    quoted it, less the ``a/``/``b/`` prefix (for the unsafe-path check, which reads every
    header-like line)."""
    if path is not None:
        path = path.rstrip("\r")  # git apply ignores a CR before the newline
        if path.startswith('"'):
            quoted = unquote(path)
            path = quoted[0] if quoted is not None else path
    if path is None or path == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def patch_files(patch: str) -> PatchFiles:
    """The paths a unified diff touches, read as ``git apply`` reads them
    (:mod:`harness.patch_paths`: quoted names, any prefix, names with spaces, traditional
    diffs); a copy creates its new path, a rename deletes the old and creates the new."""
    modified: list[str] = []
    created: list[str] = []
    deleted: list[str] = []
    sections = read_paths(patch)
    corrupt = next((s.corrupt for s in sections if s.corrupt), None)
    if corrupt:
        raise PatchRejected(f"not a unified diff: {corrupt}")
    for section in sections:
        old, new = section.old, section.new
        if section.created or (old is None and new is not None):
            created.append(new or "")
        elif section.deleted or (new is None and old is not None):
            deleted.append(old or "")
        elif old is not None and new is not None and old != new:
            if not section.copied:
                deleted.append(old)
            created.append(new)
        elif new is not None:
            modified.append(new)
    return PatchFiles(tuple(dict.fromkeys(p for p in modified if p)), tuple(dict.fromkeys(p for p in created if p)),
                      tuple(dict.fromkeys(p for p in deleted if p)))


def unsafe_path_reason(path: str) -> str | None:
    """Why a path may not be written by a model patch, or None when it is fine."""
    if not path or "\x00" in path:
        return "empty path"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return f"absolute path {path!r}"
    normal = posixpath.normpath(path)
    if normal.startswith("../") or normal == ".." or "/../" in f"/{path}/":
        return f"path escapes the repository: {path!r}"
    if normal == ".git" or normal.startswith(".git/") or "/.git/" in f"/{normal}/":
        return f"path inside .git: {path!r}"
    return None


def check_model_patch(patch: str) -> PatchFiles:
    """Validate a model patch; return the files it touches or raise PatchRejected."""
    try:
        size = len(patch.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise PatchRejected(f"the patch is not valid text: {exc.reason} at character {exc.start} "
                            f"({patch[exc.start]!r})") from None
    if size > MAX_PATCH_BYTES:
        raise PatchRejected(f"patch is {size} bytes, over the {MAX_PATCH_BYTES}-byte limit")
    if _BINARY.search(patch):
        raise PatchRejected("binary hunks are not accepted")
    if _SYMLINK_MODE.search(patch):
        raise PatchRejected("symlinks are not accepted (mode 120000)")
    files = patch_files(patch)
    # The '---'/'+++' and 'diff --git' lines may disagree on purpose; check every path named.
    named = set(files.all)
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")):
            name = line.split(" ", 1)[1] if line.startswith(("--- ", "+++ ")) else line.split(" ", 2)[2]
            name = name.split("\t")[0].strip()
            if name != "/dev/null":
                named.add(_strip(name) or name)
    for section in read_paths(patch):
        named.update(p for p in (section.old, section.new) if p)
    for a, b in _GIT_HEADER.findall(patch):
        named.update((_strip(a) or a, _strip(b) or b))
    if len(named) > MAX_PATCH_FILES:
        raise PatchRejected(f"the patch names {len(named)} files, over the limit of {MAX_PATCH_FILES}")
    for path in sorted(named):
        reason = unsafe_path_reason(path)
        if reason:
            raise PatchRejected(reason)
        if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise PatchRejected(f"a path of {len(path)} characters is over the {MAX_PATH_BYTES}-byte limit: "
                                f"{path[:80]!r}...")
    return files


def matches_any(path: str, patterns: tuple[str, ...]) -> bool:
    """True when the path (or its basename) matches one of the glob patterns."""
    base = posixpath.basename(path)
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(base, p) for p in patterns)
