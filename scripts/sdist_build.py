"""Exercise a spec's compiled build without the repository's history: a project's PyPI sdist
of the same version becomes a one-commit repository, and an instance made here is graded
through the whole harness (interpreter, environment, compiler, downloads, install,
tests in a network-less container) with the spec under test.

The instance's test patch adds a test module with one test that uses a compiled extension
of the project (PASS_TO_PASS) and one that needs the reference patch (FAIL_TO_PASS); the
reference patch adds a small module and, with ``--touch-compiled``, also edits a compiled
source, so the checked re-install (an incremental rebuild in the test container) runs.

    .venv/bin/python scripts/sdist_build.py scikit-learn/scikit-learn 0.22 scikit-learn==0.22.2.post1 \\
        --probe "from sklearn.utils.murmurhash import murmurhash3_32; assert murmurhash3_32(1) != 0" \\
        --package sklearn --touch-compiled sklearn/utils/murmurhash.pyx
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

GIT_ENV = {"GIT_AUTHOR_NAME": "sdist", "GIT_AUTHOR_EMAIL": "sdist@localhost", "GIT_COMMITTER_NAME": "sdist",
           "GIT_COMMITTER_EMAIL": "sdist@localhost", "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
           "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout


def diff_adding(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write(text)
    git(repo, "add", "-A")
    out = git(repo, "diff", "--cached")
    git(repo, "reset", "-q", "--hard")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", help="OWNER/NAME of the spec")
    p.add_argument("version", help="the spec version")
    p.add_argument("sdist", help="NAME==VERSION on the index")
    p.add_argument("--package", required=True, help="the importable package (where the probe module goes)")
    p.add_argument("--probe", required=True, help="Python statements using a compiled extension")
    p.add_argument("--touch-compiled", help="a compiled source the reference patch edits (triggers the rebuild)")
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--output-dir", type=Path)
    args = p.parse_args(argv)

    from harness.cli import main as harness
    from harness.wheelhouse import download_sdist
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="sdist-build-"))
    work.mkdir(parents=True, exist_ok=True)
    name, _, version = args.sdist.partition("==")
    sdist = download_sdist(name, version, work, work / "download.log")
    repo = work / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(work / "unpacked", filter="data")
    top = next((work / "unpacked").iterdir())
    shutil.move(str(top), repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-qm", f"{args.sdist} from its sdist")
    base = git(repo, "rev-parse", "HEAD").strip()

    test_path = f"{args.package}/tests/test_harness_sdist_build.py"
    tests = ("\n\ndef test_compiled_extension_works():\n" + "".join(f"    {line}\n" for line in args.probe.split(";"))
             + "\n\ndef test_reference_patch_is_there():\n"
               f"    from {args.package}._harness_probe import answer\n    assert answer() == 42\n")
    gold = {f"{args.package}/_harness_probe.py": "def answer():\n    return 42\n"}
    if args.touch_compiled:
        comment = "\n# touched by the reference patch\n" if args.touch_compiled.endswith((".pyx", ".pxd")) \
            else "\n/* touched by the reference patch */\n"
        gold[args.touch_compiled] = comment
    record = {"instance_id": f"{args.repo.replace('/', '__')}-sdist-{version}", "repo": args.repo,
              "base_commit": base, "version": args.version, "problem_statement": "sdist build check",
              "patch": diff_adding(repo, gold), "test_patch": diff_adding(repo, {test_path: tests}),
              "FAIL_TO_PASS": [f"{test_path}::test_reference_patch_is_there"],
              "PASS_TO_PASS": [f"{test_path}::test_compiled_extension_works"]}
    instances = work / "instance.json"
    instances.write_text(json.dumps([record]))
    run_id = f"sdist-{name}-{version}-{int(time.time())}"
    output = args.output_dir or work / "runs"
    extra = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
    started = time.monotonic()
    code = harness(["run", "--instances", str(instances), "--predictions", "gold", "--repo",
                    f"{args.repo}={repo}", "--no-clone", "--run-id", run_id, "--output-dir", str(output),
                    "--quiet", *extra])
    report = json.loads((output / run_id / record["instance_id"] / "report.json").read_text())
    rebuild = [c for c in report.get("commands", []) if c["phase"] == "reinstall"]
    print(json.dumps({"sdist": args.sdist, "spec": f"{args.repo}@{args.version}", "status": report["status"],
                      "error": report.get("error_detail", "")[-800:], "interpreter": report["image"].get("interpreter"),
                      "prepare_seconds": report["image"].get("prepare_seconds"),
                      "rebuild": [{"exit": c["exit_code"], "seconds": c["duration"]} for c in rebuild],
                      "tests_seconds": report["timings"].get("tests"), "wall": round(time.monotonic() - started, 1),
                      "run_dir": str(output / run_id)}, indent=1))
    return 0 if code == 0 and report["status"] == "FULL" else 1


if __name__ == "__main__":
    sys.exit(main())
