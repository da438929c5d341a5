"""When each harness image was last used, and by which instances (Docker keeps neither).

``<state>/engines/<engine id>/image-use.sqlite`` (SQLite: safe for concurrent processes,
each write one short transaction):

* ``image_use(tag, image_id, last_used)`` — the builder records every image it finds or
  builds (base, interpreter, compiler, environment, instance), at most once a minute per
  process and tag;
* ``instance_use(instance_id, tag, last_used)`` — the image an instance was prepared in,
  so a set's images are known without preparing the set again;
* ``layer_sizes(image_id, sizes)`` — bytes per layer, read once per image id from the
  engine's history (an id names fixed content, so the sizes never change).

:class:`ImageTracker` is what the builder holds: it binds to the engine lazily (its id
names the state directory) and keeps this process's :class:`~harness.bookkeeping.leases.Lease`.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

from harness.bookkeeping.leases import Lease
from harness.logs import get_logger
from harness.paths import state_root

INDEX_NAME = "image-use.sqlite"
#: a process records one tag's use at most this often (a run looks layers up per instance)
RECORD_EVERY = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS image_use (tag TEXT NOT NULL, image_id TEXT NOT NULL, last_used REAL NOT NULL,
                                      PRIMARY KEY (tag, image_id));
CREATE TABLE IF NOT EXISTS instance_use (instance_id TEXT NOT NULL, tag TEXT NOT NULL, last_used REAL NOT NULL,
                                         PRIMARY KEY (instance_id, tag));
CREATE TABLE IF NOT EXISTS layer_sizes (image_id TEXT PRIMARY KEY, sizes TEXT NOT NULL);
"""


def engine_state_dir(engine_id: str, root: Path | None = None) -> Path:
    """The state directory of the engine whose ``docker info`` ID is ``engine_id``."""
    return (root or state_root()) / "engines" / re.sub(r"[^A-Za-z0-9_.-]", "-", engine_id)


def state_dir_for(client) -> Path:
    return engine_state_dir(str(client.info().get("ID") or "default"))


class UseIndex:
    """The last-use index of one engine (opened per call: usable from any thread)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / INDEX_NAME

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a power cut may lose a last use
            conn.executescript(_SCHEMA)
            with conn:
                yield conn
        finally:
            conn.close()

    def record_image(self, tag: str, image_id: str, at: float | None = None) -> None:
        with self._db() as db:
            db.execute("INSERT INTO image_use VALUES (?, ?, ?) ON CONFLICT(tag, image_id) DO UPDATE SET "
                       "last_used=max(last_used, excluded.last_used)",
                       (tag, image_id, time.time() if at is None else at))

    def record_instance(self, instance_id: str, tag: str, at: float | None = None) -> None:
        with self._db() as db:
            db.execute("INSERT INTO instance_use VALUES (?, ?, ?) ON CONFLICT(instance_id, tag) DO UPDATE SET "
                       "last_used=max(last_used, excluded.last_used)",
                       (instance_id, tag, time.time() if at is None else at))

    def last_uses(self) -> dict[tuple[str, str], float]:
        """(tag, image id) -> last use. A tag re-pointed at another image (rebuilt) is a
        different key, so an old use never dates a new image."""
        if not self.path.exists():
            return {}
        with self._db() as db:
            return {(tag, image_id): at for tag, image_id, at in db.execute("SELECT * FROM image_use")}

    def instances_by_tag(self) -> dict[str, frozenset[str]]:
        if not self.path.exists():
            return {}
        out: dict[str, set[str]] = {}
        with self._db() as db:
            for instance_id, tag, _ in db.execute("SELECT * FROM instance_use"):
                out.setdefault(tag, set()).add(instance_id)
        return {tag: frozenset(ids) for tag, ids in out.items()}

    def layer_sizes(self, image_ids: Iterable[str]) -> dict[str, list[int]]:
        wanted = set(image_ids)
        if not self.path.exists() or not wanted:
            return {}
        with self._db() as db:
            return {image_id: json.loads(sizes) for image_id, sizes in db.execute("SELECT * FROM layer_sizes")
                    if image_id in wanted}

    def save_layer_sizes(self, sizes: dict[str, list[int]]) -> None:
        if not sizes:
            return
        with self._db() as db:
            db.executemany("INSERT OR REPLACE INTO layer_sizes VALUES (?, ?)",
                           [(image_id, json.dumps(s)) for image_id, s in sizes.items()])


class ImageTracker:
    """Leases and records the images one builder uses. The lease protects them from
    ``harness images prune`` (and other runs' ``--cache-level``) until the process ends
    or calls :meth:`release`; the index dates them for pruning by age and budget."""

    def __init__(self, client, state_dir: Path | None = None) -> None:
        self._client = client
        self._state_dir = state_dir
        self._lease: Lease | None = None
        self._index: UseIndex | None = None
        self._recorded: dict[str, float] = {}
        self._lock = threading.Lock()

    def _bind(self) -> tuple[Lease, UseIndex]:
        with self._lock:
            if self._lease is None:
                state = self._state_dir or state_dir_for(self._client)
                self._lease, self._index = Lease(state / "leases"), UseIndex(state)
            return self._lease, self._index

    def lease(self, tag: str) -> None:
        self._bind()[0].hold(tag)

    def used(self, tag: str, image_id: str) -> None:
        now = time.time()
        with self._lock:
            if now - self._recorded.get(tag, 0.0) < RECORD_EVERY:
                return
            self._recorded[tag] = now
        try:
            self._bind()[1].record_image(tag, image_id, now)
        except sqlite3.Error as exc:  # the record only dates the image for pruning: say so, go on
            get_logger().warning("image_use.not_recorded", tag=tag, error=str(exc))

    def used_by(self, instance_id: str, tag: str) -> None:
        try:
            self._bind()[1].record_instance(instance_id, tag)
        except sqlite3.Error as exc:
            get_logger().warning("image_use.not_recorded", tag=tag, instance_id=instance_id, error=str(exc))

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()
