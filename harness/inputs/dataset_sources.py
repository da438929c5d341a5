"""Instance sets in the forms benchmark sets are published in: ``--dataset``.

SWE-bench, SWE-bench Verified, SWE-Gym, SWE-bench-Live and the like are published on the
Hugging Face Hub as parquet shards, and handed around as a parquet file or a directory
written by ``datasets``' ``save_to_disk``. :func:`read_dataset` reads, by what the source
is (never by guessing from its name):

* a file: ``.json``, ``.jsonl``, ``.yaml`` (as ``--instances``) or ``.parquet`` (every row:
  a single file is a single split);
* a directory, for ``--split S`` (SWE-bench's loader looks in the first two places too):
  ``S.parquet``; ``S/`` saved by ``save_to_disk`` (``dataset_info.json`` beside Arrow files)
  or holding parquet shards; the hub's layout ``data/S-00000-of-0000N.parquet`` (or the
  shards at the top); a ``save_to_disk`` directory of one split (``state.json`` at the top);
* anything else: a dataset name on the Hub (``SWE-bench/SWE-bench_Lite``; SWE-bench's short
  names ``lite``, ``swe-bench``, ``verified`` too), loaded with the ``datasets`` library
  (the optional extra ``harness[hub]``, imported only then), which downloads once into its
  cache and reads the cache offline (``HF_DATASETS_OFFLINE=1``) afterwards.

Parquet and Arrow are read with pyarrow (the extra ``harness[parquet]``; imported only then). Values become JSON data: lists and strings as
they are (``FAIL_TO_PASS`` as a JSON-encoded string is decoded later, by
:func:`harness.inputs.instances.parse_instance`, with ``json.loads``, never evaluated), timestamps
as ISO 8601 text. A file that cannot be read, or a column of a type that has no JSON
form, is refused naming the file and the field.

:func:`materialise` writes the records as a JSONL file in the cache, named by its content,
so that everything downstream (validation, the manifest's input hash, ``harness validate``)
reads one instance file whatever the source was.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError

#: SWE-bench's own short names for its sets (its loader accepts them as dataset names).
SHORT_NAMES = {
    "swe-bench": "SWE-bench/SWE-bench", "swebench": "SWE-bench/SWE-bench", "swe_bench": "SWE-bench/SWE-bench",
    "swe-bench-lite": "SWE-bench/SWE-bench_Lite", "swebench-lite": "SWE-bench/SWE-bench_Lite",
    "swe_bench_lite": "SWE-bench/SWE-bench_Lite", "swe-bench_lite": "SWE-bench/SWE-bench_Lite",
    "lite": "SWE-bench/SWE-bench_Lite", "verified": "SWE-bench/SWE-bench_Verified",
}
TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class DatasetRecords:
    """What a source held: its rows as JSON data, and where they came from."""

    records: list[dict[str, Any]]
    source: str
    split: str | None
    #: the files read (for a hub name: the files in its cache)
    files: tuple[str, ...]
    form: str


@dataclass(frozen=True)
class MaterialisedDataset:
    """A dataset written as one JSONL instance file (``path``), with its provenance."""

    path: Path
    source: str
    split: str | None
    files: tuple[str, ...]
    form: str
    count: int

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "split": self.split, "form": self.form, "files": list(self.files),
                "records": self.count, "instances_file": str(self.path)}


def read_dataset(source: str, split: str = "test") -> DatasetRecords:
    """The records of ``source`` (a file, a directory or a hub name; see the module doc)."""
    path = Path(source).expanduser()
    if path.is_file():
        return _read_file(path.resolve(), split)
    if path.is_dir():
        return _read_directory(path.resolve(), split)
    if path.suffix.lower() in (*TEXT_SUFFIXES, ".parquet", ".arrow") or source.startswith((".", "/", "~")):
        raise InputError("no such file or directory", source=source, field="--dataset")
    return _read_hub(source, split)


def materialise(source: str, split: str, cache_dir: Path) -> MaterialisedDataset:
    """Read ``source`` and write its records to ``<cache>/datasets/<name>-<hash>.jsonl``
    (atomically; the same content gives the same file)."""
    from harness.atomic import write_text_atomic
    read = read_dataset(source, split)
    lines = [json.dumps(record, sort_keys=True, ensure_ascii=False) for record in read.records]
    text = "".join(line + "\n" for line in lines)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{Path(read.source).name or read.source}-{read.split or 'all'}")[:80]
    target = Path(cache_dir) / "datasets" / f"{stem}-{digest}.jsonl"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, text)
    return MaterialisedDataset(target, read.source, read.split, read.files, read.form, len(read.records))


# ---------------------------------------------------------------------------- files and directories

def _read_file(path: Path, split: str) -> DatasetRecords:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        from harness.inputs.instances import read_records
        records = read_records(path)
        return DatasetRecords([_json_record(r, str(path), i) for i, r in enumerate(records)], str(path), None,
                              (str(path),), suffix.lstrip("."))
    if suffix == ".parquet":
        return DatasetRecords(_parquet_records([path]), str(path), None, (str(path),), "parquet")
    if suffix == ".arrow":
        return DatasetRecords(_arrow_records([path]), str(path), None, (str(path),), "arrow")
    raise InputError(f"unknown file type {suffix or '(none)'}: expected .json, .jsonl, .yaml, .parquet or .arrow",
                     source=str(path), field="--dataset")


def _read_directory(root: Path, split: str) -> DatasetRecords:
    """The first layout that holds ``split`` (see the module doc); a directory with none
    of them is refused, naming what was looked for."""
    name = str(root)
    single = root / f"{split}.parquet"
    if single.is_file():
        return DatasetRecords(_parquet_records([single]), name, split, (str(single),), "parquet")
    if (root / split / "state.json").is_file():  # save_to_disk of a DatasetDict: one directory per split
        files = _saved_arrow_files(root / split)
        return DatasetRecords(_arrow_records(files), name, split, tuple(map(str, files)), "save_to_disk")
    if (root / "state.json").is_file():  # save_to_disk of one split
        saved_split = _saved_split(root)
        if saved_split not in (None, split):
            raise InputError(f"the saved dataset holds split {saved_split!r}, not {split!r}: pass --split "
                             f"{saved_split}", source=name, field="--split")
        files = _saved_arrow_files(root)
        return DatasetRecords(_arrow_records(files), name, saved_split or split, tuple(map(str, files)),
                              "save_to_disk")
    if (root / "dataset_dict.json").is_file():  # save_to_disk of a DatasetDict without this split
        splits = _dict_splits(root)
        raise InputError(f"the saved dataset has no split {split!r} (it has: {', '.join(splits) or 'none'})",
                         source=name, field="--split")
    shard_sets = [sorted((root / split).glob("*.parquet")) if (root / split).is_dir() else [],
                  sorted((root / "data").glob(f"{split}-*.parquet")) + sorted((root / "data").glob(f"{split}.parquet")),
                  sorted(root.glob(f"{split}-*.parquet"))]
    for shards in shard_sets:
        if shards:
            return DatasetRecords(_parquet_records(shards), name, split, tuple(map(str, shards)), "parquet shards")
    raise InputError(f"no split {split!r} here: looked for {split}.parquet, {split}/ (saved with save_to_disk or "
                     f"parquet shards), data/{split}-*.parquet and {split}-*.parquet", source=name, field="--split")


def _saved_arrow_files(directory: Path) -> list[Path]:
    try:
        state = json.loads((directory / "state.json").read_text())
        names = [entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"state.json of a saved dataset is unreadable ({type(exc).__name__}: {exc})",
                         source=str(directory / "state.json"), field="_data_files") from None
    files = [directory / n for n in names]
    for f in files:
        if not f.is_file() or f.parent != directory:
            raise InputError(f"state.json names {f.name}, which is not a file of this directory",
                             source=str(directory / "state.json"), field="_data_files")
    return files


def _saved_split(directory: Path) -> str | None:
    try:
        value = json.loads((directory / "state.json").read_text()).get("_split")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None


def _dict_splits(root: Path) -> list[str]:
    try:
        return [str(s) for s in json.loads((root / "dataset_dict.json").read_text()).get("splits", [])]
    except (OSError, ValueError, AttributeError):
        return []


def _pyarrow(path: Path):
    """pyarrow (the extra ``harness[parquet]``), or InputError saying how to get it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 (the submodule, for .parquet below)
    except ImportError:
        raise InputError("reading parquet and Arrow files needs pyarrow: pip install 'harness[parquet]' (or give "
                         "JSON, JSONL or YAML)", source=str(path), field="--dataset") from None
    return pyarrow


