"""Two submissions (unified diffs) compared as git applies them, and where a difference comes from.

Compared per file, keyed by the file's ``diff --git`` line: the header (mode, new/deleted, rename, ``---``/
``+++`` lines) and the hunks, exactly. The ``index <old>..<new>`` line's abbreviated blob ids are left out:
git abbreviates to the shortest unique prefix, so the same change reads ``index 4f0290a4..e7409dc3`` in
SWE-bench's image (history kept) and ``index 4f0290a..e7409dc`` in a one-commit export, and ``git apply``
never reads them for a text hunk. A binary file's diff is only the stub ``Binary files ... differ``; there
the ids are the content's only witness, so they must agree to the shorter one's length.

A differing file is an ``environment_artefact`` when SWE-bench's own image set-up explains it
(:data:`ARTEFACT_RULES`), else ``agent_output_differs``. SWE-bench builds each instance image with
(SWE-bench/SWE-bench, swebench/harness/test_spec/python.py ``make_repo_script_list_py``, read at 03b6fa9):
``pre_install`` commands, the ``install`` command, then ``git commit --allow-empty -am SWE-bench``. The
commit takes in the edits to tracked files (so the agent's diff there does not show them, while a diff
against the pristine base commit does); untracked files an install leaves (a ``build/`` tree) stay
untracked, and the scaffold's ``git add -A`` carries them into the submission. Either way, the difference
lies on one side only and is exactly the set-up's.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass
from typing import Any

ENVIRONMENT_ARTEFACT = "environment_artefact"
AGENT_OUTPUT_DIFFERS = "agent_output_differs"
#: the key of the text before the first ``diff --git`` line (mini-swe-agent keeps whatever the submit
#: command printed), compared like a file
PREAMBLE = "<text before the first diff>"

#: Where the rules come from: SWE-bench/SWE-bench swebench/harness/constants/python.py, read at 096a15a.
_SPECS = "SWE-bench swebench/harness/constants/python.py"


@dataclass(frozen=True)
class ArtefactRule:
    """One change SWE-bench's image set-up makes to the tree of ``repository``."""

    name: str
    repository: str
    paths: tuple[str, ...]       # fnmatch patterns (``*`` crosses ``/``)
    #: "untracked": files the install leaves, whole new files on one side only;
    #: "edited": tracked files a ``sed -i 's/OLD/NEW/'`` rewrote, the (OLD, NEW) pairs below
    kind: str
    substitutions: tuple[tuple[str, str], ...] = ()
    source: str = ""


_SPHINX_SETUP = (  # SPECS_SPHINX 3.0-4.4 pre_install, and the version-dependent htmlhelp/serializinghtml pins
    ("Jinja2>=2.3", "Jinja2<3.0"),
    ("sphinxcontrib-applehelp", "sphinxcontrib-applehelp<=1.0.7"),
    ("sphinxcontrib-devhelp", "sphinxcontrib-devhelp<=1.0.5"),
    ("sphinxcontrib-qthelp", "sphinxcontrib-qthelp<=1.0.6"),
    ("alabaster>=0.7,<0.8", "alabaster>=0.7,<0.7.12"),
    ("'packaging',", "'packaging', 'markupsafe<=2.0.1',"),
    ("sphinxcontrib-htmlhelp>=2.0.0", "sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4"),
    ("sphinxcontrib-serializinghtml>=1.1.5", "sphinxcontrib-serializinghtml>=1.1.5,<=1.1.9"),
    ("sphinxcontrib-htmlhelp", "sphinxcontrib-htmlhelp<=2.0.4"),
    ("sphinxcontrib-serializinghtml", "sphinxcontrib-serializinghtml<=1.1.9"),
)

#: SWE-bench's set-up changes to the tree, by repository (every version's, since an edit is recognised by
#: its content: a rule never covers a change the set-up could not have made).
ARTEFACT_RULES: tuple[ArtefactRule, ...] = (
    ArtefactRule("non-editable install's build tree", "psf/requests", ("build/*",), "untracked",
                 source=f"{_SPECS}: SPECS_REQUESTS install 'python -m pip install .' (setuptools builds in "
                        "build/; requests' .gitignore names build/ at 2.4, not yet at 1.1, psf__requests-1142's "
                        "base)"),
    ArtefactRule("qhull unpacked into build/", "matplotlib/matplotlib", ("build/*",), "untracked",
                 source=f"{_SPECS}: SPECS_MATPLOTLIB pre_install QHULL_BUILD_DIR=/testbed/build"),
    ArtefactRule("tox.ini runs pytest -rA", "sphinx-doc/sphinx", ("tox.ini",), "edited",
                 (("pytest", "pytest -rA"),),
                 source=f"{_SPECS}: SPECS_SPHINX pre_install \"sed -i 's/pytest/pytest -rA/' tox.ini\""),
    ArtefactRule("setup.py pins", "sphinx-doc/sphinx", ("setup.py",), "edited", _SPHINX_SETUP,
                 source=f"{_SPECS}: SPECS_SPHINX 3.0-4.4 pre_install, sed -i ... setup.py"),
    ArtefactRule("pyproject.toml pins setuptools", "astropy/astropy", ("pyproject.toml",), "edited",
                 (('requires = ["setuptools",', 'requires = ["setuptools==68.0.0",'),),
                 source=f"{_SPECS}: SPECS_ASTROPY 4.1-5.3 pre_install sed -i ... pyproject.toml"),
    ArtefactRule("setup.cfg typo fixed", "pytest-dev/pytest", ("setup.cfg",), "edited", ((">=>=", ">="),),
                 source=f"{_SPECS}: SPECS_PYTEST['6.3'] pre_install \"sed -i 's/>=>=/>=/' setup.cfg\""),
)


