"""The harness installed like any Python tool (issue #14): the wheel and sdist built with the
standard front-end (``python -m build``), the wheel installed into a fresh virtual
environment (and with pipx) outside the checkout, and the installed ``harness`` grading the
embedded demo set and validating it, with the checkout hidden.

"Hidden" is literal where the machine allows it: every command of the installed harness runs
in a private mount namespace (``unshare --mount``, as root) with an empty tmpfs mounted over
the checkout, so nothing of the source tree can be read, whatever the code tries. Where
``unshare`` is not allowed the commands still run from another directory with the checkout
off ``sys.path`` (asserted either way), and the test says which isolation it had.

The venvs install the harness's dependencies from PyPI (the host has it; containers never
do). The engine and the image cache are the shared ones (``HARNESS_CACHE_DIR`` is the test
cache), so warm this costs a build, two installs and three short runs.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from harness import __version__
from harness.buildinfo import checkout_commit
from tests.conftest import PROJECT_ROOT

EXPECTED = json.loads((PROJECT_ROOT / "instances" / "demo" / "expected.json").read_text())
DEMO_IDS = sorted(EXPECTED["gold"])
STATUS_ROW = re.compile(r"^│\s*(\S+)\s*│\s*(FULL|PARTIAL|NO|INVALID)\s*│")


def _tracked(*paths: str) -> list[str]:
    proc = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-files", "-z", "--", *paths],
                          capture_output=True, check=True)
    return [p for p in proc.stdout.decode().split("\0") if p]


@functools.cache
def _can_hide_checkout() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs none '{PROJECT_ROOT}' && test ! -e '{PROJECT_ROOT}/pyproject.toml'"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def _outside(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``argv`` from ``cwd`` with the checkout hidden (see the module docstring)."""
    if _can_hide_checkout():
        script = f"mount -t tmpfs none '{PROJECT_ROOT}' && exec \"$@\""
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _clean_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without anything that would lead back to the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "HARNESS_DATA_DIR")
           and not k.startswith(("PIP_REQUIRE", "PIPX_"))}
    env.update(HARNESS_CACHE_DIR=str(cache_dir), COLUMNS="200", PYTHONNOUSERSITE="1", **extra)
    return env