def _parquet_records(paths: list[Path]) -> list[dict[str, Any]]:
    pq = _pyarrow(paths[0]).parquet
    records: list[dict[str, Any]] = []
    for path in paths:
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError, ...
            raise InputError(f"cannot read as parquet: {exc}", source=str(path)) from None
        records += _table_records(table, str(path), len(records))
    return records


def _arrow_records(paths: list[Path]) -> list[dict[str, Any]]:
    """Arrow IPC files as ``save_to_disk`` writes them (the stream format; the file format too)."""
    pa = _pyarrow(paths[0])
    records: list[dict[str, Any]] = []
    for path in paths:
        try:
            with pa.memory_map(str(path)) as source:
                try:
                    table = pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    source.seek(0)
                    table = pa.ipc.open_file(source).read_all()
        except Exception as exc:
            raise InputError(f"cannot read as Arrow: {exc}", source=str(path)) from None
        records += _table_records(table, str(path), len(records))
    return records


def _table_records(table, source: str, offset: int) -> list[dict[str, Any]]:
    for column in table.schema:
        problem = _unsupported_type(column.type)
        if problem:
            raise InputError(f"column of type {column.type} ({problem}) has no JSON form", source=source,
                             field=column.name)
    try:
        rows = table.to_pylist()
    except Exception as exc:
        raise InputError(f"cannot convert its rows: {exc}", source=source) from None
    return [_json_record(row, source, offset + i) for i, row in enumerate(rows)]


