"""A failed resolution says what to change in the spec (harness.preparation.resolution_fixes): pins
newer than ``resolve_as_of`` and a tree's build requirements against the installer's pins.
The resolver outputs are uv's own (0.13), captured from these requirement sets."""

from __future__ import annotations

from harness.preparation.index import Target
from harness.preparation.requirements import Req, failing_package
from harness.preparation.resolution_fixes import fixes
from harness.preparation.wheelhouse import failure_message

BASES = "installer pins (images/bases.yaml installer for Python 3.9)"
SPEC_INSTALLER = "spec installer (images/specs/pylint-dev__pylint.yaml (version 2.15))"
TREE_BUILD = "tree [build-system] requires (pyproject.toml)"

TOO_NEW = """warning: The requested Python version 3.9.2 is not available; 3.11.7 will be used to build dependencies instead.
error: No solution found when resolving dependencies
  cause: Because there is no version of pip==24.0 and you require pip==24.0, we can conclude that your requirements are unsatisfiable.

hint: `pip` was filtered by `exclude-newer` to only include packages uploaded before 2020-01-01T00:00:00Z. The requested version, v24.0, was published at 2024-02-03T09:53:09.575Z. Consider using `exclude-newer-package` to override the cutoff for this package.
"""

BUILD_CLASH = """error: No solution found when resolving dependencies
  cause: Because you require wheel==0.44.0 and wheel>=0.37.1,<0.38.dev0, we can conclude that your requirements are unsatisfiable.
"""


class Releases:
    """A few real release facts of PyPI (upload dates, newest releases before a date)."""

    PUBLISHED = {("pip", "24.0"): "2024-02-03", ("setuptools", "69.5.1"): "2024-04-13",
                 ("wheel", "0.43.0"): "2024-03-11", ("attrs", "23.1.0"): "2023-04-16"}
    BEFORE = {("pip", "2020-01-01", ""): "19.3.1", ("setuptools", "2020-01-01", ""): "44.0.0",
              ("wheel", "2020-01-01", ""): "0.33.6", ("setuptools", "2024-11-01", "~=62.6"): "62.6.0",
              ("wheel", "2024-11-01", "~=0.37.1"): "0.37.1"}

    def published(self, name, version):
        return self.PUBLISHED.get((name, version))

    def newest_before(self, name, as_of, allowed=""):
        return self.BEFORE.get((name, as_of, allowed))


def installer(origin, pip="pip==24.0", setuptools="setuptools==69.5.1", wheel="wheel==0.43.0"):
    return [Req(pip, origin), Req(setuptools, origin), Req(wheel, origin)]


def test_failing_package_is_the_package_not_a_word_of_the_sentence():
    assert failing_package(TOO_NEW) == "pip"
    assert failing_package(BUILD_CLASH) == "wheel"


def test_installer_pins_newer_than_resolve_as_of_say_to_set_installer_with_releases_of_then():
    requirements = [*installer(BASES), Req("attrs", "spec requirements (x.yaml (version 1))")]
    found = fixes(TOO_NEW, requirements, "2020-01-01", "3.9.2", Releases())
    assert len(found) == 1
    sentence = found[0]
    # every tool newer than the date, not only the one the resolver names
    for pin, date in (("pip==24.0", "2024-02-03"), ("setuptools==69.5.1", "2024-04-13"),
                      ("wheel==0.43.0", "2024-03-11")):
        assert f"{pin} (published {date})" in sentence
    assert BASES in sentence and "resolve_as_of 2020-01-01" in sentence
    assert "`installer: [pip==19.3.1, setuptools==44.0.0, wheel==0.33.6]`" in sentence
    assert "move resolve_as_of to 2024-04-13 or later" in sentence


def test_without_index_facts_the_resolvers_own_hint_still_gives_the_fix():
    found = fixes(TOO_NEW, installer(BASES), "2020-01-01", "3.9.2", None)
    assert len(found) == 1
    assert "pip==24.0 (published 2024-02-03)" in found[0]
    assert "`installer: [pip==<a release before 2020-01-01>, setuptools==69.5.1, wheel==0.43.0]`" in found[0]


def test_a_spec_pin_newer_than_resolve_as_of_says_to_pin_an_older_release():
    output = TOO_NEW.replace("pip", "attrs").replace("24.0", "23.1.0").replace("2024-02-03T09:53", "2023-04-16T10:1")
    found = fixes(output, [*installer(BASES, "pip==19.3.1", "setuptools==44.0.0", "wheel==0.33.6"),
                           Req("attrs==23.1.0", "spec requirements (x.yaml (version 1))")],
                  "2020-01-01", "3.9.2", None)
    assert found == ["attrs==23.1.0 (spec requirements (x.yaml (version 1))) was published on 2023-04-16, after "
                     "the spec's resolve_as_of 2020-01-01: pin a release of before then in the spec, or move "
                     "resolve_as_of to 2023-04-16 or later"]


def test_tree_build_requirements_against_installer_pins_name_both_and_both_fixes():
    requirements = [*installer(SPEC_INSTALLER, "pip==24.2", "setuptools==75.1.0", "wheel==0.44.0"),
                    Req("setuptools~=62.6", TREE_BUILD), Req("wheel~=0.37.1", TREE_BUILD)]
    found = fixes(BUILD_CLASH, requirements, "2024-11-01", "3.9.2", Releases())
    assert len(found) == 1
    sentence = found[0]
    # the resolver names wheel only; setuptools clashes as well and is named too
    assert sentence.startswith("the tree's [build-system] requires 'setuptools~=62.6', 'wheel~=0.37.1' exclude ")
    assert f"'setuptools==75.1.0' ({SPEC_INSTALLER})" in sentence and f"'wheel==0.44.0' ({SPEC_INSTALLER})" in sentence
    assert "`build_requires: []`" in sentence
    assert "pin setuptools==62.6.0, wheel==0.37.1 in the spec's `installer:`" in sentence


def test_a_build_requirement_the_installer_satisfies_is_no_clash():
    requirements = [*installer(BASES), Req("setuptools>=40", TREE_BUILD), Req("wheel", TREE_BUILD),
                    Req("setuptools<60; python_version < '3.6'", TREE_BUILD)]
    assert fixes(BUILD_CLASH, requirements, "", "3.9.2", Releases()) == []


def test_a_tree_requirement_against_a_spec_pin_suggests_yield_to_tree():
    output = "  cause: Because you require astroid==2.11.3 and astroid<=2.10.0.dev0, we can conclude ...\n"
    found = fixes(output, [Req("astroid==2.11.3", "spec requirements (p.yaml (version 2.13))"),
                           Req("astroid<=2.10.0-dev0", "tree metadata Requires-Dist of pylint 2.13.0")],
                  "", "3.9.2", None)
    assert len(found) == 1 and "`yield_to_tree:`" in found[0] and "'astroid<=2.10.0-dev0'" in found[0]


def test_the_failure_message_leads_with_the_fix_and_drops_uvs_advice_about_its_own_option():
    message = failure_message(Target("3.9.2", "2.31"), installer(BASES), TOO_NEW, [], "2020-01-01", Releases())
    assert message.startswith("resolving requirements for Python 3.9.2 failed at package pip. To fix: the "
                              "installer pins")
    assert "exclude-newer-package" not in message
    assert "Because there is no version of pip==24.0" in message       # the resolver's explanation, whole
    assert f"pip: 'pip==24.0' from {BASES}" in message                   # the side with its origin
