"""Canaries: must-fail copies of real tests that a forger cannot tell from their originals.

A canary is a copy of a test of the run's test files, placed beside it, under another
name, with ONE token of ONE expected value changed. Nothing in the sandbox says which
tests are canaries: the test patch never enters it, and the plan stays on the host.

**Only where the change fails for sure** (:mod:`~harness.integrity.canaries.sites`). The
changed value is a constant inside the literal side of an exact equality that always
runs: ``assert EXPR == LITERAL`` or ``assertEqual``/``assert_equal``/``assert_array_equal``
and their kin, never inside or beside an approximate comparison (``assert_allclose``,
``pytest.approx``, ``isclose``/``allclose``, ``assertAlmostEqual``, ``assert_almost_equal``,
anything named *close*/*almost*/*approx*, anything given a tolerance keyword), never in a
block that may not run or may swallow the failure. The mutations, and why each fails
whenever its original passes:

* an **integer** becomes another integer with as many digits: a different number, and
  ``==`` between numbers is exact (numpy's integer scalars included);
* a **decimal** becomes another with as many digits on each side of the point and at least
  2% away: a different float that no 16-bit-or-wider float type rounds onto the old one;
* one **word or digit run inside a string** (or bytes) becomes another of the same length
  and case pattern: a string that differs even ignoring case, with the same whitespace and
  punctuation (so case- and space-insensitive equalities still see the change).

Type checks and expected exceptions are never changed: ``raises(OtherError)`` passes
honestly when the library's exception derives from both. What no static rule can see (an
``__eq__`` of the code under test that accepts anything) the reference control proves:
every canary is judged against a run of the reference patch with the same canaries
(:mod:`~harness.integrity.canaries.judge`).

**Indistinguishable** (:mod:`~harness.integrity.canaries.draw`,
:mod:`~harness.integrity.canaries.planting`): the new tokens, value and name word alike,
keep the shape of the old ones and are drawn from the file's own tokens of that shape by
weight (so no direction, magnitude, length or vocabulary sets a canary apart); the line
the change makes exists nowhere in the file or the base commit; the copy goes before or
after its original by a coin flip, with its leading comments, separated as the scope's
tests are. Originals are tests the test patch added, where the base commit has neither
name; tests the base commit has are used only when too few added tests have a site.

**Reproducible**: :func:`plant` takes a seeded ``random.Random``; the seed is recorded
in report.json (``integrity.canary_seed``), and the same files and seed plant the same
canaries byte for byte.
"""

from __future__ import annotations

import random
from typing import Callable, Mapping

from harness.integrity.canaries.judge import (DISPROVED, PROVEN, CanaryVerdict, judge_canaries, judge_perturbations,
                                             proof_from)
from harness.integrity.canaries.planting import Perturb, Planter, SpellId, pytest_id
from harness.integrity.canaries.record import Canary, CanaryPlan, instance_seed
from harness.integrity.canaries.staging import NothingToChange, Staged, stage
from harness.integrity.canaries.sites import Source, default_collects_class

__all__ = ["Canary", "CanaryPlan", "CanaryVerdict", "DISPROVED", "PROVEN", "Planter", "Source", "SpellId", "instance_seed",
           "judge_canaries", "judge_perturbations", "Perturb", "plant", "proof_from", "pytest_id", "NothingToChange", "Staged", "stage"]


def plant(files: Mapping[str, bytes], test_files: list[str], previous: Mapping[str, bytes | None],
          count: int = 3, rng: random.Random | None = None, spell: SpellId = pytest_id,
          styles: tuple[str, ...] = ("function", "method"),
          collects_class: Callable = default_collects_class) -> tuple[dict[str, bytes], list[Canary]]:
    """Plant up to ``count`` canaries in ``files`` (path -> source after the test patch).

    ``previous`` holds each file's source at the base commit (None: a new file). ``spell``
    is the runner's way of writing a test id; ``styles`` the kinds of test it collects
    ("function": module-level functions, e.g. sympy's runner; "method": methods of test
    classes, e.g. unittest), and ``collects_class`` which classes it runs (a canary in a
    class it skips would go missing). Returns the changed files and the canaries (none when
    no test has a site)."""
    planter = Planter(files, test_files, previous, spell, styles, collects_class)
    return planter.draw(count, rng or random.SystemRandom())
