"""Wheels are fetched or built once per content and shared by every wheelhouse of the cache
(harness.preparation.wheelhouse):

* a wheel built from an sdist (``sdist-wheels/``): a second requirement set that pins the same
  sources-only release takes the first build's wheel, so its lock holds the same sha256 (a build
  is not reproducible: before, each set built it again and locked a wheel of its own);
* a downloaded wheel: a second wheelhouse of the same target links the file the first one
  downloaded and locked, and downloads only what it lacks.

Real parts: the index, the network-less builder container of Python 3.11."""

from __future__ import annotations

import re

from harness.engine.builder import Builder
from harness.engine.images import ImageBuilder
from harness.hashing import file_sha256
from harness.preparation.index import Target
from harness.preparation.requirements import Req
from harness.preparation.wheelhouse import SDIST_WHEELS, Wheelhouse

#: docopt 0.6.2 exists only as an sdist; the tools are the build venv's (pip included, as the preparer gives them)
TOOLS = [Req("pip==24.2", "test"), Req("setuptools==69.5.1", "test"), Req("wheel==0.43.0", "test")]


def _locked(house, name: str) -> str:
    return next(line for line in house.lock_text.splitlines() if line.startswith(f"{name}=="))


def test_a_wheel_built_from_an_sdist_is_shared_by_the_next_requirement_set(tmp_path, engine, cache_dir):
    images = ImageBuilder(engine, cache_dir)          # the session's bases and interpreters
    interpreter = images.interpreter("3.11")
    target = Target(interpreter.version, images.bases.glibc.get(interpreter.suite, "2.17"))
    wheelhouse = Wheelhouse(tmp_path)                 # wheelhouses and sdist builds of this test alone
    builder = Builder(images, interpreter)
    first = wheelhouse.lock(target, [Req("docopt==0.6.2", "test")], TOOLS, builder)
    assert "# built from sdists: docopt-0.6.2.tar.gz" in first.resolver_log.read_text()
    second = wheelhouse.lock(target, [Req("docopt==0.6.2", "test"), Req("six==1.16.0", "test")], TOOLS, builder)
    assert second.directory != first.directory
    log = second.resolver_log.read_text()
    assert re.search(r"# built from sdists earlier .*: docopt==0\.6\.2", log), log
    assert "# built from sdists: " not in log
    assert _locked(second, "docopt") == _locked(first, "docopt")
    # what is kept is checked: a kept wheel that changed is built again, never used
    [store] = [p for p in (tmp_path / SDIST_WHEELS).iterdir() if not p.name.startswith(".")]
    [kept] = list(store.glob("*.whl"))
    kept.write_bytes(kept.read_bytes() + b"\0")
    third = wheelhouse.lock(target, [Req("docopt==0.6.2", "test"), Req("six==1.15.0", "test")], TOOLS, builder)
    assert "# built from sdists: docopt-0.6.2.tar.gz" in third.resolver_log.read_text()
    # and the store holds that new build again, not the changed file
    assert file_sha256(kept) == _locked(third, "docopt").split("sha256:")[1]


def test_a_downloaded_wheel_is_taken_from_another_wheelhouse_of_the_same_target(tmp_path):
    target = Target("3.11.2", "2.36")
    wheelhouse = Wheelhouse(tmp_path)
    first = wheelhouse.lock(target, [Req("six==1.16.0", "test"), Req("iniconfig==2.0.0", "test")], [])
    second = wheelhouse.lock(target, [Req("six==1.16.0", "test"), Req("attrs==23.1.0", "test")], [])
    log = second.resolver_log.read_text()
    assert "(the same file name, the sha256 locked there): six==1.16.0" in log, log
    [download] = [line for line in log.splitlines() if line.startswith("$ ") and " download " in line]
    assert download.endswith(" attrs==23.1.0")
    assert _locked(second, "six") == _locked(first, "six")
    # another target's wheelhouse takes nothing from these
    other = wheelhouse.lock(Target("3.11.2", "2.31"), [Req("six==1.16.0", "test")], [])
    assert "downloaded earlier by another wheelhouse" not in other.resolver_log.read_text()
    # a file that is no longer the one locked is not taken: it is downloaded again
    for house in (first, second, other):
        wheel = next(house.wheel_dir.glob("six-*.whl"))
        wheel.unlink()
        wheel.write_bytes(b"changed")
    third = wheelhouse.lock(target, [Req("six==1.16.0", "test"), Req("packaging==23.1", "test")], [])
    assert "downloaded earlier by another wheelhouse" not in third.resolver_log.read_text()
    assert _locked(third, "six") == _locked(first, "six")
