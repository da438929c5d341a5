"""An agent's predictions (three attempts per instance, with cost, calls, steps, time and
exit status) graded on the demo set by the real engine: the verdicts are the ones the
patches were chosen for, and summary.json's ``agent`` block holds the figures computed by
hand from them (tests/agent_demo.py)."""

from __future__ import annotations

import json

import pytest

from harness.results.run_report import load_run_report
from tests.agent_demo import EXPECTED, PLAN, VERDICTS, grade

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory, cache_dir, engine):
    return grade(tmp_path_factory.mktemp("agent-runs"), cache_dir)


def test_each_attempt_is_graded_as_its_patch_and_carries_its_agent_fields(agent_run):
    for instance_id, attempts in PLAN.items():
        for number, (kind, cost, calls, steps, seconds, status) in enumerate(attempts, start=1):
            report = json.loads((agent_run / instance_id / f"attempt-{number}" / "report.json").read_text())
            assert (report["status"], report["attempt"]) == (VERDICTS[kind], number), (instance_id, number)
            assert (report["cost"], report["calls"], report["steps"], report["agent_seconds"], report["exit_status"]) \
                == (cost, calls, steps, seconds, status)


def test_summary_agent_block_holds_the_hand_computed_figures(agent_run):
    summary = json.loads((agent_run / "summary.json").read_text())
    agent = summary["agent"]
    assert (agent["instances"], agent["attempts_per_instance"], agent["attempts_recorded"]) == (4, 3, 12)
    assert agent["attempts_lost"] == 0 and agent["infra_error_attempts"] == 0
    assert agent["pass_at_k"]["1"] == pytest.approx(EXPECTED["pass@1"])
    assert agent["pass_at_k"]["3"] == pytest.approx(EXPECTED["pass@3"])
    assert agent["pass_hat_k"]["3"] == pytest.approx(EXPECTED["pass^3"])
    assert agent["resolved"]["resolved"] == EXPECTED["resolved_first"] == summary["resolved_instances"]
    assert agent["cost"]["total"] == pytest.approx(EXPECTED["cost_total"])
    assert agent["cost"]["per_resolved_instance"] == pytest.approx(EXPECTED["cost_per_resolved"])
    assert agent["steps"]["p95"] == pytest.approx(EXPECTED["steps_p95"])
    assert agent["steps"]["p50"] == pytest.approx(EXPECTED["steps_p50"]) and agent["steps"]["max"] == EXPECTED["steps_max"]
    assert agent["exit_statuses"] == {"LimitsExceeded": 4, "Submitted": 6, "ScaffoldError": 1, "WallTimeExceeded": 1}
    assert agent["repos"]["harness-demo/calcly"]["pass_hat_k"]["3"] == pytest.approx(1 / 2)
    assert agent["repos"]["harness-demo/inventory"]["cost"]["per_resolved_instance"] is None  # nothing resolved
    # the pages are built from the same reports and show the same vector
    assert load_run_report(agent_run).agent.to_json() == agent


def test_harness_report_regrades_and_keeps_the_same_agent_block(agent_run):
    from harness.cli import main
    before = json.loads((agent_run / "summary.json").read_text())["agent"]
    assert main(["report", str(agent_run)]) == 0  # re-grades from the saved outputs, rewrites summary.json
    after = json.loads((agent_run / "summary.json").read_text())
    assert after["agent"] == before and after["regraded_changed_ids"] == []
