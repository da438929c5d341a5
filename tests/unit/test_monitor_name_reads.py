"""``sys._getframe`` in typing, collections.namedtuple and enum reads the caller's module name
and nothing else (_harness_genuine.NAME_READERS): such a call is the library's own work and
is not sent, while a frame the model code takes itself, or through a library that hands it
back (inspect.currentframe), still is."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from harness.incontainer import _harness_genuine as genuine
from harness.integrity.attribution import asked_by_model
from harness.integrity.evidence import parse_evidence
from tests.unit.test_monitor_attribution import INTERPRETERS, MODEL, run_case

#: ``sys._getframe(<depth>).f_globals`` then ``.get('__name__'`` or ``['__name__']``
NAME_READ = re.compile(r"""_getframe\([^()]*\)\.f_globals(?:\.get\(\s*['"]__name__['"]|\[\s*['"]__name__['"]\s*\])""")


def _stdlibs() -> dict[str, Path]:
    """Every standard library this host holds: pyenv's builds and Debian's."""
    found = {}
    for root in [*Path("/root/.pyenv/versions").glob("3.*/lib/python3.*"), *Path("/usr/lib").glob("python3.*")]:
        if (root / "typing.py").is_file():
            version = root.name.removeprefix("python")
            found.setdefault(version, root)
    return found


STDLIBS = _stdlibs()
#: those the premise is claimed for (an interpreter outside it exempts nothing)
CHECKED = sorted(v for v in STDLIBS if genuine.NAME_READERS_CHECKED[0] <= tuple(map(int, v.split(".")))
                 <= genuine.NAME_READERS_CHECKED[1])


def test_every_checked_python_from_the_first_to_the_last_is_held_here():
    low, high = genuine.NAME_READERS_CHECKED
    held = {tuple(map(int, v.split("."))) for v in STDLIBS}
    wanted = {(3, minor) for minor in range(low[1], high[1] + 1)}
    assert wanted <= held, f"pyenv lacks {sorted(wanted - held)}: the premise is read from each"


@pytest.mark.parametrize("version", CHECKED)
def test_every_getframe_call_of_the_name_readers_reads_a_module_name_only(version):
    root = STDLIBS[version]
    calls = 0
    for name in genuine.NAME_READERS:
        for number, line in enumerate((root / name).read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if "_getframe(" in code:
                calls += 1
                assert NAME_READ.search(code), f"{root / name}:{number}: {line.strip()}"
    assert calls or tuple(map(int, version.split("."))) >= (3, 12), f"no sys._getframe call read in Python {version}'s {genuine.NAME_READERS}"


SOURCE = textwrap.dedent("""\
    import collections, enum, inspect, sys, typing
    T = typing.TypeVar("T")
    class Pair(typing.NamedTuple):
        x: int
    Point = collections.namedtuple("Point", "x y")
    Colour = enum.Enum("Colour", "red green")
    frame = sys._getframe()
    handed = inspect.currentframe()
""")


@pytest.mark.parametrize("python", sorted(INTERPRETERS))
def test_a_module_name_read_for_the_model_is_not_sent_and_a_frame_it_takes_is(tmp_path, python):
    ev = parse_evidence(b"{}", run_case(tmp_path, SOURCE, INTERPRETERS[python]))
    assert ev.boot is not None and ev.boot["monitor"] is True
    taken = [e for e in ev.events if e["event"] == "sys._getframe"]
    assert {e["chain"][-1][1] for e in taken} == {7, 8}, [(e["file"], e["line"], e["chain"]) for e in taken]
    assert all(asked_by_model(e, MODEL, tamper_class=False) for e in taken)


def test_a_working_copy_file_named_like_a_name_reader_is_not_one(tmp_path):
    # lib/typing.py under the testbed is the model's, not the standard library's
    source = textwrap.dedent("""\
        import os
        with open(os.path.join(os.path.dirname(__file__), "typing.py"), "w") as out:
            out.write("import sys\\ndef _caller():\\n    return sys._getframe(1)\\n")
        from lib import typing
        frame = typing._caller()
    """)
    ev = parse_evidence(b"{}", run_case(tmp_path, source))
    taken = [e for e in ev.events if e["event"] == "sys._getframe"]
    assert [(e["file"].rsplit("/", 2)[-2:], e["line"]) for e in taken] == [(["lib", "typing.py"], 3)], taken
