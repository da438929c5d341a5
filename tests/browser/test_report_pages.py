"""The HTML pages in a real browser (Debian's headless Chromium): the demo run graded on
the real engine, a gold/empty comparison, a claims comparison, a hostile patch and test
output, a 120-instance synthetic run (pagination), and `harness view`.

Every test ends with no console error (the `page` fixture): a script error, a blocked
resource or a Content-Security-Policy violation would all be one."""

from __future__ import annotations

import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from harness.views.serve import make_server
from harness.views.site import write_run_pages
from tests.browser.conftest import file_url
from tests.runs import HOSTILE, write_synthetic_run

pytestmark = [pytest.mark.browser, pytest.mark.engine]

DEMO_STATUS = {"harness-demo__calcly-1": "FULL", "harness-demo__calcly-2": "PARTIAL",
               "harness-demo__textkit-1": "NO", "harness-demo__inventory-1": "INVALID"}


def rows(driver, table_id: str) -> list:
    return [r for r in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr") if r.is_displayed()]


def table_ids(driver) -> list[str]:
    return [r.find_element(By.CSS_SELECTOR, "td").text.split(" ")[0] for r in rows(driver, "instance-table")]


def type_at_once(driver, box, text: str) -> None:
    """Set a search box and fire one input event (typing key by key on a loaded machine
    could search a prefix first: the page searches after a 200 ms pause)."""
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                          box, text)


def script_count(driver) -> int:
    return driver.execute_script("return document.querySelectorAll('script:not([type])').length")


def not_pwned(driver) -> None:
    assert driver.execute_script("return window.__pwned === undefined")
    assert driver.execute_script("return document.querySelectorAll('img, b, i, svg:not(.chart)').length") == 0
    assert script_count(driver) == 1


# --------------------------------------------------------------------------- the demo run


