"""An agent run's pages in a real browser (Debian's headless Chromium): the demo set graded
on the real engine from predictions with three attempts per instance and agent fields
(tests/agent_demo.py). The run page shows pass@1, pass@3, pass^3, cost per resolved
instance and p95 steps with the values computed by hand; an instance page shows its
attempts' cost, steps, time and exit status. No console error (the `page` fixture): the
pages stay within their Content-Security-Policy."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.agent_demo import PLAN, SHOWN, grade
from tests.browser.conftest import file_url

pytestmark = [pytest.mark.browser, pytest.mark.engine]


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory, cache_dir, engine):
    return grade(tmp_path_factory.mktemp("agent-browser"), cache_dir)


def figure(driver, name: str) -> str:
    [element] = driver.find_elements(By.CSS_SELECTOR, f'#agent [data-figure="{name}"]')
    assert element.is_displayed(), name
    return element.text


def test_run_page_shows_the_agent_figures(page, agent_run):
    page.get(file_url(agent_run / "report.html"))
    section = page.find_element(By.ID, "agent")
    assert section.find_element(By.TAG_NAME, "h2").text == "Agent"
    assert {name: figure(page, name) for name in SHOWN} == SHOWN
    rows = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in page.find_elements(By.CSS_SELECTOR, "#agent-pass-k tbody tr")]
    assert rows == [["1", "41.7%", "41.7%"], ["2", "58.3%", "25.0%"], ["3", "75.0%", "25.0%"]]
    statuses = {row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[1].text
                for row in page.find_elements(By.CSS_SELECTOR, "#agent-exit-statuses tbody tr")}
    assert statuses == {"Submitted": "6", "LimitsExceeded": "4", "ScaffoldError": "1", "WallTimeExceeded": "1"}
    repos = [row.find_element(By.TAG_NAME, "td").text for row in page.find_elements(By.CSS_SELECTOR, "#agent-repo-table tbody tr")]
    assert repos == ["harness-demo/calcly", "harness-demo/inventory", "harness-demo/textkit"]


def test_an_instance_page_shows_its_attempts(page, agent_run):
    instance_id = "harness-demo__textkit-1"
    page.get(file_url(agent_run / instance_id / "attempt-2" / "report.html"))
    rows = page.find_elements(By.CSS_SELECTOR, "#agent-attempt-table tbody tr")
    shown = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    expected = [[f"attempt {n}", verdict, f"{cost:.4g}", str(calls), str(steps), f"{seconds:.1f} s", status]
                for n, ((kind, cost, calls, steps, seconds, status), verdict)
                in enumerate(zip(PLAN[instance_id], ("NO", "FULL", "NO")), start=1)]
    assert shown == expected
    assert rows[1].get_attribute("class") == "current"
    rows[0].find_element(By.TAG_NAME, "a").click()  # another attempt's page, by its link
    assert page.current_url.endswith(f"{instance_id}/attempt-1/report.html")
    current = page.find_element(By.CSS_SELECTOR, "#agent-attempt-table tr.current")
    assert current.find_element(By.CSS_SELECTOR, '[data-field="exit_status"]').text == "Submitted"
