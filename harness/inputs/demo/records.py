"""The demo set's instance records (``instances.jsonl``), derived from the histories and
``instances.src.yaml``: :func:`make_instance_records`, :func:`regenerate`. See :mod:`harness.inputs.demo`."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.inputs.demo.build import build_demo_repos, git, git_out, rev_list
from harness.inputs.demo.history import (DEMO_DIR, INSTANCES_FILE, INSTANCES_SRC_FILE, TEST_DIR_NAMES, DemoSetError,
                                         commit_datetime, history_shas, iter_source_repos)

# ------------------------------------------------------------------------ instances


INSTANCE_FIELDS = (
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
)
SRC_FIELDS = frozenset(
    {"instance_id", "repo", "base", "fix", "version", "fix_marker", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS"}
)


def is_test_path(path: str) -> bool:
    """True for files that belong in ``test_patch`` rather than ``patch``."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p in TEST_DIR_NAMES for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def load_instance_specs(source_dir: Path = DEMO_DIR) -> list[dict[str, Any]]:
    """Parse and validate ``instances.src.yaml``."""
    path = Path(source_dir) / INSTANCES_SRC_FILE
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not raw:
        raise DemoSetError(f"{path}: expected a non-empty list")
    ids: set[str] = set()
    for spec in raw:
        if not isinstance(spec, dict) or set(spec) != SRC_FIELDS:
            raise DemoSetError(f"{path}: each entry needs exactly the keys {sorted(SRC_FIELDS)}, got {spec!r}")
        if spec["instance_id"] in ids:
            raise DemoSetError(f"{path}: duplicate instance_id {spec['instance_id']!r}")
        ids.add(spec["instance_id"])
    return raw


def _diff(repo: Path, base: str, fix: str, paths: Sequence[str]) -> str:
    if not paths:
        return ""
    out = git(["diff", "--no-color", "--no-ext-diff", base, fix, "--", *paths], repo).stdout
    return out.decode("utf-8")


def make_instance_records(source_dir: Path, repo_paths: Mapping[str, Path]) -> list[dict[str, Any]]:
    """SWE-bench instance records for every entry of ``instances.src.yaml``.

    *repo_paths* maps ``owner/name`` to a repository built by :func:`build_demo_repos`.
    """
    source_dir = Path(source_dir)
    repo_srcs = {r.full_name: r for r in iter_source_repos(source_dir)}
    records = []
    for spec in load_instance_specs(source_dir):
        repo_name = spec["repo"]
        if repo_name not in repo_srcs:
            raise DemoSetError(f"{spec['instance_id']}: unknown repo {repo_name!r}")
        shas = history_shas(repo_srcs[repo_name].path)
        order = list(shas)
        base_dir, fix_dir = spec["base"], spec["fix"]
        if base_dir not in shas or fix_dir not in shas or order.index(base_dir) >= order.index(fix_dir):
            raise DemoSetError(f"{spec['instance_id']}: base {base_dir!r} must precede fix {fix_dir!r}")
        repo = Path(repo_paths[repo_name])
        base, fix = shas[base_dir], shas[fix_dir]
        if base not in rev_list(repo, fix):
            raise DemoSetError(f"{spec['instance_id']}: {repo} does not contain the expected history")
        changed = git_out(["diff", "--name-only", "--no-renames", base, fix], repo).splitlines()
        src_paths = [p for p in changed if not is_test_path(p)]
        test_paths = [p for p in changed if is_test_path(p)]
        if not src_paths or not test_paths:
            raise DemoSetError(f"{spec['instance_id']}: the fix must change both source and test files")
        created = commit_datetime(order.index(fix_dir)).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = {
            "repo": repo_name,
            "instance_id": spec["instance_id"],
            "base_commit": base,
            "patch": _diff(repo, base, fix, src_paths),
            "test_patch": _diff(repo, base, fix, test_paths),
            "problem_statement": spec["problem_statement"],
            "hints_text": "",
            "created_at": created,
            "version": str(spec["version"]),
            "FAIL_TO_PASS": list(spec["FAIL_TO_PASS"]),
            "PASS_TO_PASS": list(spec["PASS_TO_PASS"]),
            "environment_setup_commit": base,
        }
        records.append({k: record[k] for k in INSTANCE_FIELDS})
    return records


def dump_jsonl(records: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def render_instances(source_dir: Path = DEMO_DIR) -> str:
    """The text ``instances.jsonl`` should have, from a fresh build in a temp dir."""
    with tempfile.TemporaryDirectory(prefix="harness-demo-") as tmp:
        repos = build_demo_repos(source_dir, Path(tmp))
        return dump_jsonl(make_instance_records(source_dir, repos))


def regenerate(source_dir: Path = DEMO_DIR) -> bool:
    """Rewrite ``instances.jsonl``; returns True when its content changed."""
    target = Path(source_dir) / INSTANCES_FILE
    text = render_instances(source_dir)
    old = target.read_text(encoding="utf-8") if target.exists() else None
    if old == text:
        return False
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return True
