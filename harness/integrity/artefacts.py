"""What the model's change may not contain: compiled code, archives Python can import
from, and files too large to inspect (pure).

Every file the model's change adds or modifies is either inspected (its bytes come back
from the set-up step and the scans read them, :mod:`harness.integrity.scan`) or refused
here, before anything of the model runs:

* **compiled code and importable archives**, by name and by content: bytecode
  (``.pyc``/``.pyo``, anything under ``__pycache__/``; a pyc header's magic number under
  any name), native code (``.so``/``.pyd``/``.dll``/``.dylib``/``.o``/``.a``; ELF,
  Mach-O, PE and ``ar`` headers under any name), archives ``zipimport`` reads
  (``.whl``/``.egg``/``.zip``/``.pyz``; a zip's local header at the start or its end
  record near the end, which is where ``zipimport`` looks). What such a file runs cannot
  be read from the tree: a hash-based ``.pyc`` is loaded without a look at its source,
  a zip on ``sys.path`` is imported from like a directory;
* **files too large to inspect**: over :data:`FILE_LIMIT` each, or over
  :data:`TOTAL_LIMIT` together. No reference patch of SWE-bench Lite or Verified comes
  near either (docs/SECURITY.md has the measurement).

Both are the model's doing: ``patch_rejected``, origin ``model``, naming the files.
Deleted files and mode-only changes add no bytes and are not looked at.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Iterable

#: the largest file (bytes) the model's change may add or modify: 12x the largest file a
#: SWE-bench Lite/Verified reference patch leaves (xarray/core/dataset.py after
#: pydata__xarray-6992, 342,780 bytes), above every file of the nine repositories'
#: trees (astropy's IERS table, 3,418,080 bytes)
FILE_LIMIT = 4 * 1024 * 1024
#: the most bytes all the files it adds or modifies may hold together: 20x the largest
#: reference patch's total (sympy__sympy-13091, 824,799 bytes)
TOTAL_LIMIT = 16 * 1024 * 1024

_BYTECODE_SUFFIXES = (".pyc", ".pyo")
_NATIVE = re.compile(r"\.(?:so(?:\.\d+)*|pyd|dll|dylib|o|a|lib|obj)$")
_ARCHIVE_SUFFIXES = (".whl", ".egg", ".zip", ".pyz")
#: (magic, what, the smallest size a real one has: shorter literals in source are not one)
_HEADERS = ((b"\x7fELF", "an ELF binary", 52), (b"\xfe\xed\xfa\xce", "a Mach-O binary", 28),
            (b"\xfe\xed\xfa\xcf", "a Mach-O binary", 32), (b"\xce\xfa\xed\xfe", "a Mach-O binary", 28),
            (b"\xcf\xfa\xed\xfe", "a Mach-O binary", 32), (b"!<arch>\n", "an ar archive (static library)", 68),
            (b"PK\x03\x04", "a zip archive", 30), (b"PK\x05\x06", "a zip archive", 22))
#: zipimport finds a zip by its end-of-central-directory record within the last 64 KiB
_ZIP_END = (b"PK\x05\x06", b"PK\x06\x06")
_ZIP_TAIL = 65_535 + 22


def pyc_magic(data: bytes) -> int | None:
    """The magic number of a pyc header (two bytes, then ``\\r\\n``), None when ``data``
    does not start like bytecode. Python 3 numbers are 3000-3999; Python 2's 50000-63999
    (and 20121 for 1.5)."""
    if len(data) < 8 or data[2:4] != b"\r\n":
        return None
    magic = int.from_bytes(data[:2], "little")
    if 3392 <= magic < 4000:  # Python 3.7+: a flags word follows (PEP 552), 0, 1 or 3
        return magic if data[4:8] in (b"\0\0\0\0", b"\1\0\0\0", b"\3\0\0\0") else None
    return magic if 3000 <= magic < 4000 or 50000 <= magic < 64000 or magic == 20121 else None


def compiled_content(data: bytes) -> str | None:
    """What compiled code or importable archive ``data`` is, by its bytes (None: none)."""
    magic = pyc_magic(data)
    if magic is not None and len(data) >= 12:
        return f"Python bytecode (pyc magic {magic})"
    for header, what, smallest in _HEADERS:
        if data.startswith(header) and len(data) >= smallest:
            return what
    if data.startswith(b"MZ") and len(data) >= 0x40:
        offset = int.from_bytes(data[0x3C:0x40], "little")
        if data[offset:offset + 4] == b"PE\0\0":
            return "a PE binary (Windows DLL or executable)"
    if len(data) >= 22 and any(data.rfind(end, max(0, len(data) - _ZIP_TAIL)) >= 0 for end in _ZIP_END):
        return "a zip archive (its end record)"
    return None


def compiled_name(path: str) -> str | None:
    """What compiled code or importable archive ``path`` names (None: none)."""
    name = posixpath.basename(path)
    if "__pycache__" in path.split("/")[:-1]:
        return "a file under __pycache__"
    if name.endswith(_BYTECODE_SUFFIXES):
        return "Python bytecode (by name)"
    if _NATIVE.search(name):
        return "native code (by name)"
    if name.endswith(_ARCHIVE_SUFFIXES):
        return "an importable archive (by name)"
    return None


def compiled(path: str, data: bytes | None) -> str | None:
    """Why the file at ``path`` is compiled code or an importable archive, or None."""
    return compiled_name(path) or (compiled_content(data) if data is not None else None)


@dataclass
class Refusal:
    """Files of the model's change that cannot be inspected, and why."""

    compiled: list[tuple[str, str]] = field(default_factory=list)     # (path, what it is)
    too_large: list[tuple[str, int]] = field(default_factory=list)    # (path, size)
    unread: list[str] = field(default_factory=list)                   # content not sent back
    total: int = 0

    def __bool__(self) -> bool:
        return bool(self.compiled or self.too_large or self.unread or self.total > TOTAL_LIMIT)

    def message(self) -> str:
        parts = []
        if self.compiled:
            parts.append("compiled code or archives, which cannot be inspected: "
                         + ", ".join(f"{p} ({what})" for p, what in self.compiled[:10]))
        if self.too_large:
            parts.append(f"files over the {FILE_LIMIT:,}-byte inspection limit: "
                         + ", ".join(f"{p} ({size:,} bytes)" for p, size in self.too_large[:10]))
        if self.total > TOTAL_LIMIT:
            parts.append(f"{self.total:,} bytes of added or modified files, over the {TOTAL_LIMIT:,}-byte total")
        if self.unread:
            parts.append("files whose content the set-up step did not send back: " + ", ".join(self.unread[:10]))
        return "the patch adds " + "; ".join(parts)

    def details(self) -> dict:
        return {"compiled": [{"path": p, "what": w} for p, w in self.compiled[:100]],
                "too_large": [{"path": p, "size": s} for p, s in self.too_large[:100]],
                "unread": self.unread[:100], "total_bytes": self.total,
                "limits": {"file": FILE_LIMIT, "total": TOTAL_LIMIT}}


def added_files(changes: Iterable) -> list:
    """The tree changes (``harness.integrity.tree.TreeChange``) that add bytes: files
    created or modified, or that became files."""
    return [c for c in changes if c.kind == "file" and c.change in ("created", "modified", "type")]


def refusal(changes: Iterable) -> Refusal:
    """What of the model's change must be refused (falsy when nothing)."""
    out = Refusal()
    for change in added_files(changes):
        size = change.size if change.size is not None else len(change.content or b"")
        out.total += size
        what = compiled(change.path, change.content)
        if what:
            out.compiled.append((change.path, what))
        if size > FILE_LIMIT:
            out.too_large.append((change.path, size))
        elif change.content is None:
            out.unread.append(change.path)
    return out
