"""Instance records from a repository's fix commits (``harness instances from-commits``).

:func:`records_from_commits` reads each commit with GitPython and applies the rules of
:mod:`harness.inputs.commit_rules`: base = the commit's (first) parent, ``patch`` = the diff
of the non-test files, ``test_patch`` = that of the test files, ``problem_statement`` = the
commit message (or a file the user names), ``created_at`` = the commit's date, and the
version and ``environment_setup_commit`` rules. The test lists stay empty:
``harness instances derive`` runs the tests and fills them.

Which commits: each argument is a commit (any name git resolves: a sha, a tag, a branch)
or a range ``A..B`` (the commits reachable from B and not from A along first parents, oldest
first: a mainline's own commits and its pull requests' merge commits, each merge
standing for its whole pull request, diffed against its first parent). ``since`` drops
commits committed before a date (contamination: rebuild the set from fixes made after a
model's cutoff). A commit named on its own that is not there, has no parent, changes no
test file or no code file, or changes a binary file is refused, naming it (nothing is
written); a commit of a range that changes no test or no code is skipped and said.

Reading the repository keeps the guarantees of :mod:`harness.inputs.repos`: the directory
is located the way git locates it (:class:`~harness.inputs.repos.GitDir`: bare without a
``config``, a copy without ``refs/``); every git process GitPython starts gets
``GIT_DIR`` (no discovery from a working directory), no system or global configuration,
no prompt, no lazy fetch from a promisor, no replace objects, ``safe.directory=*`` and
``core.fsmonitor=false`` as command-line configuration; diffs run with ``--no-ext-diff --no-textconv`` (no command a
repository's configuration names is run); every revision a user typed is resolved to a
full commit id before it reaches a git command line.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from harness.errors import InputError
from harness.inputs.commit_rules import (RuleError, TestPathRule, VersionRule, environment_setup_commits,
                                         instance_id_for, make_record, problem_statement_of, version_of)
from harness.inputs.repos import READ_ENV, GitDir

#: repos.py's READ_CONFIG as command-line configuration in the environment (git honours
#: ``safe.directory`` only from there or from the system/global files, which are off): a
#: repository owned by another user opens, and its ``core.fsmonitor`` never runs (GitPython's
#: ``diff-tree`` would start it: GitPython runs git in the work tree)
_SAFE_DIRECTORY = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
                   "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false"}
DEFAULT_TEST_RULE = TestPathRule()
DEFAULT_VERSION_RULE = VersionRule()
_DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-renames")


class CommitRefused(InputError):
    """A fix commit the records cannot be made from (names the commit and why: ``reason``)."""

    def __init__(self, reason: str, **where: str | None) -> None:
        super().__init__(reason, **where)
        self.reason = reason


@dataclass(frozen=True)
class Skipped:
    """A commit of a range (or before ``since``) that made no record, and why."""

    commit: str
    reason: str


@dataclass
class FromCommits:
    """The records made, in commit order, and the commits skipped."""

    records: list[dict[str, object]]
    skipped: list[Skipped] = field(default_factory=list)


def open_repository(path: Path):
    """A GitPython ``Repo`` over the git directory git itself would open at ``path``,
    every git process it starts confined as the module docstring says."""
    import git  # GitPython
    located = GitDir(Path(path)).git_dir
    try:
        repo = git.Repo(str(located), search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise InputError(f"{path} is not a git repository ({type(exc).__name__})", field="--repo") from None
    repo.git.update_environment(GIT_DIR=str(located), **READ_ENV, **_SAFE_DIRECTORY)
    return repo


def records_from_commits(repo_name: str, path: Path, commits: Sequence[str], *,
                         since: dt.datetime | None = None, test_rule: TestPathRule = DEFAULT_TEST_RULE,
                         version_rule: VersionRule = DEFAULT_VERSION_RULE, env_setup: str = "base",
                         problem_statements: Mapping[str, str] | None = None,
                         instance_ids: Mapping[str, str] | None = None) -> FromCommits:
    """Records for ``commits`` of the repository at ``path`` (named ``repo_name``,
    OWNER/NAME). ``problem_statements`` and ``instance_ids`` are keyed by any name of a
    commit (resolved here). Raises :class:`CommitRefused` (nothing made) for a commit named
    on its own that cannot make a record; a range's such commits are skipped."""
    repo = open_repository(path)
    statements = {_resolve(repo, name, "--problem-statement"): text for name, text in (problem_statements or {}).items()}
    ids = {_resolve(repo, name, "--instance-id"): value for name, value in (instance_ids or {}).items()}
    out = FromCommits([])
    seen: set[str] = set()
    for sha, named in _expand(repo, commits):
        if sha in seen:
            continue
        seen.add(sha)
        commit = repo.commit(sha)
        if since is not None and commit.committed_datetime < since:
            out.skipped.append(Skipped(sha, f"committed {commit.committed_datetime.isoformat()}, before --since"))
            continue
        try:
            out.records.append(_record(repo, repo_name, commit, test_rule, version_rule, statements, ids))
        except CommitRefused as exc:
            if named:
                raise
            out.skipped.append(Skipped(sha, exc.reason))
    try:
        setups = environment_setup_commits(out.records, env_setup)  # type: ignore[arg-type]
    except RuleError as exc:
        raise InputError(str(exc), field="--environment-setup") from None
    for record, setup in zip(out.records, setups):
        record["environment_setup_commit"] = setup
    ids_made = [str(r["instance_id"]) for r in out.records]
    twice = sorted({i for i in ids_made if ids_made.count(i) > 1})
    if twice:
        raise InputError(f"two commits make the instance id(s) {', '.join(twice)}: name them apart with "
                         "--instance-id COMMIT=ID", field="--instance-id")
    return out


