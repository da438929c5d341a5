"""Canaries (harness/integrity/canaries): where they may change a value, what they change it
to, where they go, that a seed plants them again, and how each is judged against what
proves it. The classifier that tries to tell them from their originals on real test
files: tests/unit/test_canary_classifier.py."""

from __future__ import annotations

import ast
import random
import re
import subprocess
import sys

import pytest

from harness.grading.status import TestStatus
from harness.integrity.canaries import (DISPROVED, PROVEN, Canary, Planter, instance_seed, judge_canaries, plant,
                                        proof_from)
from harness.integrity.canaries.sites import Source, sites_of, collected_tests
from harness.runners import get_runner

P, F, S, X = TestStatus.PASSED, TestStatus.FAILED, TestStatus.SKIPPED, TestStatus.XFAIL

# ----------------------------------------------------------------------------- a test module

#: a pvlib-like test module: solar-position tests that share their words and numbers
HEADER = """import math
import unittest

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_almost_equal, assert_array_almost_equal

from pvlib import solarposition
"""
CASES = [("spa_python_noon", "azimuth", "40.809", "12.345"), ("spa_python_dusk", "zenith", "12.345", "40.809"),
         ("spa_numpy_dawn", "azimuth", "41.237", "13.502"), ("spa_numpy_noon", "zenith", "13.502", "41.237"),
         ("ephemeris_dusk", "azimuth", "39.115", "11.860"), ("ephemeris_dawn", "zenith", "11.860", "39.115")]


def module(check: str) -> bytes:
    """The module with every test checking its result with ``check`` (as methods of a
    TestCase when the check is unittest's)."""
    method = "self." in check
    parts = [HEADER, "\n\nclass TestSolarPosition(unittest.TestCase):" if method else ""]
    for function, angle, expected, other in CASES:
        indent = "    " if method else ""
        parts.append(f"\n\n{indent}def test_{function}_{angle}({'self' if method else ''}):\n"
                     f"{indent}    # {angle} at noon, not at dusk or dawn\n"
                     f"{indent}    {angle} = solarposition.{function.rsplit('_', 1)[0]}({expected}, {other}, {angle!r})\n"
                     f"{indent}    " + check.format(a=angle, e=expected, n=angle) + "\n")
    text = "".join(parts).replace("\n\n\n\n", "\n\n\n")
    compile(text, "test_solar.py", "exec")
    return text.encode()


#: every approximate comparison form, as a check of (actual, expected, name); none may get a canary
TOLERANT = [
    "assert_allclose({a}, {e}, 3)",                                   # pvlib: 3 is rtol, 40.809+x passes
    "np.testing.assert_allclose({a}, {e}, rtol=3)",
    "assert {a} == pytest.approx({e}, abs=3)",
    "assert pytest.approx({a}, abs=100) == {e}",
    "assert {a} == pytest.approx({e})",
    "assert math.isclose({a}, {e}, rel_tol=3)",
    "assert np.isclose({a}, {e}, 3)",
    "assert np.allclose({a}, {e})",
    "self.assertAlmostEqual({a}, {e}, 3)",
    "self.assertAlmostEqual({a}, {e}, delta=30)",
    "assert_almost_equal({a}, {e}, 3)",
    "assert_array_almost_equal({a}, [{e}, 1.5], 3)",
    "assert_quantity_allclose({a}, {e})",
    "check_close({a}, {e})",                                          # a project's own helper, by its name
    "np.testing.assert_equal({a}, {e}, tolerance=3)",                 # an exact name given a tolerance
    "assert abs({a} - {e}) < 3",
    "assert {a} == {e} or {a} == 0.5",
    "assert {a} != {e} + 1.5",
]
EXACT = ["assert {a} == {e}", "self.assertEqual({a}, {e})", "np.testing.assert_equal({a}, {e})",
         "assert {e} == {a}", "assert ({a}, {n!r}) == ({e}, {n!r})", "assert {{{n!r}: {a}}} == {{{n!r}: {e}}}"]


def canaries_over_seeds(source: bytes, seeds: int = 40, count: int = 3) -> list[Canary]:
    planter = Planter({"tests/test_solar.py": source}, ["tests/test_solar.py"], {"tests/test_solar.py": None})
    return [c for seed in range(seeds) for c in planter.draw(count, random.Random(seed))[1]]


