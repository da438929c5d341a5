"""A unified diff read as sections and hunks, byte for byte (pure).

``split_sections(text)`` cuts a diff into a preamble and one :class:`Section` per file:
its header (the ``diff --git`` line and git's extended headers, or a plain ``---``/``+++``
pair), its hunks (each ``@@`` line with exactly the lines its counts say, plus ``\\ No
newline`` markers) and a trailer (lines after the last hunk that belong to no hunk).
Joining the parts gives the text back unchanged. Lines end at ``\\n`` only, as git reads
them.

What it is for: recognising sections that carry nothing a grader can apply
(:meth:`Section.binary_stub`, :meth:`Section.new_symlink`) and giving the set-up step each
hunk on its own (harness/incontainer/prepare.py: the already-present fallback). Anything it
does not know — a ``GIT binary patch`` payload, a context diff, a hunk whose lines do not
add up — makes it answer None, and the caller then leaves the text whole: the checks and
the apply strategies see it exactly as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Section", "SplitPatch", "split_sections"]

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_BINARY_STUB = re.compile(r"Binary files (.+) and (.+) differ\r?\n?")
#: git's extended header lines (git-diff(1), "generating patches with -p")
_EXTENDED = ("old mode ", "new mode ", "deleted file mode ", "new file mode ", "copy from ", "copy to ",
             "rename from ", "rename to ", "similarity index ", "dissimilarity index ", "index ")
_GIT_PATHS = re.compile(r"diff --git a/(\S+) b/(\S+)\r?\n?")
#: the header lines a new symlink may have, and nothing else (what ``git diff`` writes)
_SYMLINK_HEADERS = re.compile(r"(new file mode 120000|index 0+\.\.[0-9a-f]+|--- /dev/null|\+\+\+ b/\S+)\r?\n?")
_STUB_HEADERS = re.compile(r"((new|deleted) file mode 100(644|755)|index [0-9a-f]+\.\.[0-9a-f]+( 100(644|755))?"
                           r"|(old|new) mode 100(644|755))\r?\n?")


@dataclass(frozen=True)
class Section:
    """One file's part of a diff, exactly as written."""

    header: str                 # from the section's first line up to its first hunk
    hunks: tuple[str, ...]      # each hunk: its @@ line and the lines its counts take
    trailer: str                # after the last hunk, up to the next section
    git: bool                   # begins with ``diff --git``

    @property
    def text(self) -> str:
        return self.header + "".join(self.hunks) + self.trailer

    @property
    def path(self) -> str | None:
        """The path git's header names (the new side), or the ``+++``/``---`` one."""
        lines = self.header.split("\n")
        match = _GIT_PATHS.fullmatch(lines[0] + "\n") if self.git else None
        if match:
            return match.group(2)
        for line in lines:
            if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
                return _strip_side(line[4:])
        for line in lines:
            if line.startswith("--- ") and not line.startswith("--- /dev/null"):
                return _strip_side(line[4:])
        return None

    def _header_lines(self) -> list[str]:
        return self.header.split("\n")[1:-1] if self.header.endswith("\n") else self.header.split("\n")[1:]

    def _git_same_path(self) -> str | None:
        match = _GIT_PATHS.fullmatch(self.header.split("\n", 1)[0] + "\n") if self.git else None
        return match.group(2) if match and match.group(1) == match.group(2) else None

    def binary_stub(self) -> tuple[str, str] | None:
        """``(path, git's line)`` when the section is a binary file git wrote without its
        bytes (``Binary files /dev/null and b/x differ``): nothing but git's extended headers
        and that line, no hunk, no payload. None otherwise."""
        path = self._git_same_path()
        if path is None or self.hunks or self.trailer.strip():
            return None
        lines = self._header_lines()
        stubs = [line for line in lines if _BINARY_STUB.fullmatch(line)]
        others = [line for line in lines if not _BINARY_STUB.fullmatch(line)]
        if len(stubs) != 1 or not all(_STUB_HEADERS.fullmatch(line) for line in others):
            return None
        return path, stubs[0].rstrip("\r")

    def new_symlink(self) -> tuple[str, str] | None:
        """``(path, target)`` when the section creates a symlink, written as ``git diff``
        writes one (mode 120000, one hunk ``@@ -0,0 +1 @@`` whose one line is the target,
        without a newline). Any other form of symlink (a mode change, a new target, a
        deletion) is None: those stay in the text and are refused."""
        path = self._git_same_path()
        if path is None or len(self.hunks) != 1 or self.trailer.strip():
            return None
        lines = self._header_lines()
        if "new file mode 120000" not in [line.rstrip("\r") for line in lines] or not all(
                _SYMLINK_HEADERS.fullmatch(line) for line in lines) or f"+++ b/{path}" not in lines:
            return None
        body = self.hunks[0].split("\n")
        if len(body) != 4 or body[3] != "" or not body[0].startswith("@@ -0,0 +1 @@") \
                or not body[1].startswith("+") or body[2] != "\\ No newline at end of file":
            return None
        return path, body[1][1:]


