"""Tree truth: what a model patch actually did to the working copy.

The set-up step in the sandbox (``harness/incontainer/prepare.py``) compares the working
copy with the pristine tree after the patch was applied and reports every change:
created, modified, deleted, type- and mode-changed paths (ignored and untracked files
included, symlinks as symlinks), plus the contents of every file it added or modified. This module
reads that report (bounded, never trusted to be well-formed) and compares it with what
parsing the patch text promised. The tree set drives everything afterwards: restoring,
the shadowing check, the scans and the integrity flags. A disagreement between the two
sets means the text and ``git``/``patch`` read the patch differently (quoted names,
odd prefixes, non-git diffs): the run is rejected with both sets in the report.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from harness.patches import PatchFiles

#: what a change may be
CHANGES = frozenset({"created", "modified", "deleted", "type", "mode"})


class MalformedTreeReport(ValueError):
    """The set-up step's report could not be read (a harness fault: the step is trusted)."""


@dataclass(frozen=True)
class TreeChange:
    path: str
    change: str                    # created | modified | deleted | type | mode
    kind: str                      # file | dir | symlink | other (after; before for deleted)
    old_kind: str | None = None
    old_mode: int | None = None
    new_mode: int | None = None
    target: str | None = None      # a symlink's target
    sha256: str | None = None
    content: bytes | None = field(default=None, repr=False)
    content_omitted: str | None = None
    size: int | None = None        # bytes, for files that exist after

    @property
    def exists_after(self) -> bool:
        return self.change != "deleted"


@dataclass
class TreeTruth:
    """The set-up step's findings."""

    changes: list[TreeChange]
    applied: str | None                 # the strategy that applied, None if none did
    history_commits: int | str | None
    git_changed: list[str]
    too_many_changes: bool
    commands: list[dict]
    seconds: float = 0.0
    #: compiled extension modules in the pristine tree (None: not reported)
    pristine_extensions: int | None = None
    #: hunks the already-present fallback left out ({"path", "hunk": its @@ line}): their
    #: post-image is what the pristine tree holds (harness/incontainer/prepare.py)
    already_present: list[dict[str, str]] = field(default_factory=list)
    #: seconds of the step's parts, as the sandbox reported them (:func:`step_phases`)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def paths(self) -> set[str]:
        """Paths of files, symlinks and others that changed (directories are implied)."""
        return {c.path for c in self.changes if c.kind != "dir" or c.old_kind not in (None, "dir")}

    def by_path(self) -> dict[str, TreeChange]:
        return {c.path: c for c in self.changes}

    @property
    def created_dirs(self) -> list[str]:
        return [c.path for c in self.changes if c.change == "created" and c.kind == "dir"]

    @property
    def symlinks(self) -> list[str]:
        return [c.path for c in self.changes if c.exists_after and c.kind == "symlink"]

    @property
    def existing_changed(self) -> list[TreeChange]:
        """Changed paths that exist after the patch (its files: scanned, maybe restored)."""
        return [c for c in self.changes if c.exists_after and c.kind != "dir"]


def parse_tree_report(text: str, max_bytes: int) -> TreeTruth:
    """Read the set-up step's JSON. Raises MalformedTreeReport."""
    if len(text) > max_bytes:
        raise MalformedTreeReport(f"set-up report of {len(text)} bytes is over {max_bytes}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise MalformedTreeReport(f"set-up report is not JSON ({exc}): {text[-500:]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise MalformedTreeReport(f"set-up report has no change list: {text[-500:]!r}")
    changes = []
    for raw in data["changes"]:
        if not isinstance(raw, dict) or raw.get("change") not in CHANGES or not isinstance(raw.get("path"), str):
            raise MalformedTreeReport(f"bad change entry {str(raw)[:200]}")
        content = raw.get("content")
        changes.append(TreeChange(
            path=raw["path"], change=raw["change"], kind=str(raw.get("kind")), old_kind=raw.get("old_kind"),
            old_mode=raw.get("old_mode"), new_mode=raw.get("new_mode"), target=raw.get("target"),
            sha256=raw.get("sha256"), content=base64.b64decode(content) if isinstance(content, str) else None,
            content_omitted=raw.get("content_omitted"),
            size=raw["size"] if isinstance(raw.get("size"), int) and not isinstance(raw.get("size"), bool) else None))
    return TreeTruth(changes=changes, applied=data.get("applied"), history_commits=data.get("history_commits"),
                     git_changed=list(data.get("git_changed") or []),
                     too_many_changes=bool(data.get("too_many_changes")),
                     commands=list(data.get("commands") or []), seconds=float(data.get("seconds") or 0.0),
                     pristine_extensions=_count(data.get("pristine_extensions")),
                     already_present=_present(data.get("already_present")),
                     phases=step_phases(data.get("phases")))


def step_phases(value) -> dict[str, float]:
    """A step's own timing of its parts (name -> seconds), as the sandbox reported it: at most
    20 short names with finite, non-negative numbers; anything else is left out (these are
    measurements for benchmarks and reports, never evidence)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, float] = {}
    for name, seconds in list(value.items())[:20]:
        if (isinstance(name, str) and len(name) <= 40 and isinstance(seconds, (int, float))
                and not isinstance(seconds, bool) and 0 <= seconds < 1e7):
            out[name] = round(float(seconds), 4)
    return out


def _present(value) -> list[dict[str, str]]:
    """The fallback's record, bounded: at most 1,000 entries of short strings."""
    if not isinstance(value, list):
        return []
    return [{"path": str(entry.get("path"))[:1024], "hunk": str(entry.get("hunk"))[:200]}
            for entry in value[:1000] if isinstance(entry, dict)]


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parsed_paths(files: PatchFiles) -> set[str]:
    return set(files.all)


def disagreement(parsed: PatchFiles, tree: TreeTruth) -> dict[str, list[str]] | None:
    """The paths on which the parsed patch and the tree disagree, or None.

    A directory the tree reports as created is implied by the files under it; a file a
    patch "modifies" to identical bytes is not a change of the tree (nothing to hide).
    """
    said = parsed_paths(parsed)
    seen = tree.paths
    only_tree = sorted(seen - said)
    only_parsed = sorted(p for p in said - seen)
    if not only_tree:
        # a no-op hunk set (e.g. a rename to itself) changes nothing: harmless
        return None
    return {"only_in_tree": only_tree[:200], "only_in_parsed_patch": only_parsed[:200],
            "tree": sorted(seen)[:200], "parsed": sorted(said)[:200]}
