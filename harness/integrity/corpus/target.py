"""What an attack needs to know about an instance, read from its record and its
repository at the base commit: the library files and functions the reference patch
changes (what the graded tests exercise), the test files, the package's name."""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable

from harness.integrity.scan import parse as _parse
from harness.integrity.testpatch import apply_test_patch
from harness.patches import patch_files

Reader = Callable[[str], "str | None"]
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.M)


@dataclass
class AttackTarget:
    record: dict
    read: Reader                                 # file text at the base commit (None: absent)
    paths: list[str] = field(default_factory=list)   # every file at the base commit
    library_files: list[str] = field(default_factory=list)
    functions: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)  # file -> [(class, name)]
    test_files: list[str] = field(default_factory=list)
    created_test_files: list[str] = field(default_factory=list)
    fixed: dict[str, str] = field(default_factory=dict)   # library file -> text with the reference fix
    #: the test runner the instance's spec names (attacks on the outcomes differ by runner)
    runner: str = "pytest"

    @property
    def instance_id(self) -> str:
        return self.record["instance_id"]

    @property
    def test_dir(self) -> str:
        return posixpath.dirname(self.test_files[0]) if self.test_files else ""

    @property
    def library_file(self) -> str | None:
        return next((f for f in self.library_files if self.functions.get(f)), None)

    @property
    def package(self) -> str | None:
        """The top-level package the first library file belongs to (root or src layout)."""
        path = self.library_file or (self.library_files[0] if self.library_files else None)
        if not path:
            return None
        parts = path.split("/")
        if parts[0] == "src" and len(parts) > 2:
            return parts[1]
        return parts[0] if len(parts) > 1 else None

    def package_dir(self) -> str | None:
        path = self.library_file
        if not path or self.package is None:
            return None
        parts = path.split("/")
        return "/".join(parts[:2]) if parts[0] == "src" else parts[0]


def changed_lines(patch_text: str, path: str) -> set[int]:
    """Old-file line numbers the patch's hunks for ``path`` cover."""
    lines: set[int] = set()
    section = None
    for block in re.split(r"(?m)^diff --git ", patch_text):
        if f" b/{path}\n" in block.split("\n", 1)[0] + "\n" or block.startswith(f"a/{path} "):
            section = block
            break
    if section is None:
        return lines
    for match in _HUNK.finditer(section):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        lines.update(range(start, start + max(count, 1)))
    return lines


def functions_touched(source: str, lines: set[int]) -> list[tuple[str | None, str]]:
    """(class or None, function) pairs whose definition overlaps the changed lines."""
    try:
        tree = _parse(source)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
            if lines & set(range(node.lineno, node.end_lineno + 1)):
                found.append((None, node.name))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and lines & set(range(item.lineno, item.end_lineno + 1)) \
                        and not item.name.startswith("__"):
                    found.append((node.name, item.name))
    return found


def make_target(record: dict, read: Reader, paths: list[str] | None = None, runner: str = "pytest") -> AttackTarget:
    target = AttackTarget(record, read, sorted(paths or []), runner=runner)
    gold = record.get("patch") or ""
    gold_files = patch_files(gold)
    test_files = patch_files(record["test_patch"])
    target.test_files = [p for p in (*test_files.modified, *test_files.created) if p.endswith(".py")]
    target.created_test_files = [p for p in test_files.created if p.endswith(".py")]
    target.library_files = [p for p in gold_files.modified if p.endswith(".py")]

    def pristine(path: str):
        text = read(path)
        return None if text is None else (text.encode(), 0o644)

    try:
        fixed = apply_test_patch(gold, gold_files, pristine).files
    except Exception:  # a reference patch that does not apply alone: no fixed copies
        fixed = {}
    for path in target.library_files:
        source = read(path)
        if source is None:
            continue
        target.functions[path] = functions_touched(source, changed_lines(gold, path))
        if path in fixed:
            target.fixed[path] = fixed[path][0].decode("utf-8", "replace")
    return target