@dataclass(frozen=True)
class SplitPatch:
    preamble: str
    sections: tuple[Section, ...]

    @property
    def text(self) -> str:
        return self.preamble + "".join(s.text for s in self.sections)


def _strip_side(name: str) -> str:
    name = name.split("\t")[0].rstrip("\r\n")
    return name[2:] if name.startswith(("a/", "b/")) else name


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _starts_section(lines: list[str], i: int) -> bool:
    line = lines[i]
    return line.startswith("diff --git ") or (
        line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "))


def _hunk_end(lines: list[str], i: int) -> int | None:
    """The index after the hunk starting at ``lines[i]``, or None when it does not add up."""
    match = _HUNK.match(lines[i])
    if not match:
        return None
    old = int(match.group(2)) if match.group(2) is not None else 1
    new = int(match.group(4)) if match.group(4) is not None else 1
    i += 1
    while old > 0 or new > 0:
        if i >= len(lines):
            return None
        first = lines[i][:1]
        if first == " " or lines[i] in ("\n", "\r\n"):   # git reads an empty line as empty context
            old, new = old - 1, new - 1
        elif first == "-":
            old -= 1
        elif first == "+":
            new -= 1
        elif first != "\\":
            return None
        if old < 0 or new < 0:
            return None
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i


def split_sections(text: str) -> SplitPatch | None:
    """The diff's preamble and sections, or None when the reader does not know its shape."""
    lines = _lines(text)
    i, n = 0, len(lines)
    while i < n and not _starts_section(lines, i):
        i += 1
    preamble = "".join(lines[:i])
    sections: list[Section] = []
    while i < n:
        git = lines[i].startswith("diff --git ")
        start = i
        i += 1
        if git:
            while i < n and not lines[i].startswith(("@@ ", "diff --git ")):
                line = lines[i]
                if line.startswith("GIT binary patch"):
                    return None
                if line.startswith(_EXTENDED) or _BINARY_STUB.fullmatch(line):
                    i += 1
                elif line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
                    i += 2
                else:
                    break
        else:
            i += 1  # the +++ line
        header = "".join(lines[start:i])
        hunks = []
        while i < n and lines[i].startswith("@@ "):
            end = _hunk_end(lines, i)
            if end is None:
                return None
            hunks.append("".join(lines[i:end]))
            i = end
        trailer_start = i
        while i < n and not _starts_section(lines, i):
            if lines[i].startswith(("@@ ", "GIT binary patch", "*** ")):
                return None   # a hunk after stray lines, a binary payload, a context diff: not ours to cut
            i += 1
        sections.append(Section(header, tuple(hunks), "".join(lines[trailer_start:i]), git))
    split = SplitPatch(preamble, tuple(sections))
    return split if split.text == text else None