@dataclass(frozen=True)
class FilePatch:
    """One file's part of a diff, ready to compare."""

    key: str                  # the ``diff --git`` line after its prefix: ``a/X b/X``
    path: str
    header: tuple[str, ...]   # the ``index`` line without its blob ids
    blob_ids: tuple[str, ...]  # the ``index`` line's abbreviated ids (old, new), when there is one
    hunks: tuple[str, ...]
    new_file: bool
    binary: bool

    def changed_lines(self) -> tuple[Counter[str], Counter[str]]:
        """(removed, added) lines of every hunk, as multisets."""
        removed: Counter[str] = Counter()
        added: Counter[str] = Counter()
        for hunk in self.hunks:
            for line in hunk.split("\n")[1:]:
                if line.startswith("-"):
                    removed[line[1:]] += 1
                elif line.startswith("+"):
                    added[line[1:]] += 1
        return removed, added


def _path_of(key: str, lines: list[str]) -> str:
    for prefix, strip in (("+++ ", "b/"), ("--- ", "a/"), ("rename to ", "")):
        for line in lines:
            if line.startswith(prefix) and line[len(prefix):] != "/dev/null":
                return line[len(prefix):].removeprefix(strip)
    # "a/X b/X": without ---/+++ lines (a mode change, a binary stub) the two halves are equal
    half = (len(key) - 1) // 2
    if key[half] == " " and key[2:half] == key[half + 3:]:
        return key[2:half]
    return key


def _file_patch(key: str, lines: list[str]) -> FilePatch:
    header: list[str] = []
    blob_ids: tuple[str, ...] = ()
    at = 0
    while at < len(lines) and not lines[at].startswith("@@"):
        line = lines[at]
        if line.startswith("index ") and ".." in line.split(" ")[1]:
            fields = line.split(" ")
            blob_ids = tuple(fields[1].split("..", 1))
            line = " ".join(["index", *fields[2:]])
        header.append(line)
        at += 1
    while header and not header[-1]:  # the newline that ends the diff
        header.pop()
    hunks: list[list[str]] = []
    for line in lines[at:]:
        if line.startswith("@@") or not hunks:
            hunks.append([])
        hunks[-1].append(line)
    # a trailing empty line is the newline that ends the diff, not content
    texts = tuple("\n".join(h).rstrip("\n") for h in hunks)
    binary = any(line.startswith(("Binary files ", "GIT binary patch")) for line in header)
    return FilePatch(key, _path_of(key, header), tuple(header), blob_ids, texts,
                     any(line.startswith("new file mode") for line in header), binary)


