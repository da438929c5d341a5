"""harness.results.stats: hand-worked values plus properties that must hold for any input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.results.stats import (
    Attempt,
    budget_success,
    cost_summary,
    first_attempt_rate,
    mcnemar_exact,
    mean_pass_k,
    paired_bootstrap_diff,
    pass_at_k,
    pass_hat_k,
    pass_k_table,
    summarize_attempts,
    wilson_interval,
)

# --------------------------------------------------------------------------- Wilson


def test_wilson_75_of_100():
    low, high = wilson_interval(75, 100)
    assert low == pytest.approx(0.657, abs=5e-4)
    assert high == pytest.approx(0.825, abs=5e-4)


def test_wilson_zero_successes_has_closed_form_upper_bound():
    # With 0 successes the Wilson upper bound is z^2 / (n + z^2).
    z2 = 1.959963984540054 ** 2
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(z2 / (10 + z2), rel=1e-9)


def test_wilson_all_successes_mirrors_zero_successes():
    low, high = wilson_interval(10, 10)
    assert high == 1.0
    assert low == pytest.approx(1 - wilson_interval(0, 10)[1], rel=1e-9)


def test_wilson_wider_at_higher_confidence():
    low95, high95 = wilson_interval(30, 60, 0.95)
    low99, high99 = wilson_interval(30, 60, 0.99)
    assert low99 < low95 and high99 > high95


@pytest.mark.parametrize("successes, n, confidence", [(0, 0, 0.95), (5, 4, 0.95), (-1, 4, 0.95),
                                                      (1, 4, 1.0), (1, 4, 0.0), (1.0, 4, 0.95)])
def test_wilson_rejects_bad_input(successes, n, confidence):
    with pytest.raises(ValueError):
        wilson_interval(successes, n, confidence)


@given(n=st.integers(1, 5000), data=st.data(), confidence=st.floats(0.5, 0.999))
def test_wilson_contains_estimate_and_stays_in_unit_interval(n, data, confidence):
    successes = data.draw(st.integers(0, n))
    low, high = wilson_interval(successes, n, confidence)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    assert low < high


# --------------------------------------------------------------------------- McNemar


def test_mcnemar_8_vs_22():
    assert mcnemar_exact(8, 22) == pytest.approx(0.0161, abs=1e-4)
    # Exact value: twice the lower binomial tail of Binomial(30, 1/2) at 8.
    expected = 2 * sum(math.comb(30, i) for i in range(9)) / 2**30
    assert mcnemar_exact(8, 22) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_no_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_small_exact_values():
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 2 * (1/2)^5
    assert mcnemar_exact(5, 5) == 1.0  # capped


@pytest.mark.parametrize("b, c", [(-1, 3), (2, -1), (1.5, 2)])
def test_mcnemar_rejects_bad_counts(b, c):
    with pytest.raises(ValueError):
        mcnemar_exact(b, c)


@given(st.integers(0, 200), st.integers(0, 200))
def test_mcnemar_is_symmetric_probability(b, c):
    p = mcnemar_exact(b, c)
    assert 0.0 < p <= 1.0
    assert p == mcnemar_exact(c, b)


# --------------------------------------------------------------------------- pass@k / pass^k


def test_pass_at_k_and_hat_k_hand_worked():
    assert pass_at_k(8, 4, 4) == Fraction(69, 70)
    assert pass_hat_k(8, 4, 4) == Fraction(1, 70)
    assert pass_at_k(5, 2, 2) == Fraction(7, 10)
    assert float(pass_at_k(5, 2, 2)) == pytest.approx(0.7)


def test_pass_at_1_is_the_success_share():
    assert pass_at_k(7, 3, 1) == Fraction(3, 7)
    assert pass_hat_k(7, 3, 1) == Fraction(3, 7)


def test_pass_at_k_is_one_when_fewer_failures_than_k():
    assert pass_at_k(5, 4, 2) == 1
    assert pass_hat_k(5, 4, 5) == 0


@pytest.mark.parametrize("n, c, k", [(3, 1, 4), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_pass_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@given(n=st.integers(1, 40), data=st.data())
def test_pass_at_k_monotone_in_k(n, data):
    c = data.draw(st.integers(0, n))
    at = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    hat = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert all(x <= y for x, y in zip(at, at[1:]))  # more draws, more chances
    assert all(x >= y for x, y in zip(hat, hat[1:]))  # more draws, harder to pass them all
    assert all(h <= a for h, a in zip(hat, at))
    assert all(0 <= v <= 1 for v in at + hat)


# --------------------------------------------------------------------------- paired bootstrap


def test_bootstrap_identical_systems_give_zero():
    a = [True, False, True, True, False]
    assert paired_bootstrap_diff(a, list(a), iterations=500) == (0.0, 0.0, 0.0)


def test_bootstrap_one_sided_improvement():
    a = [False] * 10
    b = [True] * 3 + [False] * 7
    diff, low, high = paired_bootstrap_diff(a, b, iterations=2000, seed=1)
    assert diff == pytest.approx(0.3)
    # B never loses an instance, so no resample can show B worse.
    assert 0.0 <= low < diff < high <= 1.0


def test_bootstrap_sign_is_b_minus_a():
    diff, _, _ = paired_bootstrap_diff([True, True, False, False], [False, False, False, False], iterations=100)
    assert diff == pytest.approx(-0.5)


def test_bootstrap_is_reproducible_and_seed_dependent():
    a = [i % 3 == 0 for i in range(60)]
    b = [i % 2 == 0 for i in range(60)]
    first = paired_bootstrap_diff(a, b, iterations=1000, seed=7)
    assert first == paired_bootstrap_diff(a, b, iterations=1000, seed=7)
    assert first[1:] != paired_bootstrap_diff(a, b, iterations=1000, seed=8)[1:]


@pytest.mark.parametrize("a, b, kwargs", [([True], [True, False], {}), ([], [], {}),
                                          ([True], [False], {"iterations": 0}),
                                          ([True], [False], {"confidence": 1.5})])
def test_bootstrap_rejects_bad_input(a, b, kwargs):
    with pytest.raises(ValueError):
        paired_bootstrap_diff(a, b, **kwargs)


@settings(max_examples=40, deadline=None)
@given(pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=30), rnd=st.randoms())
def test_bootstrap_ignores_instance_order(pairs, rnd):
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    original = paired_bootstrap_diff([x for x, _ in pairs], [y for _, y in pairs], iterations=200, seed=3)
    reordered = paired_bootstrap_diff([x for x, _ in shuffled], [y for _, y in shuffled], iterations=200, seed=3)
    assert original == reordered
    assert original[1] <= original[2]


# --------------------------------------------------------------------------- repeated attempts

A = Attempt


def test_pass_k_is_averaged_per_instance_not_pooled():
    instances = {"x": [A(True), A(True)], "y": [A(False)] * 8}
    row = mean_pass_k(instances, 1)
    # Per instance: x = 1, y = 0 -> mean 0.5.  Pooling attempts would give 2/10.
    assert row.pass_at_k == pytest.approx(0.5)
    assert row.instances == 2


def test_pass_k_uses_only_instances_with_enough_attempts():
    instances = {"x": [A(True), A(True)], "y": [A(True)] + [A(False)] * 3, "z": []}
    table = pass_k_table(instances)
    assert [row.k for row in table] == [1, 2, 3, 4]
    assert [row.instances for row in table] == [2, 2, 1, 1]
    assert [row.excluded_instances for row in table] == [1, 1, 2, 2]
    # k=3: only y (n=4, c=1): pass@3 = 1 - C(3,3)/C(4,3) = 3/4, pass^3 = 0.
    assert table[2].pass_at_k == pytest.approx(0.75)
    assert table[2].pass_hat_k == 0.0
    # k=2: x gives 1 and 1; y gives 1 - C(3,2)/C(4,2) = 1/2 and 0.
    assert table[1].pass_at_k == pytest.approx((1 + 0.5) / 2)
    assert table[1].pass_hat_k == pytest.approx(0.5)


def test_pass_k_counts_infra_errors_as_failed_tries():
    row = mean_pass_k({"x": [A(True), A(True, infra_error=True)]}, 1)
    assert row.pass_at_k == pytest.approx(0.5)


def test_mean_pass_k_without_enough_attempts_raises():
    with pytest.raises(ValueError):
        mean_pass_k({"x": [A(True)]}, 2)


def test_first_attempt_rate_keeps_unattempted_in_denominator():
    instances = {"a": [A(True)], "b": [A(False), A(True)], "c": [], "d": [A(True, infra_error=True)]}
    assert first_attempt_rate(instances) == pytest.approx(1 / 4)


def _budget_demo() -> dict[str, list[Attempt]]:
    return {
        "A": [A(False, calls=2), A(True, calls=2)],
        "B": [A(False, calls=3)],
        "C": [A(False, infra_error=True, calls=0)],
    }


def test_budget_hand_worked():
    result = budget_success(_budget_demo(), max_attempts=3, max_calls=5)
    assert (result.successes, result.assigned_instances) == (1, 3)
    assert result.rate == pytest.approx(1 / 3)
    assert result.infra_error_attempts == 1
    assert result.executed_instances == 2
    assert result.conditional_rate == pytest.approx(1 / 2)
    assert result.solved_ids == ("A",)


def test_budget_second_attempt_pushing_spend_past_budget_does_not_count():
    instances = _budget_demo()
    instances["A"] = [A(False, calls=2), A(True, calls=4)]  # cumulative 6 > 5
    result = budget_success(instances, max_attempts=3, max_calls=5)
    assert result.successes == 0
    assert result.over_budget_successes == 1
    assert result.over_budget_attempts == 1
    # Without a call cap the same success counts.
    assert budget_success(instances, max_attempts=3).successes == 1


def test_budget_failed_and_infra_attempts_spend_calls():
    instances = {"x": [A(False, infra_error=True, calls=3), A(False, calls=1), A(True, calls=2)]}
    assert budget_success(instances, max_calls=5).successes == 0  # 3 + 1 + 2 = 6
    assert budget_success(instances, max_calls=6).successes == 1


def test_budget_success_beyond_attempt_limit_does_not_count():
    instances = {"x": [A(False, calls=1), A(False, calls=1), A(True, calls=1)]}
    assert budget_success(instances, max_attempts=2).successes == 0
    assert budget_success(instances, max_attempts=3).successes == 1


def test_budget_unknown_spend_under_a_call_cap_does_not_count():
    instances = {"x": [A(False, calls=None), A(True, calls=1)]}
    result = budget_success(instances, max_calls=100)
    assert result.successes == 0
    assert result.unknown_calls_attempts == 2
    assert budget_success(instances).successes == 1  # no cap: spend irrelevant


def test_budget_unattempted_instances_stay_in_denominator():
    result = budget_success({"x": [A(True, calls=1)], "y": []})
    assert result.rate == pytest.approx(0.5)
    assert result.unattempted_instances == ("y",)


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"max_calls": -1}])
def test_budget_rejects_bad_budget(kwargs):
    with pytest.raises(ValueError):
        budget_success({"x": [A(True)]}, **kwargs)


def test_budget_rejects_negative_calls():
    with pytest.raises(ValueError):
        budget_success({"x": [A(True, calls=-1)]})


def test_cost_per_attempt_and_per_solved_instance():
    instances = {"x": [A(False, cost=1.0), A(True, cost=2.0)], "y": [A(False, cost=3.0)]}
    costs = cost_summary(instances)
    assert costs.total_cost == pytest.approx(6.0)
    assert costs.cost_per_attempt == pytest.approx(2.0)
    assert costs.solved_instances == 1
    assert costs.cost_per_solved_instance == pytest.approx(6.0)  # failures are paid for too
    assert costs.cost_complete


def test_cost_per_solved_is_withheld_when_a_cost_is_unknown():
    costs = cost_summary({"x": [A(True, cost=1.0), A(False, cost=None)]})
    assert not costs.cost_complete
    assert costs.attempts_with_cost == 1
    assert costs.cost_per_attempt == pytest.approx(1.0)
    assert costs.cost_per_solved_instance is None


def test_cost_rejects_negative_cost():
    with pytest.raises(ValueError):
        cost_summary({"x": [A(True, cost=-0.5)]})


# --------------------------------------------------------------------------- properties

attempt_strategy = st.builds(
    Attempt,
    success=st.booleans(),
    infra_error=st.booleans(),
    calls=st.one_of(st.none(), st.integers(0, 6)),
    cost=st.one_of(st.none(), st.floats(0, 50, allow_nan=False, allow_infinity=False)),
)
instances_strategy = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4),
                                     st.lists(attempt_strategy, max_size=5), min_size=1, max_size=8)
failing_attempts = st.lists(st.builds(Attempt, success=st.just(False), infra_error=st.booleans(),
                                      calls=st.one_of(st.none(), st.integers(0, 6))), max_size=5)
budgets = st.tuples(st.one_of(st.none(), st.integers(1, 5)), st.one_of(st.none(), st.integers(0, 12)))


@settings(max_examples=150)
@given(instances=instances_strategy, extra=failing_attempts, budget=budgets)
def test_adding_a_failing_or_unattempted_instance_never_raises_a_rate(instances, extra, budget):
    max_attempts, max_calls = budget
    before = summarize_attempts(instances, max_attempts, max_calls)
    grown = dict(instances)
    grown["new-instance"] = extra  # key cannot collide: the strategy's alphabet has no '-'
    after = summarize_attempts(grown, max_attempts, max_calls)
    assert after.first_attempt_rate <= before.first_attempt_rate
    assert after.budget.rate <= before.budget.rate
    assert after.budget.successes == before.budget.successes
    old_rows = {row.k: row for row in before.pass_k}
    for row in after.pass_k:
        if row.k in old_rows:
            assert row.pass_at_k <= old_rows[row.k].pass_at_k + 1e-12
            assert row.pass_hat_k <= old_rows[row.k].pass_hat_k + 1e-12


@settings(max_examples=150)
@given(instances=instances_strategy, budget=budgets, rnd=st.randoms())
def test_reordering_instances_changes_no_figure(instances, budget, rnd):
    keys = list(instances)
    rnd.shuffle(keys)
    reordered = {key: instances[key] for key in keys}
    assert summarize_attempts(reordered, *budget) == summarize_attempts(instances, *budget)


@settings(max_examples=150)
@given(instances=instances_strategy, budget=budgets)
def test_more_budget_never_solves_fewer(instances, budget):
    max_attempts, max_calls = budget
    base = budget_success(instances, max_attempts, max_calls)
    more_attempts = budget_success(instances, None if max_attempts is None else max_attempts + 1, max_calls)
    more_calls = budget_success(instances, max_attempts, None if max_calls is None else max_calls + 3)
    assert set(base.solved_ids) <= set(more_attempts.solved_ids)
    assert set(base.solved_ids) <= set(more_calls.solved_ids)
    assert 0.0 <= base.rate <= 1.0