def test_run_page_counts_and_table(page, demo):
    page.get(file_url(demo.demo / "report.html"))
    counts = {e.get_attribute("data-status"): int(e.text)
              for e in page.find_elements(By.CSS_SELECTOR, "#status-counts .count")}
    assert counts == {"FULL": 1, "PARTIAL": 1, "NO": 1, "INVALID": 1}
    card = page.find_element(By.ID, "resolved-card").text
    assert "25.0%" in card and "1 of 4 instances" in card and "4.6%–69.9%" in card  # Wilson 1/4
    assert {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[2].text
            for r in rows(page, "instance-table")} == {i: s for i, s in DEMO_STATUS.items()}
    assert len(rows(page, "repo-table")) == 3
    assert len(page.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2  # rates per repository, phases
    assert page.find_element(By.ID, "page-info").text.startswith("rows 1–4 of 4")


def test_run_page_filter_and_sort(page, demo):
    page.get(file_url(demo.demo / "report.html"))
    search = page.find_element(By.ID, "filter-text")
    search.send_keys("textkit")
    assert table_ids(page) == ["harness-demo__textkit-1"]
    search.clear()
    search.send_keys("patch_apply_failed")  # the reason column is searched too
    assert table_ids(page) == ["harness-demo__inventory-1"]
    search.clear()
    page.execute_script("arguments[0].dispatchEvent(new Event('input'))", search)
    Select(page.find_element(By.ID, "filter-status")).select_by_value("PARTIAL")
    assert table_ids(page) == ["harness-demo__calcly-2"]
    Select(page.find_element(By.ID, "filter-status")).select_by_value("")
    page.find_element(By.CSS_SELECTOR, "a[data-set-status='NO']").click()  # the summary's badges filter
    assert table_ids(page) == ["harness-demo__textkit-1"]
    Select(page.find_element(By.ID, "filter-status")).select_by_value("")
    header = page.find_element(By.CSS_SELECTOR, "#instance-table th[data-key='status']")
    header.click()
    assert [DEMO_STATUS[i] for i in table_ids(page)] == ["FULL", "INVALID", "NO", "PARTIAL"]
    header.click()
    assert [DEMO_STATUS[i] for i in table_ids(page)] == ["PARTIAL", "NO", "INVALID", "FULL"]
    assert header.get_attribute("aria-sort") == "descending"


def test_instance_page_diff_tests_and_output(page, demo):
    page.get(file_url(demo.demo / "report.html"))
    page.find_element(By.LINK_TEXT, "harness-demo__calcly-2").click()
    assert page.current_url.endswith("/harness-demo__calcly-2/report.html")
    assert "PARTIAL" in page.find_element(By.TAG_NAME, "h1").text
    assert page.find_element(By.ID, "verdict-text").text.startswith("Not resolved (partial): 2 of 10")
    patch = (demo.demo / "harness-demo__calcly-2" / "patch.diff").read_text().splitlines()
    added = page.find_elements(By.CSS_SELECTOR, "#patch-diff tr.add td.code")
    assert [a.text for a in added] == [line for line in patch if line.startswith("+") and not line.startswith("+++")]
    assert added[0].value_of_css_property("background-color") == "rgba(230, 255, 236, 1)"  # coloured
    assert page.find_elements(By.CSS_SELECTOR, "#patch-diff tr.hunk")
    outcomes = [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows(page, "test-table")]
    assert (outcomes.count("passed"), outcomes.count("failed")) == (8, 8)
    Select(page.find_element(By.CSS_SELECTOR, "select[data-filter-table='test-table']")).select_by_value("failed")
    assert len(rows(page, "test-table")) == 8
    # The output starts collapsed; searching opens it and counts matches.
    output = page.find_element(By.ID, "test-output")
    assert not output.is_displayed()
    page.find_element(By.CSS_SELECTOR, "#output-details > summary").click()
    box = page.find_element(By.CSS_SELECTOR, "input[data-search-in='test-output']")
    type_at_once(page, box, "DID NOT RAISE")
    marks = WebDriverWait(page, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#test-output mark"))
    assert len(marks) >= 3 and all(m.text == "DID NOT RAISE" for m in marks)
    assert page.find_element(By.ID, "test-output-count").text.endswith(f"of {len(marks)} matches")
    commands = [r.find_elements(By.TAG_NAME, "td") for r in rows(page, "command-table")]
    tests = next(c for c in commands if c[0].text == "tests")
    assert tests[2].text == "1" and tests[3].text.endswith(" s")
    assert page.find_elements(By.CSS_SELECTOR, "#timings svg.chart")


def test_invalid_instance_page(page, demo):
    page.get(file_url(demo.demo / "harness-demo__inventory-1" / "report.html"))
    assert "INVALID" in page.find_element(By.TAG_NAME, "h1").text
    assert "patch_apply_failed" in page.find_element(By.ID, "verdict-text").text
    assert "origin model" in page.find_element(By.ID, "verdict-text").text
    page.find_element(By.PARTIAL_LINK_TEXT, "run demo").click()
    assert page.current_url.endswith("/demo/report.html")


def test_harness_report_rewrites_the_pages(page, demo):
    from harness.cli import main
    (demo.demo / "report.html").unlink()
    assert main(["report", str(demo.demo)]) == 0
    page.get(file_url(demo.demo / "report.html"))
    assert len(rows(page, "instance-table")) == 4


# --------------------------------------------------------------------------- comparisons


def test_gold_empty_comparison_page(page, demo):
    page.get(file_url(demo.compare_dir / "compare-gold-vs-empty.html"))
    cells = {e.get_attribute("data-cell"): int(e.text) for e in page.find_elements(By.CSS_SELECTOR, "#agreement-table td")}
    assert cells == {"both": 0, "first_only": 4, "second_only": 0, "neither": 0}
    assert (page.find_element(By.ID, "fixed-count").text, page.find_element(By.ID, "broken-count").text) == ("0", "4")
    assert page.find_element(By.ID, "mcnemar").text == "0.125"
    assert len(rows(page, "flip-table")) == 4
    Select(page.find_element(By.CSS_SELECTOR, "select[data-filter-table='flip-table']")).select_by_value("fixed_in_b")
    assert rows(page, "flip-table") == []
    Select(page.find_element(By.CSS_SELECTOR, "select[data-filter-table='flip-table']")).select_by_value("")
    assert len(page.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2  # rates per repository, flips
    assert len(rows(page, "slice-table")) == 3
    # Flips link to both runs' instance pages.
    first = rows(page, "flip-table")[0]
    first.find_element(By.LINK_TEXT, "B").click()
    assert "/empty/harness-demo__" in page.current_url
    assert "NO" in page.find_element(By.TAG_NAME, "h1").text


def test_claims_comparison_page(page, demo):
    page.get(file_url(demo.demo / "compare-claims-vendor.html"))
    cells = {e.get_attribute("data-cell"): int(e.text) for e in page.find_elements(By.CSS_SELECTOR, "#agreement-table td")}
    assert cells == {"both": 1, "first_only": 2, "second_only": 0, "neither": 1}
    discordant = {r.find_elements(By.TAG_NAME, "td")[0].text: r for r in rows(page, "discordant-table")}
    assert sorted(discordant) == ["harness-demo__calcly-2", "harness-demo__inventory-1"]
    assert "patch_apply_failed" in discordant["harness-demo__inventory-1"].text
    assert "<script>window.__pwned=9</script>" in discordant["harness-demo__calcly-2"].text
    assert "vendor <i>x</i>" in page.find_element(By.CSS_SELECTOR, "header").text
    not_pwned(page)
    discordant["harness-demo__inventory-1"].find_element(By.TAG_NAME, "a").click()
    assert page.current_url.endswith("/demo/harness-demo__inventory-1/report.html")
    assert "INVALID" in page.find_element(By.TAG_NAME, "h1").text


# --------------------------------------------------------------------------- hostile text


def test_hostile_patch_and_output_are_text(page, demo):
    page.get(file_url(demo.hostile / "harness-demo__calcly-1" / "report.html"))
    not_pwned(page)
    added = [a.text for a in page.find_elements(By.CSS_SELECTOR, "#patch-diff tr.add td.code")]
    assert any("</script><script>window.__pwned=1</script>" in line for line in added)
    assert any('<img src=x onerror="window.__pwned=3"><b>bold</b>' in line for line in added)
    page.find_element(By.CSS_SELECTOR, "#output-details > summary").click()
    output = page.find_element(By.ID, "test-output").text
    assert '</script><script>window.__pwned=2</script><img src=x onerror="window.__pwned=3"><b>bold</b>' in output
    box = page.find_element(By.CSS_SELECTOR, "input[data-search-in='test-output']")
    type_at_once(page, box, "<script>")  # highlighting rebuilds the output: still text
    assert WebDriverWait(page, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#test-output mark"))
    not_pwned(page)
    assert "hostile</script><b>model</b>" in page.find_element(By.CSS_SELECTOR, "header").text
    page.get(file_url(demo.hostile / "report.html"))
    not_pwned(page)


def test_hostile_synthetic_run_in_the_table(page, tmp_path):
    run = write_synthetic_run(tmp_path, "hostile", 30, seed=2, hostile=True, no_prediction=1)
    write_run_pages(run)
    page.get(file_url(run / "report.html"))
    not_pwned(page)
    reasons = [r.find_elements(By.TAG_NAME, "td")[-1].text for r in rows(page, "instance-table")]
    assert any(HOSTILE.split(" \u2028")[0] in reason for reason in reasons)  # shown as text, via the JS table
    page.find_element(By.ID, "filter-text").send_keys("onerror")
    assert rows(page, "instance-table")
    not_pwned(page)
    detail = next(p for p in sorted(run.glob("*/report.html")) if "missing" in p.read_text())
    page.get(file_url(detail))
    not_pwned(page)
    Select(page.find_element(By.CSS_SELECTOR, "select[data-filter-table='test-table']")).select_by_value("missing")
    assert len(rows(page, "test-table")) >= 1  # missing tests are visible as such
    assert all(r.find_elements(By.TAG_NAME, "td")[2].text == "missing" for r in rows(page, "test-table"))


def test_notes_are_not_flags_in_the_table(page, tmp_path):
    """The synthetic run's only integrity mark, patch_touched_tests (the patch's test edits
    were restored), is a note: grey in the instance table, in the notes table with what it
    means, and "integrity flags only" shows no row; a flag added to one report is shown
    as a flag and is the only row that filter keeps."""
    import json
    run = write_synthetic_run(tmp_path, "notes", 40, seed=3)
    noted = sorted(p.parent.name for p in run.glob("*/report.json")
                   if "patch_touched_tests" in json.loads(p.read_text())["integrity"]["flags"])
    assert noted
    target = sorted(p for p in run.glob("*/report.json") if p.parent.name not in noted)[0]
    report = json.loads(target.read_text())
    report["integrity"]["flags"] = ["monitor_compile"]
    target.write_text(json.dumps(report))
    write_run_pages(run)
    page.get(file_url(run / "report.html"))
    assert {b.text for b in page.find_elements(By.CSS_SELECTOR, "#instance-table .badge.note")} == {"patch_touched_tests"}
    assert [b.text for b in page.find_elements(By.CSS_SELECTOR, "#instance-table .badge.flag")] == ["monitor_compile"]
    assert "restored" in page.find_element(By.ID, "note-table").text
    assert "monitor_compile" in page.find_element(By.ID, "flag-table").text
    page.find_element(By.ID, "filter-flags").click()
    assert table_ids(page) == [report["instance_id"]]


# --------------------------------------------------------------------------- scale, serving


def test_pagination_of_a_large_run(page, tmp_path):
    run = write_synthetic_run(tmp_path, "big", 120, seed=4)
    write_run_pages(run)
    page.get(file_url(run / "report.html"))
    assert len(rows(page, "instance-table")) == 50
    assert page.find_element(By.ID, "page-info").text == "rows 1–50 of 120 · page 1 of 3"
    first = table_ids(page)
    page.find_element(By.ID, "page-next").click()
    assert page.find_element(By.ID, "page-info").text == "rows 51–100 of 120 · page 2 of 3"
    assert set(table_ids(page)).isdisjoint(first)
    Select(page.find_element(By.ID, "page-size")).select_by_visible_text("250")
    assert len(rows(page, "instance-table")) == 120
    assert page.find_element(By.ID, "page-next").get_attribute("disabled") == "true"


def test_harness_view_serves_the_pages(page, demo):
    server = make_server(demo.demo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        page.get(f"http://{host}:{port}/report.html")
        assert page.title.startswith("Run demo")
        page.find_element(By.LINK_TEXT, "harness-demo__textkit-1").click()
        assert page.current_url == f"http://127.0.0.1:{port}/harness-demo__textkit-1/report.html"
        assert "NO" in page.find_element(By.TAG_NAME, "h1").text
    finally:
        server.shutdown()
        server.server_close()
