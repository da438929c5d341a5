"""The JSON view: any result dataclass of :mod:`harness.results` as plain JSON data."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


def to_dict(result: Any) -> dict[str, Any]:
    """JSON-ready dict of a result (tuples become lists, nested dataclasses objects)."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"to_dict: expected a result dataclass, got {type(result).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(result)))


def render_json(result: Any) -> str:
    """The JSON file's text: sorted keys, indented, newline-terminated."""
    return json.dumps(to_dict(result), indent=2, sort_keys=True) + "\n"
