"""The paths a unified diff touches, read the way ``git apply`` reads them (pure).

A model patch is applied by ``git apply`` (the sandbox's first strategies: default
options, so one leading path component is stripped and, for a patch without ``diff --git``
headers, the strip count is guessed). The harness cross-checks what the patch text says
against what the patched tree shows (harness/integrity/tree.py): any path form that git
reads differently from the harness makes an honest patch disagree with its own tree and be
refused. So this module follows git's ``apply.c`` for every form git writes or reads:

* **quoted names** (``core.quotePath``, the default, and any name with a control
  character, a double quote or a backslash): C-style, ``"a/caf\\303\\251.py"``, with the
  escapes ``\\a \\b \\t \\n \\v \\f \\r \\" \\\\`` and three-digit octal bytes; the bytes are
  UTF-8 (undecodable bytes kept as surrogates, as the set-up step reports such names);
* **prefixes**: whatever the first component is (``a/``, ``b/``, ``--src-prefix=x/``), one
  component is stripped (``-p1``); a ``--no-prefix`` diff therefore names its files one
  directory up, exactly as git applies it; doubled slashes are squashed;
* **names with spaces**: in ``---``/``+++`` lines an unquoted name ends at a TAB (git
  writes one after such names), in ``rename``/``copy`` lines at the end of the line, and in
  the ``diff --git`` line it is the one name that appears twice;
* **traditional diffs** (no ``diff --git``): ``/dev/null`` sides, a trailing timestamp, and
  the strip count guessed as git guesses it (0 when the name has no ``/``);
* **hunks** are skipped by their line counts, so a removed line that reads ``--- x`` is
  content, not a header.

:func:`read_paths` returns every section's old and new name and whether it creates or
deletes the file; ``harness.patches.patch_files`` builds its :class:`PatchFiles` from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
#: GNU diff's and git's timestamps after a traditional name (git's diff_timestamp_len)
_TIMESTAMP = re.compile(
    r"[ \t]+(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: ?[-+]\d{4})?"
    r"|\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}(?: [-+]\d{4})?)[ \t]*$")
_EPOCH = re.compile(r"[ \t]1970-01-01 00:00:00(?:\.0+)? ?\+0000[ \t]*$|[ \t]1969-12-31 \d\d:\d\d:\d\d(?:\.0+)? ?-\d{4}")
_GIT_OPS = ("--- ", "+++ ", "old mode ", "new mode ", "deleted file mode ", "new file mode ", "copy from ",
            "copy to ", "rename old ", "rename new ", "rename from ", "rename to ", "similarity index ",
            "dissimilarity index ", "index ")


#: what git's isspace() holds (its own ctype table: no vertical tab, no form feed)
_SPACE = frozenset(" \t\n\r")


@dataclass(frozen=True)
class Section:
    """One file of a diff: its name before and after (None: ``/dev/null`` or unknown);
    ``copied``: the new name is a copy (``copy from``/``copy to``), the old one stays."""

    old: str | None
    new: str | None
    created: bool = False
    deleted: bool = False
    copied: bool = False
    #: why git would call this section's hunks corrupt (their lines do not add up), or None
    corrupt: str | None = None


def unquote(text: str) -> tuple[str, int] | None:
    """A C-quoted name at the start of ``text`` (which begins with ``"``): the name and the
    index one past its closing quote, or None when it is not a well-formed quoted name."""
    out = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), i + 1
        if c == "\n":
            return None
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        i += 1
        if i >= len(text):
            return None
        c = text[i]
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
            i += 1
        elif c in "0123" and len(text) >= i + 3 and all(d in "01234567" for d in text[i + 1:i + 3]):
            out.append(int(text[i:i + 3], 8))
            i += 3
        else:
            return None
    return None


def _squash(name: str | None) -> str | None:
    return re.sub("/{2,}", "/", name) if name else name


def _skip_components(name: str, strip: int) -> str | None:
    """``name`` less its first ``strip`` components (git's skip_tree_prefix), or None."""
    for _ in range(strip):
        slash = name.find("/")
        if slash < 0:
            return None
        name = name[slash + 1:]
    return name


def _find_name(line: str, strip: int, stop_at_tab: bool, default: str | None = None) -> str | None:
    """git's find_name: a quoted name, else the text up to a TAB (``stop_at_tab``) or a line
    end, less ``strip`` components, preferring ``default`` when the name only extends it."""
    if line.startswith('"'):
        quoted = unquote(line)
        if quoted is not None:
            stripped = _skip_components(quoted[0], strip)
            if stripped is not None:
                return _squash(stripped)
    end = len(line)
    for index, char in enumerate(line):
        if char == "\n" or (char in _SPACE and char != " " and (char != "\t" or stop_at_tab)):
            end = index
            break
    return _common(line[:end], strip, default)


def _common(name: str, strip: int, default: str | None) -> str | None:
    stripped = _skip_components(name, strip) if strip else name
    if not stripped:
        return _squash(default)
    if default and len(default) < len(stripped) and stripped.startswith(default):
        return _squash(default)
    return _squash(stripped)


def _traditional_name(line: str, strip: int, default: str | None = None) -> str | None:
    if line.startswith('"'):
        quoted = unquote(line)
        if quoted is not None:
            stripped = _skip_components(quoted[0], strip)
            if stripped is not None:
                return _squash(stripped)
    stamp = _TIMESTAMP.search(line)
    if stamp is None:
        return _find_name(line, strip, True, default)
    return _common(line[:stamp.start()], strip, default)


def _is_dev_null(line: str) -> bool:
    return line.startswith("/dev/null") and (len(line) == 9 or line[9].isspace())


def header_name(rest: str, strip: int = 1) -> str | None:
    """The name of a ``diff --git`` line without a rename (git's git_header_name): the
    one name both sides spell alike, quoted or not; None when the sides differ."""
    if rest.startswith('"'):
        first = unquote(rest)
        if first is None:
            return None
        name = _skip_components(first[0], strip)
        second = rest[first[1]:].lstrip(" \t")
        if name is None or not second:
            return None
        other: str | None = second
        if second.startswith('"'):
            quoted = unquote(second)
            other = quoted[0] if quoted is not None else None
        return name if other is not None and _skip_components(other, strip) == name else None
    name = _skip_components(rest, strip)
    if name is None:
        return None
    quote = name.find('"')
    if quote >= 0:
        quoted = unquote(name[quote:])
        if quoted is None:
            return None
        candidate = _skip_components(quoted[0], strip)
        if candidate is not None and len(candidate) < quote and name.startswith(candidate) \
                and name[len(candidate)] in _SPACE:
            return candidate
        return None
    for index, char in enumerate(name):
        if char in " \t" and index + 1 < len(name):
            after = _skip_components(name[index + 1:], strip)
            if after is not None and after == name[:index]:
                return name[:index]
    return None


def _hunk_end(lines: list[str], start: int) -> tuple[int, str | None]:
    """The index after the hunk whose ``@@`` line is ``lines[start]`` (its lines counted as
    git counts them), and why git would call it corrupt (None when it is not)."""
    match = _HUNK.match(lines[start])
    if match is None:
        return start + 1, f"a malformed hunk header at line {start + 1}"
    old = int(match.group(1)) if match.group(1) is not None else 1
    new = int(match.group(2)) if match.group(2) is not None else 1
    i = start + 1
    while old > 0 or new > 0:
        if i >= len(lines):
            return i, f"the hunk at line {start + 1} ends before its lines do"
        line = lines[i]
        first = line[:1]
        if first in ("", " ") or line == "\r":
            old, new = old - 1, new - 1
        elif first == "-":
            old -= 1
        elif first == "+":
            new -= 1
        elif first != "\\":
            return i, f"line {i + 1} belongs to no hunk line kind"
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i, None


def _hunks_end(lines: list[str], i: int) -> tuple[int, str | None]:
    while i < len(lines) and lines[i].startswith("@@ -"):
        i, corrupt = _hunk_end(lines, i)
        if corrupt:
            return i, corrupt
    return i, None


def _git_section(lines: list[str], i: int, strip: int) -> tuple[Section, int]:
    default = header_name(lines[i][len("diff --git "):].rstrip("\r"), strip)
    old = new = None
    created = deleted = False
    renamed_old = renamed_new = None
    copied = False
    i += 1
    while i < len(lines):
        line = lines[i].rstrip("\r")
        op = next((o for o in _GIT_OPS if line.startswith(o)), None)
        if op is None:
            break
        value = line[len(op):]
        if op == "--- ":
            old = None if _is_dev_null(value) else _find_name(value, strip, True)
        elif op == "+++ ":
            new = None if _is_dev_null(value) else _find_name(value, strip, True)
        elif op == "new file mode ":
            created = True
        elif op == "deleted file mode ":
            deleted = True
        elif op in ("rename from ", "rename old ", "copy from "):
            renamed_old = _find_name(value, max(strip - 1, 0), False)
            copied = op == "copy from "
        elif op in ("rename to ", "rename new ", "copy to "):
            renamed_new = _find_name(value, max(strip - 1, 0), False)
        i += 1
    old = renamed_old or old or (None if created else default)
    new = renamed_new or new or (None if deleted else default)
    end, corrupt = _hunks_end(lines, i)
    return Section(old, new, created, deleted, copied, corrupt), end


def _guess_strip(line: str) -> int | None:
    if _is_dev_null(line):
        return None
    name = _traditional_name(line, 0)
    if not name:
        return None
    return 1 if "/" in name else 0


def read_paths(text: str) -> list[Section]:
    """Every file section of a diff, in order (see the module docstring)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()   # the text's last newline ends its last line; it does not start another
    sections: list[Section] = []
    strip, strip_known = 1, False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            section, i = _git_section(lines, i, strip)
            sections.append(section)
            continue
        if (line.startswith("--- ") and i + 2 < len(lines) and lines[i + 1].startswith("+++ ")
                and lines[i + 2].startswith("@@ -")):
            first, second = line[4:].rstrip("\r"), lines[i + 1][4:].rstrip("\r")
            if not strip_known:
                p, q = _guess_strip(first), _guess_strip(second)
                p = q if p is None else p
                if p is not None and p == q:
                    strip, strip_known = p, True
            i, corrupt = _hunks_end(lines, i + 2)
            if _is_dev_null(first):
                sections.append(Section(None, _traditional_name(second, strip), created=True, corrupt=corrupt))
            elif _is_dev_null(second):
                sections.append(Section(_traditional_name(first, strip), None, deleted=True, corrupt=corrupt))
            else:
                name = _traditional_name(second, strip, _traditional_name(first, strip))
                if _EPOCH.search(first):
                    sections.append(Section(None, name, created=True, corrupt=corrupt))
                elif _EPOCH.search(second):
                    sections.append(Section(name, None, deleted=True, corrupt=corrupt))
                else:
                    sections.append(Section(name, name, corrupt=corrupt))
            continue
        i += 1
    return sections
