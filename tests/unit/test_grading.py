"""Grading rules (harness.grading.grade) and status helpers (harness.grading.status)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.grading.grade import Grade, TestLists, grade
from harness.grading.status import ErrorReason, InstanceStatus, TestStatus

P, F, E, S, X = (TestStatus.PASSED, TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED,
                 TestStatus.XFAIL)


def lists(f2p, p2p=()):
    return TestLists(tuple(f2p), tuple(p2p))


# ------------------------------------------------------------------ per-test rules

@pytest.mark.parametrize("status, fixed", [(P, True), (X, True), (S, False), (F, False), (E, False)])
def test_f2p_fixed_only_when_passed_or_xfail(status, fixed):
    g = grade(lists(["t::f"]), {"t::f": status})
    assert (g.f2p_success, g.f2p_failure) == ((("t::f",), ()) if fixed else ((), ("t::f",)))
    assert g.status is (InstanceStatus.FULL if fixed else InstanceStatus.NO)
    assert g.resolved is fixed


@pytest.mark.parametrize("status, kept", [(P, True), (X, True), (S, True), (F, False), (E, False)])
def test_p2p_kept_when_passed_xfail_or_skipped(status, kept):
    g = grade(lists(["t::f"], ["t::p"]), {"t::f": P, "t::p": status})
    assert (g.p2p_success, g.p2p_failure) == ((("t::p",), ()) if kept else ((), ("t::p",)))
    assert g.status is (InstanceStatus.FULL if kept else InstanceStatus.NO)
    assert g.p2p_rate == (1.0 if kept else 0.0)


def test_missing_tests_count_as_failed_and_are_listed():
    g = grade(lists(["f1", "f2"], ["p1", "p2"]), {"f1": P, "p1": P})
    assert g.f2p_failure == ("f2",)
    assert g.p2p_failure == ("p2",)
    assert g.missing == ("f2", "p2")
    assert g.status is InstanceStatus.NO  # p2 missing is a regression


def test_missing_f2p_alone_gives_partial_not_full():
    g = grade(lists(["f1", "f2"], ["p1"]), {"f1": P, "p1": P})
    assert g.missing == ("f2",)
    assert g.status is InstanceStatus.PARTIAL
    assert not g.resolved


def test_nothing_ran_at_all():
    g = grade(lists(["f1"], ["p1"]), {})
    assert g.status is InstanceStatus.NO
    assert g.missing == ("f1", "p1")
    assert (g.f2p_rate, g.p2p_rate) == (0.0, 0.0)


def test_ungraded_ids_in_statuses_are_ignored():
    g = grade(lists(["f"], ["p"]), {"f": P, "p": P, "other": F, "another": E})
    assert g.status is InstanceStatus.FULL
    assert "other" not in (*g.f2p_failure, *g.p2p_failure, *g.missing)


# ------------------------------------------------------------------ verdicts

def test_full():
    g = grade(lists(["f1", "f2"], ["p1", "p2"]), {"f1": P, "f2": X, "p1": S, "p2": P})
    assert g.status is InstanceStatus.FULL and g.resolved
    assert (g.f2p_rate, g.p2p_rate) == (1.0, 1.0)
    assert g.error_reason is None


def test_partial_requires_every_p2p_kept_and_some_but_not_all_f2p():
    g = grade(lists(["f1", "f2", "f3"], ["p1"]), {"f1": P, "f2": F, "f3": E, "p1": P})
    assert g.status is InstanceStatus.PARTIAL
    assert not g.resolved
    assert g.f2p_rate == pytest.approx(1 / 3)


def test_no_when_nothing_fixed_even_if_all_p2p_kept():
    g = grade(lists(["f1", "f2"], ["p1"]), {"f1": F, "f2": S, "p1": P})
    assert g.f2p_rate == 0.0
    assert g.status is InstanceStatus.NO


def test_regression_is_never_offset_by_fixed_tests():
    f2p = [f"f{i}" for i in range(10)]
    p2p = [f"p{i}" for i in range(10)]
    statuses = {t: P for t in f2p + p2p}
    statuses["p7"] = F
    g = grade(lists(f2p, p2p), statuses)
    assert g.f2p_rate == 1.0
    assert g.p2p_rate == pytest.approx(0.9)
    assert g.status is InstanceStatus.NO
    assert not g.resolved


def test_partial_fix_with_a_regression_is_no():
    g = grade(lists(["f1", "f2"], ["p1"]), {"f1": P, "f2": F, "p1": E})
    assert g.status is InstanceStatus.NO


@pytest.mark.parametrize("reason", list(ErrorReason))
def test_error_reason_makes_it_invalid_even_if_everything_passed(reason):
    g = grade(lists(["f"], ["p"]), {"f": P, "p": P}, error_reason=reason)
    assert g.status is InstanceStatus.INVALID
    assert g.resolved is False
    assert g.error_reason is reason
    # the evidence is still filled in for the reader
    assert g.f2p_success == ("f",) and g.p2p_success == ("p",)
    assert (g.f2p_rate, g.p2p_rate) == (1.0, 1.0)


def test_empty_pass_to_pass_has_p2p_rate_one():
    g = grade(lists(["f"], []), {"f": P})
    assert g.p2p_rate == 1.0
    assert g.status is InstanceStatus.FULL
    g = grade(lists(["f"], []), {"f": F})
    assert g.p2p_rate == 1.0
    assert g.status is InstanceStatus.NO


def test_rate_denominators_are_list_lengths_not_reported_counts():
    # 4 F2P of which 1 reported (and fixed); 5 P2P of which 2 reported and kept.
    statuses = {"f1": P, "p1": P, "p2": S, "unrelated": P}
    g = grade(lists(["f1", "f2", "f3", "f4"], ["p1", "p2", "p3", "p4", "p5"]), statuses)
    assert g.f2p_rate == 1 / 4
    assert g.p2p_rate == 2 / 5


def test_empty_fail_to_pass_is_never_full():
    g = grade(lists([], ["p"]), {"p": P})
    assert g.f2p_rate is None
    assert g.status is InstanceStatus.NO
    assert not g.resolved


def test_lists_preserve_instance_order():
    f2p = ["z", "a", "m"]
    g = grade(lists(f2p), {"a": P, "z": P, "m": F})
    assert g.f2p_success == ("z", "a")
    assert g.f2p_failure == ("m",)


def test_tests_status_dict_has_swe_bench_shape():
    g = grade(lists(["f1", "f2"], ["p1", "p2"]), {"f1": P, "f2": F, "p1": P})
    assert g.tests_status_dict() == {
        "FAIL_TO_PASS": {"success": ["f1"], "failure": ["f2"]},
        "PASS_TO_PASS": {"success": ["p1"], "failure": ["p2"]},
    }


def test_grade_is_immutable():
    g = grade(lists(["f"]), {"f": P})
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        g.status = InstanceStatus.NO  # type: ignore[misc]
    assert isinstance(g, Grade)


# ------------------------------------------------------------------ properties

ids = st.text(alphabet="abcdefghij:/_.[]", min_size=1, max_size=12)
statuses_st = st.sampled_from(list(TestStatus))


@st.composite
def graded_runs(draw):
    names = draw(st.lists(ids, min_size=1, max_size=12, unique=True))
    split = draw(st.integers(min_value=1, max_value=len(names)))
    f2p, p2p = names[:split], names[split:]
    reported = draw(st.lists(st.sampled_from(names), unique=True))
    statuses = {n: draw(statuses_st) for n in reported}
    return lists(f2p, p2p), statuses


@settings(max_examples=200, deadline=None)
@given(graded_runs(), ids, st.sampled_from([F, E, None]))
def test_adding_a_failing_p2p_never_yields_full(run, extra, bad):
    tests, statuses = run
    if extra in tests.fail_to_pass or extra in tests.pass_to_pass:
        return
    statuses = dict(statuses)
    if bad is not None:
        statuses[extra] = bad
    else:
        statuses.pop(extra, None)  # missing counts as failed
    g = grade(TestLists(tests.fail_to_pass, (*tests.pass_to_pass, extra)), statuses)
    assert g.status is InstanceStatus.NO
    assert extra in g.p2p_failure
    assert not g.resolved


@settings(max_examples=200, deadline=None)
@given(graded_runs(), st.randoms())
def test_permuting_the_statuses_dict_does_not_change_the_grade(run, rnd):
    tests, statuses = run
    items = list(statuses.items())
    rnd.shuffle(items)
    assert grade(tests, dict(items)) == grade(tests, statuses)


@settings(max_examples=300, deadline=None)
@given(graded_runs())
def test_verdict_invariants(run):
    tests, statuses = run
    g = grade(tests, statuses)
    n_f2p, n_p2p = len(tests.fail_to_pass), len(tests.pass_to_pass)
    assert len(g.f2p_success) + len(g.f2p_failure) == n_f2p
    assert len(g.p2p_success) + len(g.p2p_failure) == n_p2p
    assert set(g.missing) == {t for t in (*tests.fail_to_pass, *tests.pass_to_pass) if t not in statuses}
    assert set(g.missing) <= set(g.f2p_failure) | set(g.p2p_failure)
    assert g.f2p_rate == len(g.f2p_success) / n_f2p
    assert g.p2p_rate == (len(g.p2p_success) / n_p2p if n_p2p else 1.0)
    assert g.resolved == (g.status is InstanceStatus.FULL)
    if g.p2p_failure:
        assert g.status is InstanceStatus.NO
    if g.status is InstanceStatus.PARTIAL:
        assert g.f2p_success and g.f2p_failure and not g.p2p_failure
    # an error reason always wins, leaving the evidence untouched
    invalid = grade(tests, statuses, error_reason=ErrorReason.TIMEOUT)
    assert invalid.status is InstanceStatus.INVALID and not invalid.resolved
    assert (invalid.f2p_success, invalid.p2p_failure, invalid.missing) == \
        (g.f2p_success, g.p2p_failure, g.missing)


@settings(max_examples=200, deadline=None)
@given(graded_runs(), st.booleans())
def test_improving_one_test_never_worsens_the_verdict(run, pick_p2p):
    """Turning a test's status from failing to its list's success set never lowers the grade."""
    tests, statuses = run
    order = {InstanceStatus.NO: 0, InstanceStatus.PARTIAL: 1, InstanceStatus.FULL: 2}
    target = tests.pass_to_pass[0] if pick_p2p and tests.pass_to_pass else tests.fail_to_pass[0]
    worse = grade(tests, {**statuses, target: F})
    better = grade(tests, {**statuses, target: P})
    assert order[better.status] >= order[worse.status]


# ------------------------------------------------------------------ status.py

def test_worst_picks_the_more_severe_and_is_symmetric():
    severity = [P, X, S, F, E]
    for i, a in enumerate(severity):
        for j, b in enumerate(severity):
            expected = severity[max(i, j)]
            assert TestStatus.worst(a, b) is expected
            assert TestStatus.worst(b, a) is expected


def test_every_error_reason_has_a_known_origin():
    for reason in ErrorReason:
        assert reason.origin in {"model", "instance", "harness"}


@pytest.mark.parametrize("reason, origin", [
    (ErrorReason.PATCH_APPLY_FAILED, "model"),
    (ErrorReason.PATCH_REJECTED, "model"),
    (ErrorReason.TIMEOUT, "model"),
    (ErrorReason.TEST_PATCH_APPLY_FAILED, "instance"),
    (ErrorReason.MALFORMED_INSTANCE, "instance"),
    (ErrorReason.ENVIRONMENT_BUILD_FAILED, "harness"),
    (ErrorReason.CONTAINER_DIED, "harness"),
])
def test_error_origins(reason, origin):
    assert reason.origin == origin


def test_statuses_are_string_valued_for_json():
    assert TestStatus("XFAIL") is X
    assert InstanceStatus("PARTIAL") is InstanceStatus.PARTIAL
    assert ErrorReason("patch_apply_failed") is ErrorReason.PATCH_APPLY_FAILED


def test_dataset_fragments_that_name_no_test_are_left_out_of_grading():
    from harness.integrity.judge import gradable_tests
    from harness.inputs.instances import parse_instance
    inst = parse_instance({"instance_id": "x", "repo": "o/r", "base_commit": "abcdef1", "patch": "",
                           "test_patch": "diff", "FAIL_TO_PASS": ["t.py::a"],
                           "PASS_TO_PASS": ["t.py::b", "[100%]", "[", "t.py"]})
    tests, ignored = gradable_tests(inst)
    assert tests.fail_to_pass == ("t.py::a",)
    assert tests.pass_to_pass == ("t.py::b", "t.py")
    assert ignored == ["[100%]", "["]
