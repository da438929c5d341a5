"""Writing patches the way attackers do: ordinary git diffs, and the shapes that made the
parser and git disagree (C-quoted names, odd prefixes, context diffs).

Lines are split at ``\\n`` only (as git does), so a line holding a carriage return or
another separator stays one line of the diff.
"""

from __future__ import annotations

import difflib
from typing import Callable

Reader = Callable[[str], "str | None"]


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _body(old: str | None, new: str | None, a: str, b: str) -> list[str]:
    body = list(difflib.unified_diff(_lines(old), _lines(new), a, b, lineterm="\n"))
    out = []
    for line in body:
        if line.startswith(("--- ", "+++ ")):
            out.append(line if line.endswith("\n") else line + "\n")
        elif not line.endswith("\n"):
            out.append(line + "\n\\ No newline at end of file\n")
        else:
            out.append(line)
    return out


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style diff turning ``old`` into ``new`` (None: the file is absent)."""
    header = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    if new is None:
        header.append("deleted file mode 100644\n")
    return "".join(header + _body(old, new, "/dev/null" if old is None else f"a/{path}",
                                  "/dev/null" if new is None else f"b/{path}"))


def edit(read: Reader, edits: dict[str, str | None]) -> str:
    """A patch applying whole-file ``edits`` (path -> new text, None deletes)."""
    return "".join(file_diff(path, read(path), new) for path, new in edits.items())


def c_quote(path: str) -> str:
    """git's C-quoting with every letter of the last name written as an octal escape."""
    head, _, name = path.rpartition("/")
    escaped = "".join(f"\\{ord(c):03o}" if c.isalpha() else c for c in name)
    return f"{head}/{escaped}" if head else escaped


def quoted_new_file(path: str, text: str) -> str:
    """A new file whose name git unquotes (``"b/con\\146test.py"`` is ``conftest.py``)."""
    q = c_quote(path)
    body = _body(None, text, "/dev/null", "x")[2:]
    return (f'diff --git "a/{q}" "b/{q}"\nnew file mode 100644\n--- /dev/null\n+++ "b/{q}"\n' + "".join(body))


def odd_prefix_new_file(path: str, text: str, prefix: str = "y") -> str:
    """A plain unified diff (no ``diff --git``) with ``-p1`` prefixes other than a/ and b/."""
    body = _body(None, text, "/dev/null", "x")[2:]
    return f"--- /dev/null\n+++ {prefix}/{path}\n" + "".join(body)


def odd_prefix_edit(path: str, old: str | None, new: str, prefixes: tuple[str, str] = ("x", "y")) -> str:
    """A plain unified diff (no ``diff --git``) creating or changing ``path`` with ``-p1``
    prefixes other than a/ and b/."""
    body = _body(old, new, "a", "b")[2:]
    source = "/dev/null" if old is None else f"{prefixes[0]}/{path}"
    return f"--- {source}\n+++ {prefixes[1]}/{path}\n" + "".join(body)


def context_new_file(path: str, text: str) -> str:
    """A context diff creating a file: only ``patch`` applies it; ``git apply`` refuses."""
    lines = _lines(text)
    out = ["*** /dev/null\n", f"--- {path}\n", "***************\n", "*** 0 ****\n", f"--- 1,{len(lines)} ----\n"]
    out += [f"+ {line}" if line.endswith("\n") else f"+ {line}\n" for line in lines]
    return "".join(out)
