"""Pure analysis of unified diffs: which files a patch touches, creates or deletes (the
names read as ``git apply`` reads them: :mod:`harness.patch_paths`), and whether a model
patch is acceptable at all.

A model patch is hostile until graded. :func:`check_model_patch` rejects, before
anything runs: oversize patches, text that is not valid UTF-8 (lone surrogates from a
JSON file), binary hunks, paths that are absolute, contain ``..``, point into ``.git/``
or are absurdly long, more files than any fix touches, and symlink modes (a symlink
could point outside the repository). Parsing is only a first filter: what the patch
did is read from the patched tree afterwards (:mod:`harness.integrity.tree`).

:func:`prepare_model_patch` runs first and takes out of the patch what carries nothing a
grader could apply, before the check sees it (:mod:`harness.patch_sections` reads the
sections; docs/SECURITY.md, "What a patch means"): a *content-less binary stub* (``Binary
files /dev/null and b/x differ``, no bytes) and a *new symlink whose target stays inside
the repository* (an agent's stray ``symlink_dir -> .``); each is recorded, never applied.
A binary patch with content, a symlink out of the repository or of any other form, and
anything the section reader does not know stay in the text and are refused as before.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass

from harness.errors import PatchRejected
from harness.patch_paths import read_paths, unquote
from harness.patch_sections import Section, split_sections

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
    size = _utf8_size(patch)
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


# --------------------------------------------------------------------------- what a patch carries

@dataclass(frozen=True)
class Dropped:
    """A section taken out of a model patch before it is applied: ``what`` is
    ``binary_stub`` (``detail``: git's "Binary files ... differ" line) or ``symlink``
    (``detail``: the link's target)."""

    path: str
    what: str
    detail: str


@dataclass(frozen=True)
class HunkSpans:
    """One section of the applied text, for the set-up step's already-present fallback
    (harness/incontainer/prepare.py): byte offsets into the UTF-8 text, ``[start, end)``."""

    path: str
    header: tuple[int, int]
    hunks: tuple[tuple[int, int], ...]

    def as_json(self) -> dict:
        return {"path": self.path, "header": list(self.header), "hunks": [list(h) for h in self.hunks]}


@dataclass(frozen=True)
class ModelPatch:
    """A checked model patch: ``text`` is what the sandbox applies (the prediction less
    ``dropped``), ``files`` what that text touches, ``sections`` its per-hunk byte spans
    (None when the section reader does not know the text's shape: no fallback then)."""

    text: str
    files: PatchFiles
    dropped: tuple[Dropped, ...] = ()
    sections: tuple[HunkSpans, ...] | None = None

    def dropped_of(self, what: str) -> list[Dropped]:
        return [d for d in self.dropped if d.what == what]


#: most hunks the already-present fallback checks one by one (two ``git apply --check`` each)
MAX_FALLBACK_HUNKS = 1000


def _utf8_size(patch: str) -> int:
    try:
        return len(patch.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise PatchRejected(f"the patch is not valid text: {exc.reason} at character {exc.start} "
                            f"({patch[exc.start]!r})") from None


def symlink_escape_reason(link: str, target: str) -> str | None:
    """Why a symlink at ``link`` (repository-relative) pointing at ``target`` may not be
    dropped as debris, or None when its target stays inside the repository."""
    if not target or "\x00" in target or "\r" in target or "\n" in target:
        return f"symlink {link!r} has an unreadable target {target!r}"
    if target.startswith("/"):
        return f"symlink {link!r} points at an absolute path {target!r}"
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if joined == ".." or joined.startswith("../"):
        return f"symlink {link!r} points out of the repository ({target!r})"
    if joined == ".git" or joined.startswith(".git/") or "/.git/" in f"/{joined}/":
        return f"symlink {link!r} points into .git ({target!r})"
    return None


def prepare_model_patch(patch: str) -> ModelPatch:
    """Check a model patch (:func:`check_model_patch`) after taking out the sections that
    carry nothing to apply: content-less binary stubs and new symlinks that stay inside the
    repository (see the module docstring). Raises PatchRejected; a new symlink that points
    out of the repository is refused naming it."""
    size = _utf8_size(patch)
    if size > MAX_PATCH_BYTES:
        raise PatchRejected(f"patch is {size} bytes, over the {MAX_PATCH_BYTES}-byte limit")
    split = split_sections(patch)
    if split is None:
        return ModelPatch(patch, check_model_patch(patch))
    kept: list[Section] = []
    dropped: list[Dropped] = []
    for section in split.sections:
        stub = section.binary_stub()
        link = section.new_symlink()
        named = stub or link
        if named is not None and unsafe_path_reason(named[0]):
            raise PatchRejected(unsafe_path_reason(named[0]) or "")
        if stub is not None:
            dropped.append(Dropped(stub[0], "binary_stub", stub[1]))
        elif link is not None:
            reason = symlink_escape_reason(*link)
            if reason:
                raise PatchRejected(f"symlinks out of the repository are not accepted: {reason}")
            dropped.append(Dropped(link[0], "symlink", link[1]))
        else:
            kept.append(section)
    text = split.preamble + "".join(s.text for s in kept) if dropped else patch
    files = check_model_patch(text)
    return ModelPatch(text, files, tuple(dropped), _spans(split.preamble, kept))


def _spans(preamble: str, sections: list[Section]) -> tuple[HunkSpans, ...] | None:
    if sum(len(s.hunks) for s in sections) > MAX_FALLBACK_HUNKS:
        return None
    offset = len(preamble.encode("utf-8"))
    spans = []
    for section in sections:
        start = offset
        offset += len(section.header.encode("utf-8"))
        header = (start, offset)
        hunks = []
        for hunk in section.hunks:
            size = len(hunk.encode("utf-8"))
            hunks.append((offset, offset + size))
            offset += size
        offset += len(section.trailer.encode("utf-8"))
        spans.append(HunkSpans(section.path or "", header, tuple(hunks)))
    return tuple(spans)
