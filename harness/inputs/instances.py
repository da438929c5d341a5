"""Instance records: loading and validation.

Field names follow SWE-bench: ``instance_id, repo, base_commit, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS, version, environment_setup_commit`` (others are kept in
``extra``). Files may be JSON (a list or one object), JSONL or YAML. FAIL_TO_PASS and
PASS_TO_PASS may be lists or JSON-encoded strings: decoded with :func:`json.loads`,
never evaluated.

A malformed record never stops the set: :func:`load_instances` returns the good
instances and one :class:`~harness.errors.InputError` per bad record, each naming the
record and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import yaml

from harness.errors import InputError
from harness.grading.grade import TestLists
from harness.paths import instance_dir_problem

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
#: a parsed record of any kind (an Instance, a Prediction)
R = TypeVar("R")
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")


@dataclass(frozen=True)
class Instance:
    """One SWE-style task. Immutable; ``extra`` keeps unrecognised fields verbatim."""

    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    version: str = ""
    environment_setup_commit: str = ""
    problem_statement: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def tests(self) -> TestLists:
        return TestLists(self.fail_to_pass, self.pass_to_pass)

    @property
    def repo_dirname(self) -> str:
        """``owner__name``: the directory name used under ``--repos-dir``."""
        return self.repo.replace("/", "__")

    def to_record(self) -> dict[str, Any]:
        """The SWE-bench-shaped record (lists kept as lists)."""
        record = dict(self.extra)
        record.update(
            instance_id=self.instance_id, repo=self.repo, base_commit=self.base_commit,
            patch=self.patch, test_patch=self.test_patch, FAIL_TO_PASS=list(self.fail_to_pass),
            PASS_TO_PASS=list(self.pass_to_pass), version=self.version,
            environment_setup_commit=self.environment_setup_commit,
            problem_statement=self.problem_statement)
        return record

    def checksum(self) -> str:
        """sha256 of the canonical JSON of the record: part of every cache key."""
        canonical = json.dumps(self.to_record(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def read_records(path: Path) -> list[Any]:
    """Read raw records from JSON, JSONL or YAML (by suffix; JSONL for .jsonl).

    Raises InputError naming the file (and the line for JSONL) when it cannot be parsed.
    """
    return [record for _, record in read_located_records(path)]


def read_located_records(path: Path) -> list[tuple[str, Any]]:
    """:func:`read_records`, each record with where it is in the file (``line N`` for
    JSONL, ``record #N`` for a list, ``key K`` for an object keyed by id), so that a
    message can point at it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} (line {line})",
                         source=str(path)) from None
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append((f"line {lineno}", json.loads(line)))
            except (ValueError, RecursionError) as exc:
                raise InputError(f"line {lineno}: invalid JSON ({unparsable(exc)})", source=str(path)) from None
        return records
    try:
        data = yaml.safe_load(text) if suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise InputError(f"cannot parse: {unparsable(exc)}", source=str(path)) from None
    if isinstance(data, dict) and "instance_id" in data:
        return [("record #1", data)]
    if isinstance(data, dict):  # keyed by id
        return [(f"key {str(k)[:80]!r}", dict(v, instance_id=v.get("instance_id", k)) if isinstance(v, dict) else v)
                for k, v in data.items()]
    if isinstance(data, list):
        return [(f"record #{n}", record) for n, record in enumerate(data, 1)]
    raise InputError("expected a list of records, one record, or an object keyed by id",
                     source=str(path))