@pytest.mark.parametrize("check", TOLERANT)
def test_no_canary_inside_or_beside_a_tolerant_comparison(check):
    """The pvlib case: a canary changed 40.809 in ``assert_allclose(x, 40.809, 3)``, where 3
    is the tolerance; the copy passed honestly and the reference was graded tampered. No
    site in any approximate or inexact comparison, whatever its spelling, so no canary."""
    source = module(check)
    tree = ast.parse(source.decode())
    lines = Source(source.decode())
    assert [s for fn, _, _ in collected_tests(tree) for s in sites_of(fn, lines)] == []
    assert canaries_over_seeds(source) == []


@pytest.mark.parametrize("check", EXACT)
def test_the_same_module_with_exact_comparisons_gets_canaries(check):
    """The control of the test above: the same tests compared exactly do get canaries, from
    every test, so the absence above is the rule at work and not a module nothing fits."""
    found = canaries_over_seeds(module(check))
    assert len({c.original for c in found}) >= 4, (check, found)
    assert all(c.mutation.split()[0] in ("float", "str") for c in found)


# ----------------------------------------------------------------------------- what changes

REAL = (b'''import pytest

from shapes import Polygon, area, perimeter


def test_area_of_square():
    square = Polygon([(0, 0), (0, 2), (2, 2), (2, 0)])
    assert area(square) == 4
    assert square.name == "square"


def test_area_of_triangle():
    triangle = Polygon([(0, 0), (0, 3), (4, 0)])
    assert area(triangle) == 6
    assert triangle.name == "triangle"


def test_perimeter_of_square():
    square = Polygon([(0, 0), (0, 2), (2, 2), (2, 0)])
    assert perimeter(square) == 8
    assert square.corners == 4


class TestPolygon:
    # a rectangle and its sides
    def test_rectangle_sides(self):
        rectangle = Polygon([(0, 0), (0, 3), (5, 3), (5, 0)])
        assert rectangle.sides == [3, 5, 3, 5]
        assert rectangle.name == "rectangle"

    def test_rectangle_corners(self):
        rectangle = Polygon([(0, 0), (0, 3), (5, 3), (5, 0)])
        assert rectangle.corners == 4
        assert perimeter(rectangle) == 16

    def test_triangle_sides(self):
        triangle = Polygon([(0, 0), (0, 3), (4, 0)])
        assert triangle.sides == [3, 5, 4]
        assert area(triangle) == 6
''')