def _resolve(repo, name: str, what: str = "commit") -> str:
    """The full id of the commit ``name`` names; refused (naming it) when there is none."""
    import git
    try:  # git itself decides (GitPython takes any 40 hex digits for a commit without looking)
        return str(repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")).strip()
    except git.GitCommandError:
        raise CommitRefused(f"{name!r} names no commit in {repo.git_dir}", record=name, field=what) from None


def _expand(repo, commits: Sequence[str]) -> Iterable[tuple[str, bool]]:
    """(full commit id, named on its own) for each argument, ranges expanded."""
    for text in commits:
        if ".." in text and "..." not in text:
            start, _, end = text.partition("..")
            low, high = _resolve(repo, start or "HEAD"), _resolve(repo, end or "HEAD")
            for commit in repo.iter_commits(f"{low}..{high}", first_parent=True, reverse=True):
                yield str(commit.hexsha), False
        else:
            yield _resolve(repo, text), True


def _record(repo, repo_name: str, commit, test_rule: TestPathRule, version_rule: VersionRule,
            statements: Mapping[str, str], ids: Mapping[str, str]) -> dict[str, object]:
    sha = str(commit.hexsha)

    def refuse(why: str) -> CommitRefused:
        return CommitRefused(why, record=sha[:12], field="commit")

    if not commit.parents:
        raise refuse("has no parent (a root commit): there is no base to fix")
    base = commit.parents[0]
    changed = []
    for diff in base.diff(commit, create_patch=False):
        changed += [p for p in (diff.a_path, diff.b_path) if p]
    code, tests = test_rule.split(changed)
    if not tests:
        raise refuse(f"changes no test file (of {len(code)} changed: {', '.join(code[:5])}); the test-path rule "
                     f"is {', '.join(test_rule.patterns)} (--test-path replaces it)")
    if not code:
        raise refuse(f"changes only test files ({', '.join(tests[:5])}): there is no fix to grade")
    base_sha = str(base.hexsha)
    version = version_of(version_rule, _nearest_tag(repo, base_sha) if version_rule.needs_tag else None)
    if version is None:
        raise refuse(f"no tag is reachable from its base {base_sha[:12]} (git describe --tags), so the "
                     f"{version_rule.describe()} rule gives no version: give --version VERSION")
    message = str(commit.message)
    return make_record(
        repo=repo_name, instance_id=instance_id_for(repo_name, sha, message, ids), base_commit=base_sha,
        patch=_diff(repo, base_sha, sha, code, refuse), test_patch=_diff(repo, base_sha, sha, tests, refuse),
        problem_statement=statements.get(sha, problem_statement_of(message)),
        created_at=commit.committed_datetime.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        version=version)


def _nearest_tag(repo, base: str) -> str | None:
    import git
    try:
        return str(repo.git.describe("--tags", "--abbrev=0", base)).strip() or None
    except git.GitCommandError:
        return None


def _diff(repo, base: str, fix: str, paths: list[str], refuse) -> str:
    raw = repo.git.diff(*_DIFF_OPTIONS, base, fix, "--", *paths, stdout_as_string=False,
                        strip_newline_in_stdout=False)
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse(f"its diff of {', '.join(paths[:3])} is not UTF-8 text (byte {exc.start})") from None
    for line in text.splitlines():
        if line.startswith("Binary files ") and line.endswith(" differ"):
            raise refuse(f"changes a binary file ({line}): a text patch cannot carry it")
    return text


def version_at(path: Path, commit: str, rule: VersionRule = DEFAULT_VERSION_RULE) -> tuple[str, str]:
    """(full commit id, its version under ``rule``) for ``commit`` of the repository at
    ``path``: what a record based there gets (``harness specs init`` keys its spec so).
    Raises CommitRefused when the commit is not there or the rule gives no version."""
    repo = open_repository(path)
    sha = _resolve(repo, commit, "--commit")
    version = version_of(rule, _nearest_tag(repo, sha) if rule.needs_tag else None)
    if version is None:
        raise CommitRefused(f"no tag is reachable from {sha[:12]} (git describe --tags), so the {rule.describe()} "
                            "rule gives no version: give --version VERSION", record=sha[:12], field="--version")
    return sha, version


def parse_since(text: str) -> dt.datetime:
    """``--since``: an ISO date or date-time (UTC when it names no zone)."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"expected an ISO date (2024-06-01) or date-time, got {text!r}", field="--since") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)
