"""The harness package's imports form no circle (scripts/import_graph.py draws them with ast):
a module that imports back up the pipeline, even inside a function, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import loaded_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph():
    with loaded_script("import_graph") as module:
        yield module


def test_the_harness_package_has_no_import_circle(graph):
    assert graph.circles(ROOT / "harness") == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_circle_through_a_function_level_import_is_found(tmp_path, graph):
    package = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import thing\n",
        "b.py": "def thing():\n    from pkg import a\n",
        "sub/__init__.py": "",
        "sub/c.py": "from ..a import thing\n",   # relative, and outside the circle
    })
    assert graph.circles(package) == [["pkg.a", "pkg.b"]]
    assert graph.circles(package, kinds=("module",)) == []
    kinds = {(e.source, e.target): e.kind for e in graph.edges(package)}
    assert kinds == {("pkg.a", "pkg.b"): "module", ("pkg.b", "pkg.a"): "function", ("pkg.sub.c", "pkg.a"): "module"}


def test_a_type_checking_import_is_told_apart_and_still_closes_a_circle(tmp_path, graph):
    package = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",
    })
    assert [e.kind for e in graph.edges(package) if e.source == "pkg.b"] == ["typing"]
    assert graph.circles(package) == [["pkg.a", "pkg.b"]]
    assert graph.circles(package, kinds=("module", "function")) == []