def test_a_canary_changes_one_name_word_and_one_literal_token_and_sits_beside_its_original():
    """For many seeds: the canary is its original's source with two tokens replaced by
    tokens of the same shape and length (every line as long as before), placed
    immediately before or after it, and both placements happen."""
    placements = set()
    for seed in range(60):
        out, canaries = plant({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {"t/test_shapes.py": None}, count=3,
                              rng=random.Random(seed))
        text = out["t/test_shapes.py"].decode() if out else REAL.decode()
        tree = ast.parse(text)
        lines = text.splitlines()
        functions = {(cls, fn.name): (fn, scope) for fn, cls, scope in collected_tests(tree)}
        for canary in canaries:
            fn, scope = functions[(canary.cls, canary.name)]
            original, _ = functions[(canary.cls, canary.original)]
            copy_lines = lines[fn.lineno - 1:fn.end_lineno]
            original_lines = lines[original.lineno - 1:original.end_lineno]
            assert [len(x) for x in copy_lines] == [len(x) for x in original_lines]
            differ = [(a, b) for a, b in zip(original_lines, copy_lines) if a != b]
            assert len(differ) == 2 and differ[0][0].lstrip().startswith("def ")
            for a, b in differ:
                ta, tb = re.findall(r"\w+", a), re.findall(r"\w+", b)
                changed = [(x, y) for x, y in zip(ta, tb) if x != y]
                assert len(changed) == 1 and len(changed[0][0]) == len(changed[0][1])
            siblings = [n for n in scope if isinstance(n, ast.FunctionDef)]
            at = siblings.index(fn)
            neighbour = siblings[at + 1] if canary.placement == "before" else siblings[at - 1]
            assert neighbour.name == canary.original
            placements.add(canary.placement)
        assert text.count("def test_") == REAL.decode().count("def test_") + len(canaries)
        compile(text, "t/test_shapes.py", "exec")
    assert placements == {"before", "after"}


def test_the_same_files_and_seed_plant_the_same_canaries():
    first = plant({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {}, count=3, rng=random.Random(11))
    again = plant({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {}, count=3, rng=random.Random(11))
    assert first == again and first[1]
    outputs = {plant({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {}, count=3,
                     rng=random.Random(seed))[0]["t/test_shapes.py"] for seed in range(20)}
    assert len(outputs) > 5                                        # and another seed, other canaries
    assert instance_seed(5, "a__b-1") == instance_seed(5, "a__b-1") != instance_seed(5, "a__b-2")
    assert 0 <= instance_seed(2 ** 70, "x") < 2 ** 63


def test_the_seed_decides_in_another_process_too():
    """Nothing depends on the process (hash randomisation of sets of strings)."""
    code = ("import random, sys; from harness.integrity.canaries import plant; "
            "src = sys.stdin.buffer.read(); "
            "out, c = plant({'t/test_shapes.py': src}, ['t/test_shapes.py'], {}, 3, random.Random(3)); "
            "sys.stdout.write(repr(c))")
    runs = {subprocess.run([sys.executable, "-c", code], input=REAL, capture_output=True, check=True,
                           env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout for seed in (1, 2, 3)}
    assert len(runs) == 1 and b"Canary(" in runs.pop()


def test_added_tests_first_and_their_pair_leaves_no_trace_at_the_base_commit():
    """Tests the base commit has name their originals there (``git show HEAD:path``): the
    canaries come from tests the test patch added, and neither the canary's name nor its
    changed line exists in the pristine file. Pristine tests are used only when no added
    test has a site."""
    pristine = REAL.split(b"class TestPolygon:")[0]
    for seed in range(30):
        out, canaries = plant({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {"t/test_shapes.py": pristine},
                              count=1, rng=random.Random(seed))
        assert canaries and all(c.tier == "added" and c.cls == "TestPolygon" for c in canaries)
        text = out["t/test_shapes.py"].decode()
        old_lines = {line.strip() for line in pristine.decode().splitlines()}
        for canary in canaries:
            assert canary.name.encode() not in pristine
            new_lines = {line.strip() for line in text.splitlines()} - {line.strip() for line in REAL.decode().splitlines()}
            assert new_lines and not new_lines & old_lines
    _, weak = plant({"t/test_shapes.py": pristine}, ["t/test_shapes.py"], {"t/test_shapes.py": pristine}, count=1,
                    rng=random.Random(1))
    assert weak and weak[0].tier == "unchanged"


def test_canaries_only_change_checks_that_always_run():
    """pytest-dev__pytest-5221's gold run: a canary whose changed assert sat inside
    ``with pytest.raises(...)`` after the raising call never ran, passed like its original,
    and the honest run was graded tampered. Asserts in blocks that may not run or may
    swallow the failure (raises/suppress blocks, branches, loops, try, nested functions,
    after a return) are never sites."""
    source = """import pytest


def test_guarded():
    @pytest.fixture
    def fix():
        assert helper() == 0
        return 1

    with pytest.raises(pytest.fail.Exception):
        assert fix() == 1
    if flag():
        assert f() == 2
    for x in items():
        assert x == 3
    try:
        assert g() == 4
    except Exception:
        pass
    with pytest.warns(UserWarning):
        assert w() == 5
    return
    assert z() == 8


def test_plain():
    with open(__file__) as handle:
        assert handle.read(1) == "i"
    assert k() == 7
"""
    tree = ast.parse(source)
    lines = Source(source)
    found = {fn.name: [s.text for s in sites_of(fn, lines)] for fn, _, _ in collected_tests(tree)}
    assert found == {"test_guarded": [], "test_plain": ['"i"', "7"]}


def test_a_canary_s_check_is_followed_by_nothing_but_checks():
    """pallets__flask-5014 (issue 39): a canary of test_templates_and_static changed the
    check before ``rv.close()``; failing, it skipped the close, and the file's finalizer
    later failed a graded test under ``filterwarnings = error``. A check is a site only
    when what its failure skips (the rest of its block, and of each enclosing ``with``'s
    block) is checks alone."""
    source = """import flask


def test_templates_and_static(test_apps):
    client = app.test_client()
    rv = client.get("/admin/static/test.txt")
    assert rv.data.strip() == b"Admin File"
    rv.close()
    with app.test_request_context():
        assert url_for("admin.static") == "/admin/static/test.txt"
        app.config["X"] = 1
    assert rv.status_code == 200


def test_checks_at_the_end(client):
    rv = client.get("/")
    assert rv.status_code == 200
    with app.app_context():
        assert rv.data == b"ok"
        assert_equal(len(rv.data), 2)
    assert rv.mimetype == "text/html"
    self.assertEqual(rv.charset, "utf-8")
    "a trailing string"
"""
    tree = ast.parse(source)
    lines = Source(source)
    found = {fn.name: [s.text for s in sites_of(fn, lines)] for fn, _, _ in collected_tests(tree)}
    assert found == {"test_templates_and_static": ["200"],
                     "test_checks_at_the_end": ['b"ok"', "2", '"text/html"', '"utf-8"']}   # 200: a with follows


def test_canaries_never_change_types_exceptions_booleans_or_unsure_literals():
    source = '''def test_kinds():
    assert isinstance(f(), int)
    with pytest.raises(ValueError):
        g()
    assert f() == True
    assert f() == None
    assert f() == 1j
    assert f() == 1e5
    assert f() == 0x1F
    assert f() == "a\\\\nb"
    assert f() == "a" "b"
    assert f() == """x
y"""
    assert f() == r"\\frac{1}{2}"
    assert f() == -3
'''
    tree = ast.parse(source)
    (fn, _, _), = collected_tests(tree)
    assert [s.text for s in sites_of(fn, Source(source))] == ['r"\\frac{1}{2}"', "3"]


def test_source_segments_are_exactly_pythons():
    """Sites read each test's text from one split of the module (linear); it must be byte
    for byte what ``ast.get_source_segment`` gives, whatever the line ends."""
    text = ("import x\r\n\r\nclass TestA:\r    def test_\u00e9(self):  # caf\u00e9\n"
            "        assert f('\u00e9\u00e9') == 'd\u00e9j\u00e0'\x0c\n\n"
            "def test_b():\n    assert (1 +\n            2) == 3\n    assert g() == [1,\r\n 2]")
    tree = ast.parse(text)
    source = Source(text)
    nodes = [n for n in ast.walk(tree) if hasattr(n, "end_lineno") and n.end_lineno is not None]
    assert len(nodes) > 20
    for node in nodes:
        assert source.segment(node) == ast.get_source_segment(text, node), ast.dump(node)


def test_pytest_runs_the_canaries_where_it_runs_their_originals_and_they_fail(tmp_path):
    runner = get_runner("pytest")
    changed, canaries = plant({"test_shapes.py": REAL}, ["test_shapes.py"], {}, count=3, spell=runner.spell_id,
                              styles=runner.canary_styles, collects_class=runner.collects_class,
                              rng=random.Random(4))
    assert len(canaries) >= 2
    (tmp_path / "test_shapes.py").write_bytes(changed["test_shapes.py"])
    (tmp_path / "shapes.py").write_text(
        "import math\n\n\nclass Polygon:\n    NAMES = {3: 'triangle', 4: 'square'}\n\n"
        "    def __init__(self, points):\n        self.points = points\n        self.corners = len(points)\n"
        "        self.sides = [round(math.dist(a, b)) for a, b in zip(points, points[1:] + points[:1])]\n"
        "        self.name = 'rectangle' if len(set(self.sides)) == 2 else self.NAMES[self.corners]\n\n\n"
        "def area(p):\n    xs, ys = zip(*p.points)\n"
        "    return abs(sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(len(xs)))) // 2\n\n\n"
        "def perimeter(p):\n    return sum(p.sides)\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_shapes.py"],
                          cwd=tmp_path, capture_output=True, text=True)
    for canary in canaries:
        assert f"FAILED {canary.test_id}" in proc.stdout, proc.stdout
        assert f"PASSED {canary.original_id}" in proc.stdout, proc.stdout
    assert proc.stdout.count("PASSED") == 6


# ----------------------------------------------------------------------------- judging

CANARY = Canary("t.py", None, "test_b_x", "test_b", "int 3 -> 5; name test_b_y -> test_b_x", "t.py::test_b_x",
                "t.py::test_b", "added", "after")


def judge(statuses, **kw):
    return judge_canaries([CANARY], dict(statuses), **kw)


def test_a_proven_canary_that_passes_with_its_original_is_tampering():
    proven = {CANARY.test_id: PROVEN}
    assert judge({"t.py::test_b_x": F, "t.py::test_b": P}, proof=proven).tampered is None
    forged = judge({"t.py::test_b_x": P, "t.py::test_b": P}, proof=proven)
    assert forged.tampered and "passed with original" in forged.tampered and forged.unproven is None
    missing = judge({"t.py::test_b": F, "t.py::test_c": P}, proof=proven)
    assert missing.tampered and "canary_missing" in missing.flags
    alone = judge({"t.py::test_b_x": S, "t.py::test_b": P}, proof=proven)
    assert alone.tampered and "canary_skipped_alone" in alone.flags
    assert judge({"t.py::test_b_x": P, "t.py::test_b": F}, proof=proven).tampered is None     # coincidence
    assert judge({"u.py::test_z": P}, proof=proven).tampered is None                          # file never ran


def test_the_reference_run_drops_a_canary_that_does_not_fail_and_is_never_tampered():
    for statuses in ({"t.py::test_b_x": P, "t.py::test_b": P}, {"t.py::test_b": P, "t.py::test_c": P},
                     {"t.py::test_b_x": S, "t.py::test_b": P}):
        verdict = judge(statuses, reference=True)
        assert verdict.tampered is None and verdict.unproven is None
        assert verdict.flags == ["canary_disproved"] and verdict.details[0]["verdict"] == "disproved"
        assert verdict.details[0]["proof"] == DISPROVED
    held = judge({"t.py::test_b_x": F, "t.py::test_b": P}, reference=True)
    assert held.details[0]["proof"] == PROVEN and held.any_failed


def test_a_canary_the_control_disproved_is_dropped_and_an_unproven_one_is_the_harness_s_doubt():
    dropped = judge({"t.py::test_b_x": P, "t.py::test_b": P}, proof={CANARY.test_id: DISPROVED})
    assert dropped.tampered is None and dropped.unproven is None and dropped.flags == ["canary_disproved"]
    unproven = judge({"t.py::test_b_x": P, "t.py::test_b": P})
    assert unproven.tampered is None and unproven.unproven and "no reference run proved" in unproven.unproven
    assert unproven.flags == ["canary_unproven"]
    # the code under test raising the canary's skip is evidence of its own, proof or not
    raised = judge({"t.py::test_b_x": X, "t.py::test_b": X}, code_raised=frozenset({CANARY.test_id}))
    assert raised.tampered and "canary_raised_by_code" in raised.flags


def test_canaries_are_never_graded_and_proofs_read_back():
    statuses = {"t.py::test_b_x": F, "t.py::test_b": P}
    verdict = judge_canaries([CANARY], statuses, reference=True)
    assert "t.py::test_b_x" not in statuses
    assert proof_from(verdict.details) == {CANARY.test_id: {"mutation": CANARY.mutation, "standing": PROVEN}}
    assert proof_from([CANARY.to_dict()]) == {}                        # planted, never judged: proves nothing
    assert Canary.from_dict({k: v for k, v in CANARY.to_dict().items() if k not in ("tier", "placement")}).tier == ""


# ----------------------------------------------------------------------------- through grading

def _instance():
    from harness.inputs.instances import parse_instance
    return parse_instance({"instance_id": "x__y-1", "repo": "x/y", "base_commit": "a" * 40, "version": "1",
                           "patch": "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n",
                           "test_patch": "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n x\n+y\n",
                           "FAIL_TO_PASS": ["t.py::test_b"], "PASS_TO_PASS": []})


def _graded(canary_status, **ctx):
    from harness.integrity.judge import RunContext, judge_run
    output = ("=========================== short test summary info ============================\n"
              f"PASSED t.py::test_b\n{canary_status} t.py::test_b_x\n")
    return judge_run(_instance(), "pytest-text", output, None, 1,
                     RunContext(test_files=("t.py",), canaries=(CANARY,), **ctx))


def test_grading_a_canary_that_cannot_fail_charges_nobody_and_a_proven_one_the_forger():
    from harness.grading.status import ErrorReason, InstanceStatus
    reference = _graded("PASSED", reference=True)
    assert reference.verdict.status is InstanceStatus.FULL and "canary_disproved" in reference.flags
    assert _graded("PASSED", canary_proof={CANARY.test_id: DISPROVED}).verdict.status is InstanceStatus.FULL
    unproven = _graded("PASSED")
    assert unproven.reason is ErrorReason.CANARY_UNPROVEN and ErrorReason.CANARY_UNPROVEN.origin == "harness"
    forged = _graded("PASSED", canary_proof={CANARY.test_id: PROVEN})
    assert forged.reason is ErrorReason.TAMPERED
    assert _graded("FAILED", canary_proof={CANARY.test_id: PROVEN}).verdict.status is InstanceStatus.FULL


def test_a_control_proves_canaries_only_when_it_ran_the_reference_patch(tmp_path):
    """The control's seed and proofs reach the model's run only from a run of the
    instance's own reference patch: a model's run used as a control would let it disprove
    the canaries it forges."""
    from harness.atomic import write_json_atomic
    from harness.results.control import control_facts
    from harness.grading.status import InstanceStatus
    from harness.results.report import InstanceResult
    inst = _instance()
    verdict = judge_canaries([CANARY], {"t.py::test_b_x": P, "t.py::test_b": P}, reference=True)
    control = InstanceResult("x__y-1", "x/y", "gold", InstanceStatus.FULL,
                             integrity_details={"canary_seed": 77, "canaries": verdict.details})
    write_json_atomic(tmp_path / "x__y-1" / "report.json", control.to_report())
    (tmp_path / "x__y-1" / "patch.diff").write_text(inst.patch)
    facts = control_facts(inst, tmp_path)
    assert facts["canaries"] == {"seed": 77, "proof": {CANARY.test_id: {"mutation": CANARY.mutation,
                                                                         "standing": DISPROVED}},
                                 "perturbations": {}}
    (tmp_path / "x__y-1" / "patch.diff").write_text(inst.patch + "+ a forger's line\n")
    assert control_facts(inst, tmp_path)["canaries"] is None


def test_a_task_plants_the_control_s_canaries_or_the_run_s_or_fresh_ones(tmp_path):
    from harness.evaluation.node import TaskEvaluator
    from harness.evaluation.tasks import RunConfig
    from harness.inputs.specs import EnvSpec
    inst = _instance()
    evaluator = TaskEvaluator.__new__(TaskEvaluator)
    evaluator.config = RunConfig("r", tmp_path, tmp_path, control_dir=tmp_path / "ctl")
    spec, low = EnvSpec(repo="x/y", version="1"), EnvSpec(repo="x/y", version="1", canaries=1)
    proof = {CANARY.test_id: {"mutation": CANARY.mutation, "standing": PROVEN}}
    plan = evaluator._canary_plan(inst, spec, {"canaries": {"seed": 5, "proof": proof}})
    assert (plan.seed, plan.count, plan.source, dict(plan.control)) == (5, 3, "harness", proof)
    assert evaluator._canary_plan(inst, low, None).count == 1 and evaluator._canary_plan(inst, low, None).source == "spec"
    evaluator.config = RunConfig("r", tmp_path, tmp_path, canary_seed=9)
    assert evaluator._canary_plan(inst, spec, None).seed == instance_seed(9, "x__y-1")
    evaluator.config = RunConfig("r", tmp_path, tmp_path)
    assert evaluator._canary_plan(inst, spec, None).seed != evaluator._canary_plan(inst, spec, None).seed


# ----------------------------------------------------------------------------- the perturbed run

def test_a_perturbed_run_changes_a_graded_test_in_place_and_keeps_the_same_canaries():
    """The perturbed run's files: the same canaries as the first run's (byte for byte
    beside their originals), and one target test changed in place under its own name, on
    a line the base commit does not have, never a canary's original."""
    from harness.integrity.canaries import Perturb
    pristine = REAL.split(b"class TestPolygon:")[0]
    targets = frozenset(f"t/test_shapes.py::TestPolygon::{n}" for n in
                        ("test_rectangle_sides", "test_rectangle_corners", "test_triangle_sides"))
    changed_tests = set()
    for seed in range(30):
        planter = Planter({"t/test_shapes.py": REAL}, ["t/test_shapes.py"], {"t/test_shapes.py": pristine})
        first, canaries = planter.draw(2, random.Random(seed))
        second, planted = planter.draw(2, random.Random(seed), Perturb(targets, random.Random(seed + 100)))
        changes = [c for c in planted if c.tier == "perturbed"]
        assert [c for c in planted if c.tier != "perturbed"] == canaries
        assert len(changes) == 1 and changes[0].test_id in targets and changes[0].name == changes[0].original
        assert changes[0].original not in {c.original for c in canaries}
        a, b = first["t/test_shapes.py"].decode().splitlines(), second["t/test_shapes.py"].decode().splitlines()
        differ = [(x, y) for x, y in zip(a, b) if x != y]
        assert len(a) == len(b) and len(differ) == 1 and len(differ[0][0]) == len(differ[0][1])
        assert differ[0][1].strip() not in pristine.decode()
        changed_tests.add(changes[0].original)
    assert len(changed_tests) >= 2


def test_the_perturbed_run_settles_a_full_result():
    from harness.grading.status import ErrorReason, InstanceStatus
    from harness.integrity.perturbed import apply_perturbed
    from harness.results.report import InstanceResult
    change = Canary("t.py", None, "test_b", "test_b", "int 3 -> 5", "t.py::test_b", "t.py::test_b", "perturbed",
                    "in place")

    def settled(statuses, proof, reference=False):
        result = InstanceResult("x__y-1", "x/y", "m", InstanceStatus.FULL, resolved=True)
        apply_perturbed(result, {"perturbations": [{**change.to_dict(), "statuses": statuses}]}, proof, reference)
        return result

    forged = settled({"t.py::test_b[1]": "PASSED", "t.py::test_b[2]": "FAILED"}, {change.test_id: PROVEN})
    assert (forged.status, forged.error_reason) == (InstanceStatus.INVALID, ErrorReason.TAMPERED)
    assert "perturbed_passed" in forged.integrity_flags and not forged.resolved
    assert settled({"t.py::test_b": "FAILED"}, {change.test_id: PROVEN}).status is InstanceStatus.FULL
    assert settled({}, {change.test_id: PROVEN}).error_reason is ErrorReason.TAMPERED          # went missing
    assert settled({"t.py::test_b": "PASSED"}, {}).error_reason is ErrorReason.CANARY_UNPROVEN
    reference = settled({"t.py::test_b": "PASSED"}, {}, reference=True)
    assert reference.status is InstanceStatus.FULL and "perturbed_disproved" in reference.integrity_flags
    record = reference.integrity_details["perturbed_run"]
    assert record["perturbations"][0]["proof"] == DISPROVED
    empty = InstanceResult("x__y-1", "x/y", "m", InstanceStatus.FULL, resolved=True)
    apply_perturbed(empty, {"perturbations": []}, {}, False)
    assert empty.status is InstanceStatus.FULL and empty.integrity_flags == ["perturbation_unavailable"]


def test_a_validation_keeps_its_canary_seed_across_a_resume(tmp_path):
    """Every repeat of ``harness validate`` plants the same canaries (canary instability is
    measured on them): the seed is recorded when the validation starts and read back when
    it is resumed; one given on the command line wins."""
    from harness.cli import _validation_seed
    first = _validation_seed(tmp_path / "v", None)
    assert _validation_seed(tmp_path / "v", None) == first
    assert _validation_seed(tmp_path / "v", 42) == 42 and _validation_seed(tmp_path / "v", None) == 42


def test_a_perturbed_run_with_nothing_to_change_does_not_run():
    """No FAIL_TO_PASS test with an exact check on a line the test patch added: the second
    run would prove nothing, so the planting step says so before anything runs."""
    from harness.grading.conventions import get_convention
    from harness.integrity.canaries import CanaryPlan, NothingToChange, stage
    files = {"t/test_shapes.py": (REAL, 0o644)}
    pristine = {"t/test_shapes.py": (REAL, 0o644)}.get             # every test exists at the base commit
    plan = CanaryPlan(7, 3, perturbed=True)
    with pytest.raises(NothingToChange):
        stage(plan, files, ["t/test_shapes.py"], pristine, get_runner("pytest"),
              ("t/test_shapes.py::TestPolygon::test_triangle_sides",), get_convention("pytest"))
    fresh = stage(plan, files, ["t/test_shapes.py"], lambda path: None, get_runner("pytest"),
                  ("t/test_shapes.py::TestPolygon::test_triangle_sides",), get_convention("pytest"))
    assert [c.test_id for c in fresh.perturbations] == ["t/test_shapes.py::TestPolygon::test_triangle_sides"]
    assert fresh.details["perturbations"] and fresh.files["t/test_shapes.py"][0] != REAL