def parse_patch(text: str) -> tuple[str, dict[str, FilePatch]]:
    """(text before the first file, {key: FilePatch}) of a git diff. Never refuses: text that is no diff
    at all is all preamble, so a submission that is an error message still compares."""
    preamble: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            blocks.append((line[len("diff --git "):], []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            preamble.append(line)
    files: dict[str, FilePatch] = {}
    seen: Counter[str] = Counter()
    for key, lines in blocks:
        seen[key] += 1
        if seen[key] > 1:  # the same file twice in one diff: both kept, in order
            key = f"{key} (#{seen[key]})"
        files[key] = _file_patch(key, lines)
    return "\n".join(preamble).strip("\n"), files


def canonical_patch(text: str) -> str:
    """The diff with the ``index`` lines' blob ids dropped: equal for two diffs git applies alike (text
    files; binary stubs need :func:`compare_submissions`, which also compares the ids' common prefix)."""
    preamble, files = parse_patch(text)
    parts = [preamble] + [f"diff --git {p.key}\n" + "\n".join(p.header + p.hunks) for p in files.values()]
    return "\n".join(parts)


def _same_file(left: FilePatch, right: FilePatch) -> tuple[bool, bool]:
    """(headers equal, hunks equal)."""
    header_equal = left.header == right.header
    if left.binary or right.binary:
        ids_agree = len(left.blob_ids) == len(right.blob_ids) and all(
            a.startswith(b) or b.startswith(a) for a, b in zip(left.blob_ids, right.blob_ids))
        header_equal = header_equal and ids_agree
    return header_equal, left.hunks == right.hunks


def _substituted(line: str, substitutions: tuple[tuple[str, str], ...]) -> set[str]:
    """What ``sed -i 's/OLD/NEW/'`` (first occurrence on the line) makes of ``line``: each substitution
    alone, or all of them in order (a line two commands touch)."""
    results = {line.replace(old, new, 1) for old, new in substitutions if old in line}
    every = line
    for old, new in substitutions:
        every = every.replace(old, new, 1)
    return (results | {every}) - {line}


def _only_substitutions(rule: ArtefactRule, left: FilePatch | None, right: FilePatch | None) -> bool:
    """True when the two sides' changes to the file differ by exactly some of the rule's edits, all on one
    side: each extra removed line paired with an extra added line it becomes under the rule."""
    empty: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
    (left_removed, left_added), (right_removed, right_added) = (
        left.changed_lines() if left else empty, right.changed_lines() if right else empty)
    extras = [(left_removed - right_removed, left_added - right_added),
              (right_removed - left_removed, right_added - left_added)]
    sides = [(removed, added) for removed, added in extras if removed or added]
    if len(sides) != 1:
        return False
    removed, added = sides[0]
    added = Counter(added)
    for line in removed.elements():
        match = next((a for a in _substituted(line, rule.substitutions) if added[a] > 0), None)
        if match is None:
            return False
        added[match] -= 1
    return not +added and bool(removed)


def artefact_rule(repository: str | None, path: str, left: FilePatch | None,
                  right: FilePatch | None) -> ArtefactRule | None:
    """The set-up change that explains the difference in ``path``, or None."""
    for rule in ARTEFACT_RULES:
        if rule.repository != repository or not any(fnmatch.fnmatch(path, p) for p in rule.paths):
            continue
        if rule.kind == "untracked":
            present = [p for p in (left, right) if p is not None]
            if len(present) == 1 and present[0].new_file:
                return rule
        elif _only_substitutions(rule, left, right):
            return rule
    return None


@dataclass(frozen=True)
class FileDifference:
    path: str
    present_in: tuple[str, ...]   # the labels of the sides that change the file
    header_equal: bool | None     # None when only one side changes it
    hunks_equal: bool | None
    hunks: tuple[int, int]        # how many hunks each side has
    kind: str                     # ENVIRONMENT_ARTEFACT | AGENT_OUTPUT_DIFFERS
    rule: ArtefactRule | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "present_in": list(self.present_in), "header_equal": self.header_equal,
                "hunks_equal": self.hunks_equal, "hunks": list(self.hunks), "class": self.kind,
                "explained_by": None if self.rule is None else {"rule": self.rule.name, "source": self.rule.source}}


@dataclass(frozen=True)
class SubmissionComparison:
    labels: tuple[str, str]
    same: bool
    files: tuple[int, int]                     # files each side changes
    equal_files: int
    differences: tuple[FileDifference, ...]

    @property
    def same_except_environment_artefacts(self) -> bool:
        return all(d.kind == ENVIRONMENT_ARTEFACT for d in self.differences)

    def to_json(self) -> dict[str, Any]:
        return {"compared": list(self.labels), "same": self.same,
                "same_except_environment_artefacts": self.same_except_environment_artefacts,
                "files": dict(zip(self.labels, self.files)), "equal_files": self.equal_files,
                "differences": [d.to_json() for d in self.differences]}


def compare_submissions(left: str, right: str, *, repository: str | None = None,
                        labels: tuple[str, str] = ("recorded", "replayed")) -> SubmissionComparison:
    """Compare two diffs file by file; ``repository`` (``owner/name``) selects the artefact rules."""
    left_preamble, left_files = parse_patch(left)
    right_preamble, right_files = parse_patch(right)
    differences = []
    if left_preamble != right_preamble:
        holders = tuple(label for label, text in zip(labels, (left_preamble, right_preamble)) if text)
        differences.append(FileDifference(PREAMBLE, holders, None, False, (0, 0), AGENT_OUTPUT_DIFFERS, None))
    equal = 0
    for key in dict.fromkeys([*left_files, *right_files]):
        a, b = left_files.get(key), right_files.get(key)
        header_equal = hunks_equal = None
        if a is not None and b is not None:
            header_equal, hunks_equal = _same_file(a, b)
            if header_equal and hunks_equal:
                equal += 1
                continue
        present = a if a is not None else b
        assert present is not None  # the key came from one of the two
        path = present.path
        rule = artefact_rule(repository, path, a, b)
        differences.append(FileDifference(
            path, tuple(label for label, p in zip(labels, (a, b)) if p is not None), header_equal, hunks_equal,
            (len(a.hunks) if a else 0, len(b.hunks) if b else 0),
            ENVIRONMENT_ARTEFACT if rule else AGENT_OUTPUT_DIFFERS, rule))
    return SubmissionComparison(labels, not differences, (len(left_files), len(right_files)), equal,
                                tuple(differences))
