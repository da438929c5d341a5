"""Reading saved JSON so that every failure names the file, the record and the field.

Everything under :mod:`harness.results` reads through these helpers: a run directory or a
vendor's file is input like any other, and bad input raises
:class:`harness.errors.InputError` (a :class:`ValueError`) naming where it is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import InputError


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file; ``what`` names it in errors ("run summary", "claims file")."""
    if not path.is_file():
        raise InputError(f"{what} not found", source=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", source=str(path)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON in {what} (line {exc.lineno}, column {exc.colno}): {exc.msg}",
                         source=str(path)) from exc


def expect_dict(value: Any, path: Path, field_name: str | None, what: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{what} must be a JSON object, got {type(value).__name__}",
                         source=str(path), field=field_name)
    return value


def id_list(data: dict, key: str, path: Path, *, required: bool) -> list[str]:
    """A list of distinct instance-id strings under ``key``; [] when optional and absent."""
    if key not in data:
        if required:
            raise InputError("required field is missing", source=str(path), field=key)
        return []
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError("must be a list of instance id strings", source=str(path), field=key)
    if len(set(value)) != len(value):
        seen: set[str] = set()
        duplicates = sorted({item for item in value if item in seen or seen.add(item)})  # type: ignore[func-returns-value]  # add(): None
        raise InputError(f"lists the same instance twice: {', '.join(duplicates)}", source=str(path), field=key)
    return value


def optional(report: dict, key: str, kinds: tuple[type, ...], path: Path, record: str) -> Any:
    """Optional field: absent or null gives None; a wrong type is an error."""
    value = report.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise InputError(f"expected {'/'.join(k.__name__ for k in kinds)}, got bool",
                         source=str(path), record=record, field=key)
    if not isinstance(value, kinds):
        raise InputError(f"expected {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__}",
                         source=str(path), record=record, field=key)
    return value


def str_list(value: Any, path: Path, record: str, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError("must be a list of strings", source=str(path), record=record, field=field_name)
    return tuple(value)


def tests_ran(report: Any) -> bool:
    """Whether the run a report.json describes reached its test command (a ``tests``
    command is recorded). One whose patch did not apply, whose environment did not build,
    never ran a test: its graded tests are *not run*, not failed and not regressions,
    though grading lists them under ``failure`` (an INVALID verdict counts nothing as
    passed)."""
    commands = report.get("commands") if isinstance(report, dict) else None
    return isinstance(commands, list) and any(isinstance(c, dict) and c.get("phase") == "tests" for c in commands)
