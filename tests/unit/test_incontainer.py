"""The trusted in-container files: every file of harness/incontainer/ is installed at run
time under the one constant, and commands name them through it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from harness import incontainer, resources
from harness.evaluation.tasks import RunConfig
from harness.runners import RUNNERS
from harness.runners.base import ReporterRunner


def test_every_file_of_the_package_is_installed_under_the_trusted_directory():
    shipped = sorted(p.name for p in resources.path("incontainer").glob("*.py") if p.name != "__init__.py")
    assert shipped and "junit_reporter.py" in shipped
    assert sorted(k for k in incontainer.files() if k.startswith("py/")) == [f"py/{name}" for name in shipped]
    assert incontainer.PY_DIR.startswith(incontainer.TRUSTED_DIR + "/")
    assert incontainer.trusted_path("junit_reporter.py") == f"{incontainer.PY_DIR}/junit_reporter.py"
    with pytest.raises(KeyError, match="not a trusted"):
        incontainer.trusted_path("sitecustomize_of_mine.py")


def test_trusted_files_parse_as_python_3_6():
    # they run on the sandbox's interpreter, which may be older than the host's
    for rel, data in incontainer.files().items():
        ast.parse(data, filename=rel, feature_version=(3, 6))


def test_reporter_runners_name_the_reporter_through_the_constant_only():
    reporters = [r for r in RUNNERS.values() if isinstance(r, ReporterRunner)]
    assert {r.name for r in reporters} >= {"sympy", "django", "unittest"}
    for runner in reporters:
        command = runner.command("bin/test -C", ["a/test_x.py"], "/harness/out/r.xml")
        assert incontainer.trusted_path("junit_reporter.py") in command
        # a patch that reaches for the trusted directory is flagged as reaching into the reporter
        assert incontainer.TRUSTED_DIR in runner.internals.replace("\\", "")


def test_no_literal_trusted_path_in_the_code():
    # the one constant lives in harness/incontainer/__init__.py; host code imports it (the
    # in-container files themselves cannot import the harness: they get paths as arguments)
    root = resources.path()
    inside = resources.path("incontainer")
    offenders = [str(p.relative_to(root)) for p in Path(root).rglob("*.py")
                 if incontainer.TRUSTED_DIR in p.read_text(errors="replace") and inside not in p.parents]
    assert offenders == []


def test_a_changed_trusted_file_changes_the_grading_key(monkeypatch):
    config = RunConfig(run_id="r", output_dir=Path("/nonexistent"), cache_dir=Path("/nonexistent"))
    before = config.grading_key()
    changed = {**incontainer.files(), "py/junit_reporter.py": b"# another reporter\n"}
    monkeypatch.setattr(incontainer, "files", lambda: changed)
    assert config.grading_key() != before


def test_the_site_hook_is_one_import_line_that_does_nothing_without_activation(tmp_path):
    path, content = incontainer.site_hook("/opt/miniconda3/envs/testbed/lib/python3.9/site-packages/")
    assert path == f"/opt/miniconda3/envs/testbed/lib/python3.9/site-packages/{incontainer.SITE_HOOK_NAME}"
    text = content.decode()
    assert text.count("\n") == 1 and text.startswith("import ")    # what site executes from a .pth
    ast.parse(text, feature_version=(3, 6))
    # it runs before any .pth an install adds (site processes them sorted by name)
    names = [incontainer.SITE_HOOK_NAME, "__editable__.sphinx-5.0.pth", "_virtualenv.pth", "distutils-precedence.pth",
             "easy-install.pth", "0_pkg.pth", "A.pth"]
    assert sorted(names)[0] == incontainer.SITE_HOOK_NAME
    # processed by site itself: without the activation file nothing is loaded and nothing printed
    (tmp_path / incontainer.SITE_HOOK_NAME).write_bytes(content)
    probe = f"import site, sys; site.addsitedir({str(tmp_path)!r}); print([m for m in sys.modules if m.startswith('_harness')])"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "[]", "")
    assert not Path(incontainer.ACTIVATION).exists()   # (the host has none: the check above means something)