def _unsupported_type(arrow_type) -> str | None:
    import pyarrow as pa
    if pa.types.is_dictionary(arrow_type):
        return _unsupported_type(arrow_type.value_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _unsupported_type(arrow_type.value_type)
    if pa.types.is_struct(arrow_type):
        return next((p for p in (_unsupported_type(f.type) for f in arrow_type) if p), None)
    if pa.types.is_map(arrow_type):
        return "a map"
    return None


def _json_record(row: Any, source: str, index: int) -> Any:
    """``row`` as JSON data; a value that has none is refused naming the record and field."""
    if not isinstance(row, dict):
        return row  # parse_instance names the record and says what it is
    record = str(row.get("instance_id") or f"#{index}")[:80]
    return {str(key): _json_value(value, source, record, str(key)) for key, value in row.items()}


def _json_value(value: Any, source: str, record: str, field: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"is {value}, which JSON cannot hold", source=source, record=record, field=field)
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, source, record, field) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, source, record, f"{field}.{k}") for k, v in value.items()}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    raise InputError(f"holds a {type(value).__name__}, which has no JSON form", source=source, record=record,
                     field=field)


# ---------------------------------------------------------------------------- the hub

def _read_hub(name: str, split: str) -> DatasetRecords:
    resolved = SHORT_NAMES.get(name.lower(), name)
    if not _HUB_NAME.fullmatch(resolved):
        raise InputError("neither a file, a directory, nor a dataset name on the Hub (OWNER/NAME)", source=name,
                         field="--dataset")
    try:
        import datasets
    except ImportError:
        raise InputError(f"{resolved} names a dataset on the Hugging Face Hub, which needs the `datasets` library: "
                         "pip install 'harness[hub]' (or give a parquet file or a saved dataset directory)",
                         source=name, field="--dataset") from None
    try:
        loaded = datasets.load_dataset(resolved, split=split)
    except Exception as exc:  # network, authentication, no such split: the library's own words
        raise InputError(f"loading {resolved} (split {split}) from the Hub failed: {type(exc).__name__}: "
                         f"{str(exc)[:600]}", source=name, field="--dataset") from None
    table = loaded.data.table if hasattr(loaded.data, "table") else loaded.data
    files = tuple(f.get("filename", "") for f in getattr(loaded, "cache_files", []) or [])
    return DatasetRecords(_table_records(table, resolved, 0), resolved, split, files, "hub")
