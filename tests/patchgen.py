"""Writing unified diffs against the demo repositories' base commits (for tests)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from harness.inputs.demo import DEMO_DIR

COMMITS = DEMO_DIR / "repos"


def demo_instance(instance_id: str) -> dict:
    for line in (DEMO_DIR / "instances.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["instance_id"] == instance_id:
            return record
    raise KeyError(instance_id)


def base_file(instance_id: str, path: str) -> str | None:
    """A file's text at the instance's base commit, from the demo snapshots."""
    import yaml
    src = yaml.safe_load((DEMO_DIR / "instances.src.yaml").read_text())
    entry = next(e for e in src if e["instance_id"] == instance_id)
    repo_dir = COMMITS / entry["repo"].replace("/", "__")
    target = repo_dir / "commits" / entry["base"] / path
    return target.read_text() if target.exists() else None


def demo_paths(instance_id: str) -> list[str]:
    """Every file of the instance's base commit, from the demo snapshots."""
    import yaml
    entry = next(e for e in yaml.safe_load((DEMO_DIR / "instances.src.yaml").read_text())
                 if e["instance_id"] == instance_id)
    root = COMMITS / entry["repo"].replace("/", "__") / "commits" / entry["base"]
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def corpus_patch(slug: str, instance_id: str) -> str:
    """The adversarial corpus's attack ``slug`` (harness.integrity.corpus), generated for
    a demo instance as ``harness audit`` generates it."""
    from harness.integrity.corpus import build_corpus
    from harness.integrity.corpus.target import make_target
    target = make_target(demo_instance(instance_id), lambda p: base_file(instance_id, p), demo_paths(instance_id))
    return next(a.patch for a in build_corpus(target) if a.slug == slug)


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style diff turning ``old`` into ``new`` (None: the file is absent)."""
    a = old.splitlines(keepends=True) if old is not None else []
    b = new.splitlines(keepends=True) if new is not None else []
    header = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    if new is None:
        header.append("deleted file mode 100644\n")
    body = list(difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{path}",
                                     "/dev/null" if new is None else f"b/{path}"))
    for i, line in enumerate(body):
        if not line.endswith("\n"):
            body[i] = line + "\n\\ No newline at end of file\n"
    return "".join(header + body)


def edit(instance_id: str, edits: dict[str, str | None]) -> str:
    """A patch applying whole-file ``edits`` (path → new text, None deletes) to the base."""
    return "".join(file_diff(path, base_file(instance_id, path), new) for path, new in edits.items())


def write_predictions(path: Path, patches: dict[str, str], model: str = "test-model") -> Path:
    path.write_text("".join(json.dumps({"instance_id": iid, "model_name_or_path": model, "model_patch": p}) + "\n"
                            for iid, p in patches.items()))
    return path
