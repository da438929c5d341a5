"""Cold cost of a *further* instance of a version, before and after issue 10, side by side.

For each subject — pylint 2.15 (4 Lite instances), pytest 5.4 (4; its spec reads its
requirements from the tree) and astropy 5.1 (4, from SWE-bench Verified as well; compiled extensions) — both harnesses
prepare the same instances one at a time (``Preparer.prepare`` in a fresh process, nothing
evaluated), in a fresh cache directory each: the first instance pays for the version
(wheelhouse, environment), every further one pays what a new instance of an already-built
version costs. Reported: the seconds of each preparation (export, requirements,
wheelhouse, images), their median over the further instances, and the ratio.

*before* is the harness at ``--before`` (default 7351ccb, main before issue 10), run from a
plain copy of that revision (``git archive``) with old-format specs (generated here: the old harness cannot
express build requirement overrides or compilers as layers, so its specs pin what the new
ones derive); *after* is this checkout with the project's specs. Each side's specs carry a
random ``HARNESS_BENCH_SALT`` environment variable, so no instance image built earlier is
reused (environment images may be: the further instances are what is measured). The
subjects alternate which side goes first.

    .venv/bin/python benchmarks/further_instance.py [--subjects pylint pytest astropy] \\
        [--before 7351ccb] [--repos-dir /work/repos] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SHARED = next((p / "shared" / "swebench" for p in (C.PROJECT_ROOT.parent, C.PROJECT_ROOT.parent.parent)
               if (p / "shared" / "swebench").is_dir()), C.PROJECT_ROOT.parent / "shared" / "swebench")
LITE = SHARED / "lite-test.jsonl"
VERIFIED = SHARED / "verified-test.jsonl"
SUBJECTS = {
    "pylint": ("pylint-dev/pylint", ["pylint-dev__pylint-7080", "pylint-dev__pylint-7114",
                                     "pylint-dev__pylint-7228", "pylint-dev__pylint-7993"]),
    "pytest": ("pytest-dev/pytest", ["pytest-dev__pytest-7168", "pytest-dev__pytest-7220",
                                     "pytest-dev__pytest-7373", "pytest-dev__pytest-7432"]),
    # Lite's two 5.1 instances are not both exportable here (14365's mirror lacks a blob), so
    # four 5.1 instances of SWE-bench Verified, in commit order
    "astropy": ("astropy/astropy", ["astropy__astropy-14096", "astropy__astropy-13977", "astropy__astropy-14182",
                                    "astropy__astropy-14309"]),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subjects", nargs="+", default=list(SUBJECTS), choices=list(SUBJECTS))
    p.add_argument("--sides", nargs="+", default=["before", "after"], choices=["before", "after"],
                   help="measure only these sides (e.g. re-run one side that failed)")
    p.add_argument("--before", default="7351ccb", help="git revision of the harness before the change")
    p.add_argument("--repos-dir", type=Path, default=Path("/work/repos"))
    p.add_argument("--instances", type=Path, nargs="+", default=[LITE, VERIFIED],
                   help="instance files (the subjects' ids are looked up in all of them)")
    p.add_argument("--work-dir", type=Path, help="where caches, runs and the old worktree go (default: a temp dir)")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/further_instance.json)")
    return p.parse_args(argv)


def old_spec(subject: str, after_specs: Path, before_tree: Path) -> dict:
    """An old-format spec (issue-10 fields removed; their effect pinned or spelled out)."""
    if subject == "pytest":
        return yaml.safe_load((before_tree / "images" / "specs" / "pytest-dev__pytest.yaml").read_text())
    from harness.inputs.specs import SpecRegistry
    version = {"pylint": "2.15", "astropy": "5.1"}[subject]
    new = SpecRegistry.load(after_specs).get(SUBJECTS[subject][0], version)
    requirements = [*new.requirements, *new.installer]
    if subject == "pylint":
        # the old harness adds the tree's build requirements (setuptools~=62.6, wheel~=0.37.1)
        # silently: pin the tools to agree with them (and cannot let a pin yield to each tree:
        # astroid is left to the trees)
        requirements = [r for r in requirements if not r.startswith(("setuptools==", "wheel==", "astroid=="))]
        requirements += ["setuptools==62.6.0", "wheel==0.37.1"]
        fields: dict = {"install_requires_from_tree": True}
    else:
        # the tree's build requirements (oldest-supported-numpy) would conflict: pin everything,
        # read nothing from the tree, and get the compiler through apt_packages (a second base)
        requirements += [r for r in (new.build_requires or ()) if r not in requirements]
        requirements += ["pytest-astropy==0.10.0"]
        fields = {"install_requires_from_tree": False, "apt_packages": ["build-essential", "python3-dev"],
                  "install": "python -m pip install --no-build-isolation --no-deps -e ."}
    spec = {"python": new.python, "requirements": sorted(set(requirements)), "install": new.install,
            "test_cmd": new.test_cmd, "parser": "pytest", "env": dict(new.env)}
    spec.update(fields)
    return {"repo": new.repo, "defaults": spec, "versions": {version: {}}}


def salted(spec: dict, salt: str) -> dict:
    spec = json.loads(json.dumps(spec))
    defaults = spec.setdefault("defaults", {})
    defaults["env"] = {**(defaults.get("env") or {}), "HARNESS_BENCH_SALT": salt}
    return {k: v for k, v in spec.items() if not str(k).startswith("x-")}


#: Prepares one instance (export, requirements, wheelhouse, images) and prints the seconds
#: it took; run with the harness under test first on sys.path (the old copy or this one).
PREPARE = r"""
import json, sys, time
from pathlib import Path
from harness.engine.client import connect
from harness.inputs.instances import load_instances
from harness.inputs.repos import RepoResolver
from harness.preparation.preparer import Preparer
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
instances, iid, cache, specs, repos = sys.argv[1:6]
instance = [i for i in load_instances(Path(instances), [iid]).instances][0]
client = connect()
preparer = Preparer(client, SpecRegistry.load(DEFAULT_SPECS_DIR, Path(specs)),
                    RepoResolver(Path(cache), Path(repos), allow_clone=False), Path(cache))
