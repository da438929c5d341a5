"""The harness package's imports form no circle and rise no higher than docs/ARCHITECTURE.md
allows (scripts/import_graph.py draws them with ast): a module that imports back up the
pipeline, even inside a function or for a type only, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.scripts import loaded_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph():
    with loaded_script("import_graph") as module:
        yield module


#: Upward imports the package may hold: docs/ARCHITECTURE.md section 3 lists them (none).
UPWARD_ALLOWANCE = 0


def test_the_harness_package_has_no_import_circle(graph):
    assert graph.circles(ROOT / "harness") == []


def test_every_module_of_the_package_has_a_layer(graph):
    assert graph.unplaced(ROOT / "harness") == []


def test_the_package_holds_no_more_upward_imports_than_documented(graph):
    rising = graph.upward(ROOT / "harness")
    assert len(rising) <= UPWARD_ALLOWANCE, "\n".join(
        f"{e.source} -> {e.target} [{e.kind}, line {e.line}]" for e in rising)


def test_the_documented_layer_table_is_the_checked_one(graph):
    """docs/ARCHITECTURE.md section 2 names each layer's modules; the check uses the same table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## 2.", 1)[1].split("\n## ", 1)[0]
    documented = []
    for row in re.findall(r"^\| (\d+) ([^|]+?) \| ([^|]+) \|", section, re.M):
        names = tuple(name.rstrip("/").replace("/", ".") for name in re.findall(r"`([^`]+)`", row[2]))
        documented.append((int(row[0]), row[1].strip(), names))
    assert documented == [(n, name, members) for n, (name, members) in enumerate(graph.LAYERS)]


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


def test_an_import_of_a_higher_layer_is_upward_whatever_its_kind(tmp_path, graph):
    package = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "def f():\n    from pkg import high\n",                       # function-level, upward
        "high.py": "from pkg import low\n",                                      # downward
        "lib/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.lib import top\n",
        "lib/top.py": "from pkg import high\n",       # its own entry puts it above lib/: downward
        "stray.py": "from pkg import high\n",        # in no layer: named by unplaced, not counted
    })
    table = (("bottom", ("low", "lib")), ("middle", ("high", "__init__")), ("top", ("lib.top",)))
    assert graph.layer_of("pkg", "pkg", table) == 1 and graph.layer_of("pkg.lib.top", "pkg", table) == 2
    assert graph.unplaced(package, table) == ["pkg.stray"]
    assert [(e.source, e.target, e.kind) for e in graph.upward(package, table)] == [
        ("pkg.lib", "pkg.lib.top", "typing"), ("pkg.low", "pkg.high", "function")]
