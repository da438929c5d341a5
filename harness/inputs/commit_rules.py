"""The rules that turn a fix commit into an instance record (pure: strings in, strings out).

``harness instances from-commits`` (harness/inputs/fix_commits.py reads the commits) applies
them; every rule is one a user can see and change on the command line:

* **test files** (:class:`TestPathRule`): a changed path goes into ``test_patch`` when a
  pattern matches it, else into ``patch``. A pattern with a ``/`` is matched against the
  whole path (``fnmatch``: ``*`` crosses ``/``), one without against each of the path's
  components. Default: a ``tests``/``test``/``testing`` directory, ``test_*`` and
  ``*_test.py`` files, ``conftest.py`` (the demo set's rule; SWE-bench's own collection
  put every path containing ``test`` there). ``--test-path PATTERN`` replaces the default.
* **version** (:func:`version_of`): ``describe-minor`` (default) takes the nearest tag
  reachable from the base commit (``git describe --tags --abbrev=0``), drops a prefix
  before its first digit (``v``, ``release-``) and keeps ``MAJOR.MINOR`` (``v4.2.1`` →
  ``4.2``: SWE-bench groups instances by minor version); ``describe-major`` keeps
  ``MAJOR``, ``describe`` the whole tag less its prefix, ``fixed:X`` is ``X`` for every
  record (``--version X``). A base with no tag under a ``describe`` rule is refused, naming
  the commit.
* **environment_setup_commit** (:func:`environment_setup_commits`): ``base`` (default: each
  record's own base commit, the tree its environment is built from) or ``version-latest``
  (SWE-bench's: the base of the newest record of the same version).
* **instance id** (:func:`instance_id_for`): ``OWNER__NAME-<PR number>`` for a merge
  commit whose message says ``Merge pull request #N``, else ``OWNER__NAME-<12 hex digits of
  the commit>``; ``--instance-id COMMIT=ID`` names one.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

#: the demo set's rule (harness/inputs/demo/records.py ``is_test_path``), as patterns
DEFAULT_TEST_PATTERNS = ("tests", "test", "testing", "test_*", "*_test.py", "conftest.py")
VERSION_RULES = ("describe-minor", "describe-major", "describe")
ENV_SETUP_RULES = ("base", "version-latest")
#: the field order of a record (SWE-bench's, as the demo set writes it)
RECORD_FIELDS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                 "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit")
_PULL_REQUEST = re.compile(r"^Merge pull request #(\d+)\b")


class RuleError(ValueError):
    """A rule given on the command line cannot be used (the message says why)."""


@dataclass(frozen=True)
class TestPathRule:
    """Which changed paths are test files (see the module docstring)."""

    __test__ = False  # not a pytest class

    patterns: tuple[str, ...] = DEFAULT_TEST_PATTERNS

    def is_test(self, path: str) -> bool:
        for pattern in self.patterns:
            if "/" in pattern:
                if fnmatch.fnmatchcase(path, pattern):
                    return True
            elif any(fnmatch.fnmatchcase(part, pattern) for part in path.split("/")):
                return True
        return False

    def split(self, paths: Iterable[str]) -> tuple[list[str], list[str]]:
        """(code paths, test paths), each in the order given, without repeats."""
        code: list[str] = []
        tests: list[str] = []
        for path in dict.fromkeys(paths):
            (tests if self.is_test(path) else code).append(path)
        return code, tests


@dataclass(frozen=True)
class VersionRule:
    """``kind``: one of :data:`VERSION_RULES`, or ``fixed`` with ``value``."""

    kind: str = "describe-minor"
    value: str = ""

    @classmethod
    def parse(cls, text: str) -> "VersionRule":
        if text.startswith("fixed:"):
            if not text[len("fixed:"):].strip():
                raise RuleError("fixed: needs a version (fixed:1.0)")
            return cls("fixed", text[len("fixed:"):].strip())
        if text not in VERSION_RULES:
            raise RuleError(f"unknown version rule {text!r}: one of {', '.join(VERSION_RULES)} or fixed:VERSION")
        return cls(text)

    @property
    def needs_tag(self) -> bool:
        return self.kind != "fixed"

    def describe(self) -> str:
        return f"fixed:{self.value}" if self.kind == "fixed" else self.kind


def version_of(rule: VersionRule, tag: str | None) -> str | None:
    """The version a record gets under ``rule`` from the nearest tag at its base (None: no
    tag, and the rule needs one)."""
    if rule.kind == "fixed":
        return rule.value
    if not tag:
        return None
    match = re.search(r"\d", tag)
    bare = tag[match.start():] if match else tag
    if rule.kind == "describe":
        return bare
    numbers = re.match(r"\d+(?:\.\d+)*", bare)
    if numbers is None:
        return bare
    parts = numbers.group(0).split(".")
    keep = 1 if rule.kind == "describe-major" else 2
    return ".".join(parts[:keep] if len(parts) >= keep else [*parts, *["0"] * (keep - len(parts))])


def environment_setup_commits(records: Sequence[Mapping[str, str]], rule: str) -> list[str]:
    """Each record's ``environment_setup_commit`` under ``rule`` (records need
    ``base_commit``, ``version`` and ``created_at``)."""
    if rule not in ENV_SETUP_RULES:
        raise RuleError(f"unknown environment_setup_commit rule {rule!r}: one of {', '.join(ENV_SETUP_RULES)}")
    if rule == "base":
        return [r["base_commit"] for r in records]
    latest: dict[str, tuple[str, str]] = {}
    for r in records:
        seen = latest.get(r["version"])
        if seen is None or r["created_at"] >= seen[0]:
            latest[r["version"]] = (r["created_at"], r["base_commit"])
    return [latest[r["version"]][1] for r in records]


def instance_id_for(repo: str, sha: str, message: str, named: Mapping[str, str]) -> str:
    """The record's id: the one the user named for this commit, else from a pull
    request's merge message, else from the commit id."""
    if sha in named:
        return named[sha]
    stem = repo.replace("/", "__")
    match = _PULL_REQUEST.match(message)
    return f"{stem}-{match.group(1)}" if match else f"{stem}-{sha[:12]}"


def problem_statement_of(message: str) -> str:
    """A commit message as a problem statement: the message as written, its trailing
    blank lines dropped and one newline kept at the end."""
    text = message.replace("\r\n", "\n").rstrip("\n")
    return text + "\n" if text else ""


def make_record(*, repo: str, instance_id: str, base_commit: str, patch: str, test_patch: str,
                problem_statement: str, created_at: str, version: str) -> dict[str, object]:
    """One record with empty test lists (``harness instances derive`` fills them) and
    ``environment_setup_commit`` set to the base (:func:`environment_setup_commits` may
    change it once every record is known)."""
    record: dict[str, object] = {
        "repo": repo, "instance_id": instance_id, "base_commit": base_commit, "patch": patch,
        "test_patch": test_patch, "problem_statement": problem_statement, "hints_text": "",
        "created_at": created_at, "version": version, "FAIL_TO_PASS": [], "PASS_TO_PASS": [],
        "environment_setup_commit": base_commit,
    }
    return {key: record[key] for key in RECORD_FIELDS}