started = time.monotonic()
prepared = preparer.prepare(instance)
seconds = time.monotonic() - started
labels = getattr(prepared.image, "labels", None) or {}
path = labels.get("org.harness.rebuilt") or ("small layer" if labels.get("org.harness.reused-from") else "full")
print("HARNESS-BENCH " + json.dumps({"seconds": seconds, "image": prepared.image.tag, "built": prepared.image.built,
                                      "path": path,
                                      "instance_build_seconds": prepared.image.build_seconds,
                                      "breakdown": getattr(prepared, "timings", None)}))
"""


def run_one(side_root: Path, python_path: Path | None, instances: Path, iid: str, cache: Path,
            specs: Path, repos_dir: Path) -> dict:
    """Prepare ``iid`` with the harness at ``python_path`` (None: this checkout): nothing is
    evaluated, so the figure is preparation alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(python_path or C.PROJECT_ROOT)
    if python_path is None:  # this checkout's own specs and bases, even when another copy is installed
        env["HARNESS_DATA_DIR"] = str(C.PROJECT_ROOT)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", PREPARE, str(instances), iid, str(cache), str(specs),
                           str(repos_dir)], capture_output=True, text=True, env=env,
                          cwd=str(python_path or C.PROJECT_ROOT))
    elapsed = time.monotonic() - started
    line = next((l for l in proc.stdout.splitlines() if l.startswith("HARNESS-BENCH ")), None)
    data = json.loads(line.split(" ", 1)[1]) if line else {}
    return {"instance": iid, "exit": proc.returncode, "process_seconds": round(elapsed, 2),
            "prepare_seconds": round(data["seconds"], 2) if data else None, "image": data.get("image"),
            "built": data.get("built"), "path": data.get("path"),
            "instance_build_seconds": data.get("instance_build_seconds"),
            "breakdown": data.get("breakdown"), "error": proc.stderr[-800:] if proc.returncode else ""}


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-further-"))
    work.mkdir(parents=True, exist_ok=True)
    before_tree = work / "before-tree"
    if not before_tree.exists():  # a plain copy of the old tree (no worktree metadata in the shared .git)
        before_tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(C.PROJECT_ROOT), "archive", args.before], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before_tree)], input=archive, check=True)
    after_specs = C.PROJECT_ROOT / "images" / "specs"
    combined, seen = work / "instances.jsonl", set()
    with combined.open("w") as out:
        for path in args.instances:
            for line in Path(path).read_text().splitlines():
                if line.strip() and json.loads(line)["instance_id"] not in seen:
                    seen.add(json.loads(line)["instance_id"])
                    out.write(line + "\n")
    results: dict = {"machine": machine, "command": C.command_line(), "before": args.before, "subjects": {}}
    for index, subject in enumerate(args.subjects):
        repo, ids = SUBJECTS[subject]
        sides = [side for side in (["before", "after"] if index % 2 == 0 else ["after", "before"])
                 if side in args.sides]
        results["subjects"][subject] = {}
        for side in sides:
            root = work / f"{subject}-{side}"
            specs = root / "specs"
            specs.mkdir(parents=True, exist_ok=True)
            salt = secrets.token_hex(6)
            if side == "before":
                spec = old_spec(subject, after_specs, before_tree)
            else:
                spec = yaml.safe_load((after_specs / f"{repo.replace('/', '__')}.yaml").read_text())
            (specs / f"{repo.replace('/', '__')}.yaml").write_text(yaml.safe_dump(salted(spec, salt),
                                                                                  sort_keys=False))
            cache = root / "cache"
            shutil.rmtree(cache, ignore_errors=True)
            rows = []
            for iid in ids:
                row = run_one(root, before_tree if side == "before" else None, combined, iid, cache,
                              specs, args.repos_dir)
                rows.append(row)
                print(f"{subject} {side} {iid}: prepare {row['prepare_seconds']} s, built {row['built']} "
                      f"{row['error'][-300:]}", flush=True)
            results["subjects"][subject][side] = rows
        C.write_results("further_instance", results, args.out)
    print(render(results))
    C.write_results("further_instance", results, args.out)
    return 0


def render(results: dict) -> str:
    lines = [C.header("Further instances of a built version, before and after", results["machine"])]
    rows = []
    for subject, sides in results["subjects"].items():
        medians = {}
        for side in ("before", "after"):
            data = sides.get(side) or []
            further = [r["prepare_seconds"] for r in data[1:] if r["prepare_seconds"] is not None]
            medians[side] = C.median(further) if further else None
            first = data[0]["prepare_seconds"] if data else None
            rows.append([subject, side, C.fmt(first or 0, 1), " ".join(C.fmt(x, 1) for x in further),
                         C.fmt(medians[side] or 0, 1), " ".join("ok" if not r["error"] else "failed" for r in data)])
        if medians.get("before") and medians.get("after"):
            rows.append([subject, "after / before", "", "", f"{medians['after'] / medians['before']:.2f}", ""])
    lines.append(C.markdown_table(["subject", "side", "first instance (s)", "further instances (s, each)",
                                   "further, median (s)", "prepared"], rows))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
