"""The page of a real agent run in a real browser (Debian's headless Chromium): `harness solve
--attempts 3 --grade` on the demo set, mini-swe-agent 1.15.0 pinned in its own virtualenv,
driven through its pinned litellm against the scripted model server on 127.0.0.1
(tests/fixtures/model_server.py, the scripts of tests/agent_live.py), in real working
sandboxes, then graded into the same run directory.

report.html shows pass@1, pass@3, pass^3, cost per resolved instance and p95 steps with the
values summary.json has, and those are the run's figures computed by hand:

* calcly-1: 2 of 3 attempts resolve it; textkit-1 (a wrong fix), calcly-2 and inventory-1
  (no script: ``echo no-script`` until the step limit of 3) never;
  pass@1 = mean(c/3) = (2/3)/4 = 1/6, pass@3 = 1/4, pass^3 = 0;
* steps: calcly-1's and textkit-1's six attempts take 2, the six unscripted ones 3:
  p50 = 2.5, p95 = 3;
* calls: 6 + 6 + 2 × 3 × 3 = 30, each priced by litellm at CALL_COST; every attempt's cost over
  the one instance some attempt resolved: 30 × CALL_COST.

No console error (the ``page`` fixture): the page stays within its Content-Security-Policy.
"""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from harness.agents.pins import ensure_environment, parse_pin
from tests.agent_live import CALCLY_1, CALL_COST, DEMO, MODEL, three_attempt_scripts, with_key, write_config
from tests.browser.conftest import file_url
from tests.fixtures.model_server import scripted_model
from tests.fixtures.services import harness_cli

pytestmark = [pytest.mark.browser, pytest.mark.engine]


@pytest.fixture(scope="module")
def solved(tmp_path_factory, cache_dir, engine):
    """The run directory of one `harness solve --attempts 3 --grade` (the CLI, as a user runs it)."""
    environment = ensure_environment(parse_pin(), cache_dir)
    out = tmp_path_factory.mktemp("agent-solve-browser")
    with scripted_model(three_attempt_scripts()) as server:
        config = write_config(out / "config.yaml", environment, server.url)
        proc = harness_cli("solve", "--instances", str(DEMO), "--model", MODEL, "--config", str(config),
                           "--attempts", "3", "--step-limit", "3", "--grade", "--run-id", "three",
                           "--output-dir", str(out), "--cache-dir", str(cache_dir), "--max-workers", "1",
                           env=with_key())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "three"


def figure(driver, name: str):
    [element] = driver.find_elements(By.CSS_SELECTOR, f'#agent [data-figure="{name}"]')
    assert element.is_displayed(), name
    return element


def test_the_solved_runs_page_shows_summary_jsons_agent_figures(page, solved):
    summary = json.loads((solved / "summary.json").read_text())
    assert summary["resolved_ids"] == [CALCLY_1]
    agent = summary["agent"]
    # summary.json holds the run's figures (by hand, in the module doc)
    assert agent["attempts_per_instance"] == 3
    assert agent["pass_at_k"]["1"] == pytest.approx(1 / 6)
    assert agent["pass_at_k"]["3"] == pytest.approx(1 / 4)
    assert agent["pass_hat_k"]["3"] == pytest.approx(0.0)
    assert agent["cost"]["per_resolved_instance"] == pytest.approx(30 * CALL_COST)
    assert (agent["steps"]["p50"], agent["steps"]["p95"], agent["steps"]["count"]) == (2.5, 3, 12)

    page.get(file_url(solved / "report.html"))
    assert page.find_element(By.CSS_SELECTOR, "#agent h2").text == "Agent"
    # the page shows those values: its numbers are summary.json's, its text those numbers as shown
    shown = {}
    for name, value in (("pass_at_1", agent["pass_at_k"]["1"]), ("pass_at_3", agent["pass_at_k"]["3"]),
                        ("pass_hat_3", agent["pass_hat_k"]["3"])):
        element = figure(page, name)
        assert float(element.get_attribute("data-value")) == pytest.approx(value, rel=1e-12, abs=1e-12), name
        shown[name] = element.text
    for name in ("cost_per_resolved", "steps_p95", "steps_p50"):
        shown[name] = figure(page, name).text
    assert shown == {"pass_at_1": f"{agent['pass_at_k']['1'] * 100:.1f}%",
                     "pass_at_3": f"{agent['pass_at_k']['3'] * 100:.1f}%",
                     "pass_hat_3": f"{agent['pass_hat_k']['3'] * 100:.1f}%",
                     "cost_per_resolved": f"{agent['cost']['per_resolved_instance']:.4g}",
                     "steps_p95": "3", "steps_p50": "2.50"}
    assert shown["pass_at_1"] == "16.7%" and shown["pass_at_3"] == "25.0%" and shown["pass_hat_3"] == "0.0%"
    assert float(shown["cost_per_resolved"]) == pytest.approx(30 * CALL_COST, rel=1e-3)
    # the pass@k table has a row per k, each with its pass@k and pass^k
    rows = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in page.find_elements(By.CSS_SELECTOR, "#agent-pass-k tbody tr")]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert rows[2][1:] == [shown["pass_at_3"], shown["pass_hat_3"]]
    statuses = {row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[1].text
                for row in page.find_elements(By.CSS_SELECTOR, "#agent-exit-statuses tbody tr")}
    assert statuses == {"Submitted": "6", "LimitsExceeded": "6"}
