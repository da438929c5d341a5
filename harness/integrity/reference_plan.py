"""What the restore plan would do to a record's own reference patch, with no container
(pure; issue 36, class 4: only test code is restored, library code never).

A run reverts the files of a model patch that are test code (harness/integrity/plan.py).
The reference patch is the dataset's honest fix: no file of it may be reverted or deleted.
This module plans a reference patch as a run would, from the record alone:

* the tree truth is the reference patch's own reading (each file it creates, modifies or
  deletes: :func:`harness.patches.patch_files`, which reads paths as ``git apply``
  does), so no repository and no sandbox are needed;
* the test files are the runner's (:meth:`Runner.test_files` of the test patch, the runner
  the repository's spec names);
* the pristine layout is the repository's tree at the base commit when it is at hand
  (``layout``), else the layout the two patches imply: every file they modify or delete,
  and a package marker (``__init__.py``) in every directory above a Python file they name
  up to the top-level directory, as in the three repositories whose histories are not
  here (django, matplotlib and scikit-learn: every such directory is a package there, but
  Django's ``tests/`` root, which has none and which the marker rule leaves out because it
  is a test directory).

:func:`reverted` names the reference files the plan would restore or delete.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.integrity.plan import Plan, find_tests_root, make_plan
from harness.integrity.testpatch import apply_test_patch
from harness.integrity.tree import TreeChange, TreeTruth
from harness.patches import PatchFiles, patch_files


@dataclass(frozen=True)
class PlannedReference:
    instance_id: str
    plan: Plan
    reference: PatchFiles
    #: the reference patch's files the plan restores or deletes (must be empty)
    reverted: tuple[str, ...]


def tree_of(files: PatchFiles, contents: dict[str, bytes] | None = None) -> TreeTruth:
    """The tree truth a patch that applies as it reads would report (with the contents it
    leaves, when they are known)."""
    contents = contents or {}
    changes = [TreeChange(p, "modified", "file", content=contents.get(p)) for p in files.modified]
    changes += [TreeChange(p, "created", "file", content=contents.get(p)) for p in files.created]
    changes += [TreeChange(p, "deleted", "file") for p in files.deleted]
    return TreeTruth(changes=changes, applied="git_apply", history_commits=1, git_changed=[],
                     too_many_changes=False, commands=[])


def implied_layout(*patches: PatchFiles) -> frozenset[str]:
    """The pristine paths two patches imply (see the module docstring)."""
    paths = {p for files in patches for p in (*files.modified, *files.deleted)}
    for files in patches:
        for path in files.all:
            if not path.endswith(".py"):
                continue
            directory = posixpath.dirname(path)
            root = find_tests_root(path)
            while directory and "/" in directory:
                if directory != root:
                    paths.add(directory + "/__init__.py")
                directory = posixpath.dirname(directory)
            if directory and directory != root and directory not in ("src", "lib", "tests", "testing", "test"):
                paths.add(directory + "/__init__.py")
    return frozenset(paths)


def plan_reference(record: dict, test_files_of: Callable[[PatchFiles], list[str]],
                   layout: Iterable[str] | None = None, protected: frozenset[str] = frozenset(),
                   runner_infra: Iterable[str] = (),
                   pristine_bytes: Callable[[str], bytes | None] | None = None) -> PlannedReference:
    """Plan the record's reference patch as a run of it would be planned. With
    ``pristine_bytes`` (a path's bytes at the base commit) the patch is applied on the host
    over the files it touches (:func:`harness.integrity.testpatch.apply_test_patch`), so the
    plan sees what it leaves in shared configuration files; without, it cannot tell a
    runner section's change from another and restores every change there."""
    reference = patch_files(record["patch"])
    test_patch = patch_files(record["test_patch"])
    pristine = frozenset(layout) if layout is not None else implied_layout(reference, test_patch)
    contents = None
    if pristine_bytes is not None:
        def source(path: str) -> tuple[bytes, int] | None:
            data = pristine_bytes(path)
            return None if data is None else (data, 0o644)
        contents = {p: data for p, (data, _) in apply_test_patch(record["patch"], reference, source).files.items()}
    plan = make_plan(tree_of(reference, contents), test_patch.all, test_files_of(test_patch), pristine, protected,
                     True, runner_infra, pristine_bytes)
    touched = set(plan.restore) | {p for d in plan.delete for p in reference.all if p == d or p.startswith(d + "/")}
    return PlannedReference(record["instance_id"], plan, reference, tuple(sorted(touched & set(reference.all))))
