"""Content hashes: canonical JSON → sha256. Every image name and cache key uses these."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(data: Any, length: int = 16) -> str:
    """First ``length`` hex digits of sha256 over the canonical JSON of ``data``."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:length]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