def unparsable(exc: BaseException) -> str:
    """Why a text could not be read, in one short line (a parser's own message can quote the
    input: a nesting too deep to read, an integer too long to convert)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "integer string conversion" in message or "digits" in message:
        return "an integer too long to convert"
    return message[:200]


#: the most test ids one list may hold, and the longest id (the results parsers' caps)
MAX_TEST_IDS = 200_000
MAX_TEST_ID = 8192


def record_key(raw: Any) -> str | None:
    """The instance id a record names, when it names one as a string (a malformed record
    still shares its id with the others: see :func:`refuse_shared_keys`)."""
    if isinstance(raw, dict) and isinstance(raw.get("instance_id"), str) and raw["instance_id"]:
        return raw["instance_id"]
    return None


def duplicate_error(key: str, where: list[str], source: str, what: str = "instance_id") -> InputError:
    """The error for records that share one id: every copy is refused (which one was meant
    cannot be known), and the message names each of them."""
    return InputError(f"duplicate {what}: {', '.join(where)} of {source} all name it; none of them is graded",
                      record=key, field="instance_id", source=source)


def refuse_shared_keys(parsed: list[tuple[str, R]], key: Callable[[R], str], source: str,
                       what: str = "instance_id", malformed: list[tuple[str, str]] = (),
                       group: Callable[[str], str] = lambda k: k) -> tuple[list[R], list[InputError], set[str]]:
    """``parsed`` ((file position, record) pairs) without every record whose key another
    record shares: (the records kept, one :func:`duplicate_error` per shared key, every key
    seen). ``malformed``: (file position, id) of the records refused as malformed that
    still name an id: one of them beside a good record of that id (``group`` of its key)
    makes every record of the id refused, so that a bad copy can never leave the other one
    graded while it is counted as an error."""
    places: dict[str, list[str]] = {}
    for where, record in parsed:
        places.setdefault(key(record), []).append(where)
    bad: dict[str, list[str]] = {}
    for where, rid in malformed:
        bad.setdefault(rid, []).append(where)
    good_groups: dict[str, list[str]] = {}
    for k, where in places.items():
        good_groups.setdefault(group(k), []).extend(where)
    duplicated = {k for k, where in places.items() if len(where) > 1 or group(k) in bad}
    shared_bad = {rid for rid, where in bad.items() if len(where) > 1 or rid in good_groups}
    errors = [duplicate_error(k, places[k], source, what) for k in sorted(duplicated) if group(k) not in shared_bad]
    errors += [duplicate_error(rid, sorted(good_groups.get(rid, []) + bad[rid], key=_position), source, what)
               for rid in sorted(shared_bad)]
    return [record for _, record in parsed if key(record) not in duplicated], errors, set(places)


def _position(where: str) -> tuple[str, int]:
    kind, _, number = where.rpartition(" ")
    return (kind, int(number)) if number.isdigit() else (where, 0)


def parse_instance(raw: Any, source: str = "", position: int | None = None, *,
                   lists_required: bool = True) -> Instance:
    """Validate one raw record. Raises InputError naming the record and the field.

    ``position`` (0-based index in the file) names records that have no usable id.
    ``lists_required=False`` accepts a record whose FAIL_TO_PASS and PASS_TO_PASS are
    absent or empty (both): the runs that derive them (harness/run/derive.py) grade
    nothing and read every test's outcome back from the run directory.
    """
    fallback = f"#{position}" if position is not None else "<no instance_id>"
    if not isinstance(raw, dict):
        raise InputError(f"record is a {type(raw).__name__}, not an object", record=fallback,
                         source=source)
    rid = raw.get("instance_id")
    name = str(rid)[:80] if isinstance(rid, str) and rid else fallback

    def fail(fieldname: str, message: str) -> InputError:
        return InputError(message, record=name, field=fieldname, source=source)

    if not lists_required and not has_test_lists(raw):
        raw = {**raw, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    for key in REQUIRED:
        if key not in raw or raw[key] is None:
            raise fail(key, "missing")
    for key in ("instance_id", "repo", "base_commit", "patch", "test_patch"):
        if not isinstance(raw[key], str):
            raise fail(key, f"must be a string, got {type(raw[key]).__name__}")
    problem = instance_dir_problem(rid)
    if problem:
        raise fail("instance_id", problem)
    if not _REPO_RE.fullmatch(raw["repo"]):
        raise fail("repo", f"must look like OWNER/NAME, got {raw['repo']!r}")
    if not _SHA_RE.fullmatch(raw["base_commit"]):
        raise fail("base_commit", f"must be a hex commit id, got {raw['base_commit']!r}")
    if not raw["test_patch"].strip():
        raise fail("test_patch", "is empty")
    f2p = _test_list(raw["FAIL_TO_PASS"], fail, "FAIL_TO_PASS")
    p2p = _test_list(raw["PASS_TO_PASS"], fail, "PASS_TO_PASS")
    if not f2p and (lists_required or p2p):
        raise fail("FAIL_TO_PASS", "is empty: an instance must have at least one test to fix")
    overlap = sorted(set(f2p) & set(p2p))
    if overlap:
        raise fail("PASS_TO_PASS", f"shares ids with FAIL_TO_PASS: {overlap[:3]}")
    known = {"instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS",
             "PASS_TO_PASS", "version", "environment_setup_commit", "problem_statement"}
    version = raw.get("version", "")
    if version is not None and (isinstance(version, bool) or not isinstance(version, (str, int, float))
                                or len(str(version)) > 64):
        raise fail("version", "must be a version string (or number) of at most 64 characters")
    for key in ("environment_setup_commit", "problem_statement"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise fail(key, f"must be a string, got {type(raw[key]).__name__}")
    return Instance(
        instance_id=rid, repo=raw["repo"], base_commit=raw["base_commit"], patch=raw["patch"],
        test_patch=raw["test_patch"], fail_to_pass=f2p, pass_to_pass=p2p,
        version="" if version is None else str(version),
        environment_setup_commit=str(raw.get("environment_setup_commit") or ""),
        problem_statement=str(raw.get("problem_statement") or ""),
        extra={k: v for k, v in raw.items() if k not in known},
    )


def has_test_lists(raw: Any) -> bool:
    """Whether a raw record gives FAIL_TO_PASS or PASS_TO_PASS (present, not null, not an
    empty list or the JSON text of one): a record giving neither is one to derive them for."""
    def given(value: Any) -> bool:
        if isinstance(value, str):
            return value.strip() not in ("", "[]")
        return value not in (None, [], ())
    return isinstance(raw, dict) and (given(raw.get("FAIL_TO_PASS")) or given(raw.get("PASS_TO_PASS")))


def _test_list(value: Any, fail, fieldname: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise fail(fieldname, f"is a string but not a JSON list ({unparsable(exc)})") from None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise fail(fieldname, "must be a list of non-empty test id strings")
    if len(value) > MAX_TEST_IDS or any(len(t) > MAX_TEST_ID for t in value):
        raise fail(fieldname, f"holds more than {MAX_TEST_IDS} ids or an id over {MAX_TEST_ID} characters")
    if len(set(value)) != len(value):
        dupes = sorted({t for t in value if value.count(t) > 1})
        raise fail(fieldname, f"has duplicate ids: {dupes[:3]}")
    return tuple(value)


@dataclass
class LoadedInstances:
    """The good instances of a file, in file order, and one error per bad record."""

    instances: list[Instance]
    errors: list[InputError]


def load_instances(path: Path, instance_ids: Iterable[str] | None = None,
                   source: str | None = None, *, lists_required: bool = True) -> LoadedInstances:
    """Load and validate every record; filter to ``instance_ids`` when given. ``source``
    names the input in errors when ``path`` is a copy of it (a dataset read into JSONL).
    ``lists_required``: see :func:`parse_instance`.

    Raises InputError only when the file as a whole is unreadable, or an id asked for
    is absent. Records that share an instance id are all refused, with one error that
    names each of them (file and line).
    """
    source = source or str(path)
    parsed: list[tuple[str, Instance]] = []
    errors: list[InputError] = []
    malformed: list[tuple[str, str]] = []
    for index, (where, raw) in enumerate(read_located_records(Path(path))):
        try:
            parsed.append((where, parse_instance(raw, source=f"{source} {where}", position=index,
                                                 lists_required=lists_required)))
        except InputError as exc:
            errors.append(exc)
            if record_key(raw) is not None:
                malformed.append((where, str(record_key(raw))))
    good, refused, seen = refuse_shared_keys(parsed, lambda inst: inst.instance_id, source, malformed=malformed)
    shared = {e.record for e in refused}
    errors = [e for e in errors if e.record not in shared] + refused
    if instance_ids:
        wanted = list(dict.fromkeys(instance_ids))
        bad_ids = {e.record for e in errors}
        unknown = [i for i in wanted if i not in seen and i not in bad_ids]
        if unknown:
            raise InputError(f"instance ids not in the set: {', '.join(unknown)}", source=source,
                             field="--instance-ids")
        good = [i for i in good if i.instance_id in wanted]
        errors = [e for e in errors if e.record in wanted]
    return LoadedInstances(good, errors)
