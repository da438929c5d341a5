"""Cold cost: build time and disk for N instances of one repository.

A synthetic repository (the calcly demo project plus a payload of generated modules,
``--tree-kb`` in all) is created under a temp dir with N commits; commit i changes one
payload module and ``calcly/_rev.py``. Every run salts the tree, so the N instance
images are built cold (no docker build cache hit), on the warm base and environment
images (which are shared and never removed here). One instance per commit, graded with
its gold patch in one ``harness run`` (``--repo bench/calcsyn=PATH --specs DIR``); the
spec is calcly's with an editable install (``--install``), as SWE-bench specs do.

Disk: the engine's own accounting (``client.df()``: ``Size``, ``SharedSize`` per image) and
image history (``client.api.history``) for the layers above the environment image. The
unique bytes of all N instance images (plus the shared env/base chain once) are set
against N times one full image.

    .venv/bin/python benchmarks/cold_cost.py [--n 10] [--tree-kb 2048] [--out FILE] [--keep-images]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

REPO = "bench/calcsyn"
PREFIX = "bench__calcsyn-"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "HOME": "/nonexistent"}
SPEC = """repo: bench/calcsyn
defaults:
  python: "3.11"
  requirements:
    - pytest==8.3.4
  install: {install}
  test_cmd: "python -m pytest -rA -p no:cacheprovider"
  parser: pytest
  env:
    PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1"
  timeout: 120
versions:
  "1.0": {{}}
"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10, help="instances (= distinct base commits)")
    p.add_argument("--tree-kb", type=int, default=2048, help="size of the generated payload in the tree")
    p.add_argument("--install", default="python -m pip install --no-build-isolation --no-deps -e .",
                   help="the spec's install command (default: an editable install, as SWE-bench specs do; "
                        "'' for none, as the demo specs)")
    p.add_argument("--max-workers", type=int, default=1)
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--keep-images", action="store_true", help="leave the N instance images in the engine")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/cold_cost.json)")
    return p.parse_args(argv)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout.strip()


def _payload(name: str, size: int, salt: str) -> str:
    """Deterministic, incompressible-ish Python source of about ``size`` bytes."""
    lines, h, n = [f'"""generated payload {name}"""\n'], hashlib.sha256(f"{salt}{name}".encode()).hexdigest(), 0
    total = len(lines[0])
    while total < size:
        h = hashlib.sha256(h.encode()).hexdigest()
        line = f"K{n} = '{h}{h[::-1]}'\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines)


