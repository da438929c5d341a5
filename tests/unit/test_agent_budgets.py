"""Budgets: the run's cost ledger, the host's stops, and which limit an exit status names."""

from __future__ import annotations

import threading
import time

import pytest

from harness.agents.budgets import (LIMITS, RUN_COST_EXCEEDED, WALL_TIME_EXCEEDED, AttemptClock, Budgets,
                                    RunCostLedger, exit_status_for, host_stop, limit_hit)


def test_the_ledger_adds_every_charge_from_many_threads():
    ledger = RunCostLedger(limit=None, spent=0.5)
    threads = [threading.Thread(target=lambda: [ledger.charge(0.001) for _ in range(1000)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ledger.spent() == pytest.approx(0.5 + 8 * 1000 * 0.001)
    assert not ledger.exhausted()                    # no limit: never exhausted


def test_the_ledger_is_exhausted_at_its_limit_and_counts_no_negative_cost():
    ledger = RunCostLedger(limit=1.0, spent=0.4)     # seeded with what earlier invocations spent
    assert ledger.charge(0.5) == pytest.approx(0.9) and not ledger.exhausted()
    assert ledger.charge(-5) == pytest.approx(0.9)   # a negative cost is not a refund
    ledger.charge(0.1)
    assert ledger.exhausted()


def test_the_host_stops_for_wall_time_first_then_for_the_run_cost():
    spent = RunCostLedger(limit=1.0, spent=1.0)
    fresh = RunCostLedger(limit=1.0)
    running = AttemptClock(limit=3600)
    over = AttemptClock(limit=1, started=time.monotonic() - 2)
    assert host_stop(running, fresh, 1.0) is None
    assert host_stop(running, spent, 1.0) == "run_cost"
    assert host_stop(running, spent, None) is None   # a ledger's limit counts only when the run has one
    assert host_stop(over, spent, 1.0) == "wall_time"
    assert AttemptClock(limit=None).remaining() is None and not AttemptClock(limit=None).expired()
    assert exit_status_for("wall_time") == WALL_TIME_EXCEEDED and exit_status_for("run_cost") == RUN_COST_EXCEEDED


@pytest.mark.parametrize("status, steps, cost, expected", [
    ("Submitted", 250, 3.0, None),                   # a submission at the limit hit nothing
    ("LimitsExceeded", 3, 0.01, "steps"),            # mini-swe-agent: 0 < step_limit <= n_calls
    ("LimitsExceeded", 2, 0.5, "cost"),              # 0 < cost_limit <= cost
    ("LimitsExceeded", 3, 0.5, "steps"),             # both: steps are checked first, as the scaffold does
    ("WallTimeExceeded", 1, 0.0, "wall_time"),
    ("RunCostLimitExceeded", 0, 0.0, "run_cost"),
    ("ScaffoldError", 3, 0.5, None),
])
def test_which_limit_an_exit_status_names(status, steps, cost, expected):
    assert limit_hit(status, steps=steps, cost=cost, step_limit=3, cost_limit=0.5) == expected
    assert expected is None or expected in LIMITS


def test_budgets_record_every_limit():
    assert Budgets(3, 0.5, 60.0, 2.0).to_json() == {"step_limit": 3, "cost_limit": 0.5, "wall_seconds_limit": 60.0,
                                                   "run_cost_limit": 2.0}