def _table(stdout: str) -> dict[str, str]:
    """{instance id: status} from the table ``harness run`` prints."""
    return {m.group(1): m.group(2) for m in map(STATUS_ROW.match, stdout.splitlines()) if m}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict:
    """The sdist, and the wheel built from it, by the standard front-end from the checkout."""
    for path in (Path(os.environ.get("HARNESS_TEST_CACHE", Path.home() / ".cache" / "harness-tests")),
                 tmp_path_factory.getbasetemp()):
        assert not path.resolve().is_relative_to(PROJECT_ROOT), f"{path} lies inside the checkout it must not see"
    out = tmp_path_factory.mktemp("dist")
    commit = checkout_commit(PROJECT_ROOT)
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(PROJECT_ROOT)],
                          capture_output=True, text=True, timeout=900, env=_clean_env(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheels, sdists = sorted(out.glob("harness-*.whl")), sorted(out.glob("harness-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0], "commit": commit}


def test_wheel_and_sdist_carry_code_data_and_metadata(dist):
    wheel = zipfile.ZipFile(dist["wheel"])
    names = set(wheel.namelist())
    info = f"harness-{__version__}.dist-info"
    # Every tracked data file, dotfiles included (the demo snapshots' .gitignore files are
    # part of their commits), under harness/data; every tracked file of the package itself.
    data = _tracked("images", "instances")
    assert any(p.endswith("/.gitignore") for p in data) and "images/bases.yaml" in data
    missing = [p for p in data if f"harness/data/{p}" not in names]
    missing += [p for p in _tracked("harness") if p not in names]
    assert missing == []
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert not [n for n in names if n.split("/")[0] not in ("harness", info)]  # no stray top-level names
    if dist["commit"]:  # recorded at build time from the checkout's git
        assert json.loads(wheel.read("harness/_build_info.json")) == {"commit": dist["commit"], "source": "git"}
    else:
        assert "harness/_build_info.json" not in names

    metadata = wheel.read(f"{info}/METADATA").decode()
    fields = [tuple(line.split(": ", 1)) for line in metadata.split("\n\n", 1)[0].splitlines() if ": " in line]
    keys = {k for k, _ in fields}
    assert ("Name", "harness") in fields and ("Version", __version__) in fields
    assert ("Requires-Python", ">=3.11") in fields and ("License-Expression", "MIT") in fields
    assert ("Description-Content-Type", "text/markdown") in fields
    assert {"Summary", "Classifier", "Project-URL", "Requires-Dist", "License-File"} <= keys
    assert "# harness" in metadata.split("\n\n", 1)[1]  # the README is the long description
    assert f"{info}/licenses/LICENSE" in names
    assert "harness = harness.cli:main" in wheel.read(f"{info}/entry_points.txt").decode()

    with tarfile.open(dist["sdist"]) as sdist:
        top = f"harness-{__version__}"
        members = {m.name.removeprefix(top + "/") for m in sdist.getmembers()}
    assert {"pyproject.toml", "setup.py", "README.md", "LICENSE", "PKG-INFO", "harness/_build_info.json"} <= members
    assert [p for p in data + _tracked("harness") if p not in members] == []


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _check_isolated(python: Path, venv_root: Path, cwd: Path, env: dict[str, str]) -> dict:
    probe = ("import json, os, sys, harness, harness.resources as r; "
             "print(json.dumps({'file': harness.__file__, 'path': sys.path, 'demo': str(r.demo_dir()), "
             f"'checkout_visible': os.path.exists({str(PROJECT_ROOT / 'pyproject.toml')!r})}}))")
    proc = _outside([str(python), "-c", probe], cwd, env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert Path(seen["file"]).resolve().is_relative_to(venv_root.resolve()), seen["file"]
    assert Path(seen["demo"]).is_relative_to(venv_root.resolve()), seen["demo"]
    inside = [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(PROJECT_ROOT)]
    assert inside == [], f"the checkout is on sys.path: {inside}"
    assert seen["checkout_visible"] is (not _can_hide_checkout())
    return seen


def _run_demo(harness: Path, cwd: Path, env: dict[str, str], run_id: str, venv: Path) -> None:
    """``harness run`` with no arguments but the run id: the embedded demo set and its demo
    predictions, graded as designed (instances/demo/expected.json)."""
    proc = _outside([str(harness), "run", "--run-id", run_id], cwd, env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    expected = {iid: e["status"] for iid, e in EXPECTED["predictions.jsonl"].items()}
    assert _table(proc.stdout) == expected, proc.stdout
    assert sorted(set(expected.values())) == ["FULL", "INVALID", "NO", "PARTIAL"]
    for iid, e in EXPECTED["predictions.jsonl"].items():
        report = json.loads((cwd / "runs" / run_id / iid / "report.json").read_text())
        assert (report["status"], report["resolved"], report["error_reason"]) == (
            e["status"], e["resolved"], e["error_reason"]), iid
    summary = json.loads((cwd / "runs" / run_id / "summary.json").read_text())
    assert Path(summary["instances_file"]).is_relative_to(venv.resolve())  # the packaged demo set
    # The HTML pages render from the packaged templates and assets (harness/views).
    assert "not written" not in proc.stderr, proc.stderr
    assert (cwd / "runs" / run_id / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert all((cwd / "runs" / run_id / iid / "report.html").is_file() for iid in expected)


@pytest.mark.engine
def test_pip_install_outside_the_checkout_runs_and_validates_the_demo_set(dist, cache_dir, engine, tmp_path):
    venv, work = tmp_path / "venv", tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_env(cache_dir)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    pip = subprocess.run([str(_venv_python(venv)), "-m", "pip", "install", "--quiet", str(dist["wheel"])],
                         capture_output=True, text=True, env=env, cwd=work, timeout=900)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    harness = venv / "bin" / "harness"
    print(f"\nisolation: {'checkout hidden by a tmpfs (unshare)' if _can_hide_checkout() else 'cwd and sys.path'}")

    _check_isolated(_venv_python(venv), venv, work, env)
    version = _outside([str(harness), "--version"], work, env)
    as_module = _outside([str(_venv_python(venv)), "-m", "harness", "--version"], work, env)
    assert version.returncode == as_module.returncode == 0, version.stderr + as_module.stderr
    commit = dist["commit"]
    assert version.stdout.strip() == (f"harness {__version__} (commit {commit}, recorded at build (git))"
                                      if commit else f"harness {__version__} (commit unknown)")
    assert as_module.stdout == version.stdout

    where = _outside([str(harness), "data", "path"], work, env)
    assert where.returncode == 0, where.stdout + where.stderr
    assert f"demo set  {(venv / 'lib').resolve()}" in where.stdout and "(packaged with the harness)" in where.stdout

    _run_demo(harness, work, env, "pip-demo", venv)

    proc = _outside([str(harness), "validate", "--repeat", "1", "--run-id", "pip-validate"], work, env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    validity = json.loads((work / "runs" / "pip-validate" / "validity.json").read_text())
    assert sorted(validity["instances"]) == DEMO_IDS
    assert validity["valid_instances"] == validity["instances_validated"] == len(DEMO_IDS)
    for iid, row in validity["instances"].items():
        assert (row["reference_statuses"], row["empty_status"], row["valid"]) == (["FULL"], "NO", True), iid

    # HARNESS_DATA_DIR: an exported copy is used instead of the packaged data, and a bad one is refused.
    exported = work / "org-data"
    proc = _outside([str(harness), "data", "export", str(exported)], work, env)
    assert proc.returncode == 0, proc.stderr
    (exported / "images" / "specs" / "harness-demo__calcly.yaml").unlink()
    with_dir = {**env, "HARNESS_DATA_DIR": str(exported)}
    proc = _outside([str(harness), "run", "--predictions", "gold", "--run-id", "data-dir", "--quiet",
                     "--instance-ids", "harness-demo__calcly-1", "harness-demo__textkit-1"], work, with_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {iid: json.loads((work / "runs" / "data-dir" / iid / "report.json").read_text())
               for iid in ("harness-demo__calcly-1", "harness-demo__textkit-1")}
    assert {iid: r["status"] for iid, r in reports.items()} == {"harness-demo__calcly-1": "INVALID",
                                                                 "harness-demo__textkit-1": "FULL"}
    assert "no environment spec for repository 'harness-demo/calcly'" in reports["harness-demo__calcly-1"]["error_detail"]
    proc = _outside([str(harness), "run"], work, {**env, "HARNESS_DATA_DIR": str(work / "nowhere")})
    assert proc.returncode == 2 and "HARNESS_DATA_DIR" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.engine
def test_pipx_install_runs_the_demo_set(dist, cache_dir, engine, tmp_path):
    """pipx's own isolated environment (pipx pinned in the test extras)."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    home, bin_dir = tmp_path / "pipx-home", tmp_path / "pipx-bin"
    env = _clean_env(cache_dir, PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"))
    proc = subprocess.run([sys.executable, "-m", "pipx", "install", str(dist["wheel"])], capture_output=True,
                          text=True, env=env, cwd=work, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    harness = bin_dir / "harness"
    venv = home / "venvs" / "harness"
    _check_isolated(_venv_python(venv), venv, work, env)
    version = _outside([str(harness), "--version"], work, env)
    assert version.returncode == 0 and version.stdout.startswith(f"harness {__version__} (commit "), version
    _run_demo(harness, work, env, "pipx-demo", venv)