def make_repo(root: Path, n: int, tree_kb: int, salt: str) -> tuple[Path, list[str]]:
    src = C.DEMO_DIR / "repos" / "harness-demo__calcly" / "commits" / "03-stats"
    repo = root / "bench__calcsyn"
    shutil.copytree(src, repo)
    files = 64
    per_file = max(1, tree_kb * 1024 // files)
    (repo / "calcly" / "payload").mkdir()
    (repo / "calcly" / "payload" / "__init__.py").write_text("")
    for k in range(files):
        (repo / "calcly" / "payload" / f"mod_{k:02d}.py").write_text(_payload(f"mod_{k:02d}", per_file, salt))
    _git(repo, "init", "-q", "-b", "main")
    commits = []
    for i in range(n):
        (repo / "calcly" / "_rev.py").write_text(f"REV = {i}\nSALT = {salt!r}\n")
        k = i % files
        (repo / "calcly" / "payload" / f"mod_{k:02d}.py").write_text(_payload(f"mod_{k:02d}-rev{i}", per_file, salt))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"revision {i}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    return repo, commits


def records(commits: list[str]) -> list[dict]:
    patch = C.new_file_diff("calcly/bench_fix.py", "VALUE = 1\n")
    test = C.new_file_diff("tests/test_bench.py",
                           "def test_value():\n    from calcly.bench_fix import VALUE\n    assert VALUE == 1\n\n\n"
                           "def test_rev():\n    from calcly._rev import REV\n    assert REV >= 0\n")
    return [{"instance_id": f"{PREFIX}{i:03d}", "repo": REPO, "base_commit": sha, "patch": patch,
             "test_patch": test, "FAIL_TO_PASS": ["tests/test_bench.py::test_value"],
             "PASS_TO_PASS": ["tests/test_bench.py::test_rev"], "version": "1.0",
             "environment_setup_commit": sha, "problem_statement": "bench"} for i, sha in enumerate(commits)]


def du(path: Path, skip_git: bool = False) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        if skip_git and ".git" in dirnames:
            dirnames.remove(".git")
        for f in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def layers_above(client, tag: str, parent_id: str) -> list[dict]:
    """History entries of ``tag`` newer than ``parent_id`` (the instance's own layers)."""
    out = []
    for entry in client.api.history(tag):
        if entry.get("Id") == parent_id:
            break
        out.append({"created_by": (entry.get("CreatedBy") or "")[:120], "size": int(entry.get("Size") or 0)})
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    import docker
    client = docker.from_env(timeout=600)
    removed = C.remove_images(PREFIX)  # leftovers of an earlier run of this script
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-cold-"))
    try:
        salt = os.urandom(8).hex()
        t = time.monotonic()
        repo, commits = make_repo(tmp, args.n, args.tree_kb, salt)
        repo_seconds = time.monotonic() - t
        specs = tmp / "specs"
        specs.mkdir()
        (specs / "bench__calcsyn.yaml").write_text(SPEC.format(install=json.dumps(args.install)))
        instances = C.write_jsonl(tmp / "instances.jsonl", records(commits))
        df_before = client.df()
        run = C.run_cli(C.harness_args(instances=instances, predictions="gold", run_id="cold", output_dir=tmp / "runs",
                                       cache_dir=args.cache_dir, repos=[f"{REPO}={repo}"], specs=[specs],
                                       extra=["--max-workers", str(args.max_workers), "--force"]))
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            return 1
        reports = C.read_reports(tmp / "runs" / "cold")
        df_after = client.df()

        by_tag = {}
        for item in df_after.get("Images") or []:
            for tag in item.get("RepoTags") or []:
                by_tag[tag] = item
        tags_before = {t for item in df_before.get("Images") or [] for t in item.get("RepoTags") or []}
        rows, per_instance = [], []
        env_tag = next(iter(reports.values()))["image"]["env_tag"]
        env_item = by_tag[env_tag]
        env_img = client.images.get(env_tag)
        for iid, rep in sorted(reports.items()):
            tag = rep["image"]["tag"]
            item = by_tag.get(tag, {})
            export = args.cache_dir / "exports" / f"bench__calcsyn-{commits[int(iid[-3:])]}"
            own = layers_above(client, tag, env_img.id)
            per_instance.append({
                "instance_id": iid, "status": rep["status"], "built": rep["image"]["built"],
                "build_seconds": rep["image"]["build_seconds"], "prepare_seconds": rep["timings"].get("wall", 0)
                - rep["timings"].get("total", 0), "eval_seconds": rep["timings"].get("total"),
                "size": int(item.get("Size") or 0), "shared": int(item.get("SharedSize") or 0),
                "unique": int(item.get("Size") or 0) - int(item.get("SharedSize") or 0),
                "own_layers": own, "own_bytes": sum(l["size"] for l in own),
                "tree_bytes": du(export, skip_git=True), "export_bytes": du(export)})
        n = len(per_instance)
        full = C.median(p["size"] for p in per_instance)
        own_total = sum(p["own_bytes"] for p in per_instance)
        env_size = int(env_item.get("Size") or 0)
        unique_all = env_size + own_total
        tree = C.median(p["tree_bytes"] for p in per_instance)
        export_b = C.median(p["export_bytes"] for p in per_instance)
        own_med = C.median(p["own_bytes"] for p in per_instance)
        mb = lambda b: f"{b / 1e6:.2f}"  # noqa: E731
        summary = [
            ["instances (distinct base commits)", n],
            ["spec install command", f"`{args.install}`" if args.install else "none"],
            ["env image already present before the run (warm)", "yes" if env_tag in tags_before else "no (built)"],
            ["statuses", ", ".join(sorted({p["status"] for p in per_instance}))],
            ["instance image builds (built / reused)", f"{sum(p['built'] for p in per_instance)} / "
                                                       f"{sum(not p['built'] for p in per_instance)}"],
            ["build time per instance image, median (s)", C.fmt(C.median(p["build_seconds"] for p in per_instance))],
            ["build time per instance image, max (s)", C.fmt(max(p["build_seconds"] for p in per_instance))],
            ["runner preparation per instance incl. export + build, median (s)",
             C.fmt(C.median(p["prepare_seconds"] for p in per_instance))],
            ["evaluation per instance, median (s)", C.fmt(C.median(p["eval_seconds"] for p in per_instance))],
            ["whole `harness run` (s)", C.fmt(run.elapsed)],
            ["working tree (files, no .git), median (MB)", mb(tree)],
            ["one-commit export incl. .git, median (MB)", mb(export_b)],
            ["instance's own layers above the env image, median (MB)", mb(own_med)],
            ["own layers / export", C.fmt(own_med / export_b if export_b else float("nan"))],
            ["one full instance image, median (MB)", mb(full)],
            ["env image (shared chain: base + venv) (MB)", mb(env_size)],
            [f"unique bytes, all {n} images: env chain once + own layers (MB)", mb(unique_all)],
            [f"{n} × one full image (MB)", mb(n * full)],
            ["unique / (N × full)", C.fmt(unique_all / (n * full), 3)],
            ["engine's unique (Size − SharedSize) per instance image, median (MB)",
             mb(C.median(p["unique"] for p in per_instance))],
        ]
        layer_rows = [[l["created_by"].replace("|", "\\|"), mb(l["size"])] for l in per_instance[0]["own_layers"]]
        text = "\n".join([
            C.header(f"Cold cost of {n} instances of one repository", machine),
            C.markdown_table(["quantity", "value"], summary),
            f"\n### Layers of one instance image above the env image ({per_instance[0]['instance_id']})\n",
            C.markdown_table(["history entry (created by)", "MB"], layer_rows),
            f"\nLayers-size total of the engine before/after the run: "
            f"{mb(df_before.get('LayersSize', 0))} → {mb(df_after.get('LayersSize', 0))} MB "
            f"(other sessions may build at the same time).\n"])
        print(text)
        out = C.write_results("cold_cost", {
            "machine": machine, "command": C.command_line(), "n": n, "tree_kb": args.tree_kb, "salt": salt,
            "repo_generation_seconds": repo_seconds, "cli_seconds": run.elapsed, "env_tag": env_tag,
            "env_size": env_size, "per_instance": per_instance, "removed_leftovers": removed,
            "layers_size_before": df_before.get("LayersSize"), "layers_size_after": df_after.get("LayersSize"),
            "markdown": text}, args.out)
        print(f"\nraw results: {out}", file=sys.stderr)
    finally:
        if not args.keep_images:
            C.remove_images(PREFIX)
        for sha in locals().get("commits", []):  # salted exports are never reused
            shutil.rmtree(args.cache_dir / "exports" / f"bench__calcsyn-{sha}", ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
