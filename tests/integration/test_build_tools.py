"""The builder's virtual environment of build tools is installed once per (builder image,
tools lock) and mounted read-only into every job (harness.engine.builder): a tree's metadata
read twice installs the tools once, reads the same requirements both times, and neither a
job's writes nor its set-up steps reach the kept venv or the export the tree came from.

Real parts: the index, the network-less builder container of Python 3.11."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.engine.builder import Builder
from harness.engine.images import ImageBuilder
from harness.errors import ImageBuildError
from harness.preparation.index import Target
from harness.preparation.requirements import Req
from harness.preparation.wheelhouse import Wheelhouse

pytestmark = pytest.mark.engine

TOOLS = [Req("pip==24.2", "test"), Req("setuptools==69.5.1", "test"), Req("wheel==0.43.0", "test")]
SETUP_PY = """from setuptools import setup
import platform
setup(name="computed", version="1.2", py_modules=["computed"],
      install_requires=["six>=1.10"] + (["attrs"] if platform.system() == "Linux" else []))
"""


def _builder_images(engine, cache_dir: Path, tmp_path: Path):
    """The session's interpreter and builder image (made in the session's cache, found by
    content), with a cache of this test's own for the kept build tools."""
    session = ImageBuilder(engine, cache_dir)
    interpreter = session.interpreter("3.11")
    session.builder(interpreter)
    return ImageBuilder(engine, tmp_path / "cache"), interpreter


def _snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*")) if not p.is_symlink()}


def test_the_build_tools_are_installed_once_and_no_job_changes_them(tmp_path, engine, cache_dir):
    images, interpreter = _builder_images(engine, cache_dir, tmp_path)
    target = Target(interpreter.version, images.bases.glibc.get(interpreter.suite, "2.17"))
    builder = Builder(images, interpreter)
    tools = Wheelhouse(tmp_path / "houses").lock(target, TOOLS, TOOLS, builder)   # as the preparer locks them
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "setup.py").write_text(SETUP_PY)
    (tree / "computed.py").write_text("X = 1\n")
    before_tree = _snapshot(tree)

    first = builder.tree_metadata(tree, tools.wheel_dir, tools.lock_text, "setuptools.build_meta:__legacy__", "",
                                  [], {})
    [kept] = [p for p in (images.cache_dir / "build-tools").iterdir()]
    assert (kept / "COMPLETE").is_file() and (kept / "venv" / "bin" / "python").is_file()
    venv_before = _snapshot(kept / "venv")
    # a set-up step writes into its copy of the tree: the export is not touched
    second = builder.tree_metadata(tree, tools.wheel_dir, tools.lock_text, "setuptools.build_meta:__legacy__", "",
                                   ["echo 'X = 2' > computed.py", "touch added-by-prepare"], {})
    assert (first.name, first.version) == (second.name, second.version) == ("computed", "1.2")
    assert set(first.requires_dist) == set(second.requires_dist) == {"six >=1.10", "attrs"}
    assert "installed once, mounted read-only" in second.log
    assert [p.name for p in (images.cache_dir / "build-tools").iterdir()] == [kept.name]   # not installed again
    assert _snapshot(tree) == before_tree

    # a job that writes into the venv fails there, and the next job finds it as it was
    with pytest.raises(ImageBuildError):
        builder.tree_metadata(tree, tools.wheel_dir, tools.lock_text, "setuptools.build_meta:__legacy__", "",
                              ["echo forged > /venv/bin/activate", "touch /venv/planted"], {})
    assert _snapshot(kept / "venv") == venv_before
    third = builder.tree_metadata(tree, tools.wheel_dir, tools.lock_text, "setuptools.build_meta:__legacy__", "",
                                  [], {})
    assert set(third.requires_dist) == {"six >=1.10", "attrs"}


def test_an_unfinished_tools_directory_is_never_used(tmp_path, engine, cache_dir):
    images, interpreter = _builder_images(engine, cache_dir, tmp_path)
    target = Target(interpreter.version, images.bases.glibc.get(interpreter.suite, "2.17"))
    builder = Builder(images, interpreter)
    tools = Wheelhouse(tmp_path / "houses").lock(target, TOOLS, TOOLS, builder)   # as the preparer locks them
    venv, _ = builder.tools_venv(tools.wheel_dir, tools.lock_text)
    kept = venv.parent
    # a directory left without its COMPLETE marker (an interrupted install) is made again
    (kept / "COMPLETE").unlink()
    (venv / "bin" / "python").unlink()
    venv_again, log = builder.tools_venv(tools.wheel_dir, tools.lock_text)
    assert venv_again == venv and (venv / "bin" / "python").is_file() and (kept / "COMPLETE").is_file()
    assert f"# build tools: {kept.name} " in log
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".")]   # no staging left behind
