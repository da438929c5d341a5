"""Finding the harness's own data (harness.resources) and its version and commit
(harness.buildinfo). The wheel itself is tested in tests/integration/test_install.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources as importlib_resources
from pathlib import Path

import pytest

from harness import __version__, buildinfo, resources
from tests.conftest import PROJECT_ROOT


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != resources.DATA_DIR_ENV}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=60,
                          cwd="/")


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-files", "-z", "--", *paths], capture_output=True,
                         check=True).stdout.decode()
    return [p for p in out.split("\0") if p]


def test_project_data_is_found_through_importlib_resources():
    packaged = Path(str(importlib_resources.files(resources.IMAGES_PACKAGE))).resolve()
    assert resources.images_dir() == packaged
    assert resources.instances_dir() == Path(str(importlib_resources.files(resources.INSTANCES_PACKAGE))).resolve()
    from harness.inputs.demo import DEMO_DIR
    from harness.engine.layers import BaseDefinition
    from harness.inputs.specs import DEFAULT_SPECS_DIR, IMAGES_DIR
    assert (IMAGES_DIR, DEFAULT_SPECS_DIR, DEMO_DIR) == (resources.images_dir(), resources.specs_dir(),
                                                         resources.demo_dir())
    assert BaseDefinition.load().pythons  # the default path is the packaged bases.yaml
    assert resources.problems() == []


def test_an_editable_install_maps_the_top_level_directories_into_the_package():
    # This suite runs against `pip install -e .` (scripts/setup.sh): images/ and instances/
    # stay at the top of the source tree and are the packages harness.data.images/instances.
    assert resources.images_dir() == PROJECT_ROOT / "images"
    assert resources.demo_dir() == PROJECT_ROOT / "instances" / "demo"
    assert resources.data_source() == "the source tree (editable install)"


def test_code_data_is_found_inside_the_package():
    assert resources.path("grading", "grade.py") == Path(__file__).resolve().parents[2] / "harness/grading/grade.py"
    with pytest.raises(resources.ResourceError, match="not part of the installed harness"):
        resources.path("no-such-dir", "file")


def test_export_writes_every_data_file_and_nothing_else(tmp_path):
    dest = resources.export_data(tmp_path / "data")
    exported = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert exported == sorted(p for p in _tracked("images", "instances")
                              if p not in ("images/__init__.py", "instances/__init__.py"))
    assert any(p.endswith("/.gitignore") for p in exported)  # dotfiles are part of the demo commits
    with pytest.raises(resources.InputError, match="not empty"):
        resources.export_data(dest)


def test_HARNESS_DATA_DIR_replaces_the_packaged_data(tmp_path):
    dest = resources.export_data(tmp_path / "org")
    code = ("import json; from harness import resources; "
            "from harness.inputs.specs import IMAGES_DIR, DEFAULT_SPECS_DIR; "
            "from harness.inputs.demo import DEMO_DIR, load_jsonl; from harness.engine.images import BaseDefinition; "
            "print(json.dumps([str(IMAGES_DIR), str(DEFAULT_SPECS_DIR), str(DEMO_DIR), resources.data_source(), "
            "resources.problems(), str(resources.path())]))")
    proc = _python(code, HARNESS_DATA_DIR=str(dest))
    assert proc.returncode == 0, proc.stderr
    images, specs, demo, source, problems, package = json.loads(proc.stdout)
    assert (images, specs, demo) == (str(dest / "images"), str(dest / "images" / "specs"),
                                     str(dest / "instances" / "demo"))
    assert source == f"HARNESS_DATA_DIR={dest}" and problems == []
    assert package == str(PROJECT_ROOT / "harness")  # code's data is never replaced

    (dest / "images" / "bases.yaml").unlink()
    proc = _python("from harness import resources; print(resources.problems())", HARNESS_DATA_DIR=str(dest))
    assert f"{dest / 'images' / 'bases.yaml'} is missing (HARNESS_DATA_DIR={dest})" in proc.stdout


@pytest.mark.parametrize("command", [["run"], ["data", "path"], ["validate", "--repeat", "1"]])
def test_a_HARNESS_DATA_DIR_that_is_no_directory_is_refused_by_name(command, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", *command], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HARNESS_DATA_DIR": str(tmp_path / "missing")}, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"harness: field 'HARNESS_DATA_DIR': not a directory ({tmp_path / 'missing'})"


def test_a_checkout_that_was_never_installed_still_finds_its_data():
    # -S: no site-packages, so no editable-install finder: harness comes straight from the tree.
    code = (f"import sys; sys.path.insert(0, {str(PROJECT_ROOT)!r}); from harness import resources; "
            "print(resources.images_dir()); print(resources.data_source())")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd="/", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(PROJECT_ROOT / "images"),
                                        "the source tree (harness imported from a checkout, not installed)"]


# ---------------------------------------------------------------------------- version and commit

def _git(*args: str, cwd: Path = PROJECT_ROOT) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_of_a_checkout_is_its_HEAD():
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *buildinfo.PACKAGED_PATHS)
    assert buildinfo.checkout_commit(PROJECT_ROOT) == _git("rev-parse", "HEAD") + ("-dirty" if dirty else "")
    info = buildinfo.build_info()
    assert (info.version, info.commit, info.origin) == (__version__, buildinfo.checkout_commit(PROJECT_ROOT),
                                                        f"checkout {PROJECT_ROOT}")


def test_a_directory_inside_some_other_repository_lends_no_commit(tmp_path):
    # e.g. a virtual environment created inside a user's own repository
    _git("init", "-q", cwd=tmp_path)
    _git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "x", cwd=tmp_path)
    inner = tmp_path / "venv" / "site-packages"
    (inner / "harness").mkdir(parents=True)
    (inner / "harness" / "__init__.py").write_text("")
    (inner / "pyproject.toml").write_text("")
    assert buildinfo.checkout_commit(inner) is None
    assert buildinfo.checkout_commit(tmp_path / "venv") is None  # no project there at all


def test_the_commit_recorded_at_build_time_is_read_and_a_bad_record_ignored(tmp_path):
    record = tmp_path / buildinfo.BUILD_INFO_FILE
    assert buildinfo.recorded_commit(tmp_path) is None
    record.write_text(json.dumps({"commit": "abc123", "source": "git"}))
    assert buildinfo.recorded_commit(tmp_path) == ("abc123", "git")
    for bad in ("not json", "[]", json.dumps({"commit": ""}), json.dumps({"commit": 5})):
        record.write_text(bad)
        assert buildinfo.recorded_commit(tmp_path) is None


def test_describe_names_the_version_and_the_commit():
    assert buildinfo.BuildInfo("1.2", "abc", "checkout /src").describe() == "harness 1.2 (commit abc, checkout /src)"
    assert buildinfo.BuildInfo("1.2", None, "unknown").describe() == "harness 1.2 (commit unknown)"


def test_python_dash_m_harness_is_the_harness_command(tmp_path):
    script = Path(sys.executable).parent / "harness"
    by_module = subprocess.run([sys.executable, "-m", "harness", "--version"], capture_output=True, text=True,
                               cwd=tmp_path, timeout=60)
    by_script = subprocess.run([str(script), "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert by_module.returncode == by_script.returncode == 0
    assert by_module.stdout == by_script.stdout == buildinfo.build_info().describe() + "\n"
    usage = subprocess.run([sys.executable, "-m", "harness"], capture_output=True, text=True, cwd=tmp_path)
    assert usage.returncode == 2 and "usage: harness" in usage.stderr


def test_the_version_is_written_once():
    # pyproject.toml reads harness._version.__version__ (dynamic); the installed metadata agrees.
    from importlib.metadata import version
    assert version("harness") == __version__
    assert 'version = {attr = "harness._version.__version__"}' in (PROJECT_ROOT / "pyproject.toml").read_text()
