"""Fixtures for the browser tests: one headless Chromium per module, and real runs of the
demo set on the real engine (images come from the shared test cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.inputs.demo import DEMO_DIR
from tests.browser.chromium import chromium, console_errors, missing

INSTANCES = str(DEMO_DIR / "instances.jsonl")

# A model patch for calcly-1 whose code prints markup and script into the test output, and
# whose own text (and model name) carries them into the patch view.
HOSTILE_PATCH = '''diff --git a/calcly/stats.py b/calcly/stats.py
--- a/calcly/stats.py
+++ b/calcly/stats.py
@@ -21,5 +21,6 @@ def mean(values):
 def median(values):
-    """Return the median (middle value) of *values*."""
+    """Return the median </script><script>window.__pwned=1</script> of *values*."""
+    print('</script><script>window.__pwned=2</script><img src=x onerror="window.__pwned=3"><b>bold</b>')
     data = list(values)
     if not data:
         raise StatsError("median() of empty data")
'''


@pytest.fixture(scope="module")
def browser():
    reason = missing()
    if reason:
        pytest.fail(f"browser tests need Debian's chromium and chromedriver: {reason}", pytrace=False)
    with chromium() as driver:
        yield driver


@pytest.fixture
def page(browser):
    """The browser with its console log emptied; after the test, no console error may remain."""
    console_errors(browser)
    yield browser
    errors = console_errors(browser)
    assert errors == [], f"console errors: {errors}"


def file_url(path: Path) -> str:
    return Path(path).resolve().as_uri()


class DemoRuns:
    """The demo set graded on the real engine: its predictions (FULL, PARTIAL, NO, INVALID),
    the gold and empty controls, and a hostile prediction; plus the comparisons."""

    def __init__(self, root: Path, cache: Path) -> None:
        self.root = root
        self.cache = cache

    def run(self, predictions: str, run_id: str, *extra: str) -> Path:
        from harness.cli import main
        code = main(["run", "--instances", INSTANCES, "--predictions", predictions, "--run-id", run_id,
                     "--output-dir", str(self.root), "--cache-dir", str(self.cache), "--quiet", *extra])
        assert code == 0
        return self.root / run_id


@pytest.fixture(scope="module")
def demo(tmp_path_factory, cache_dir, engine):
    from harness.cli import main
    root = tmp_path_factory.mktemp("browser-runs")
    runs = DemoRuns(root, cache_dir)
    runs.demo = runs.run(str(DEMO_DIR / "predictions.jsonl"), "demo")
    runs.gold = runs.run("gold", "gold")
    runs.empty = runs.run("empty", "empty")
    hostile = root / "hostile-preds.jsonl"
    hostile.write_text(json.dumps({"instance_id": "harness-demo__calcly-1", "model_patch": HOSTILE_PATCH,
                                   "model_name_or_path": "hostile</script><b>model</b>"}) + "\n")
    runs.hostile = runs.run(str(hostile), "hostile", "--instance-ids", "harness-demo__calcly-1")
    runs.compare_dir = root / "comparisons"
    assert main(["compare", str(runs.gold), str(runs.empty), "--output-dir", str(runs.compare_dir)]) == 0
    runs.claims = root / "vendor.results.json"
    # The vendor claims calcly-2 (our PARTIAL) and inventory-1 (our INVALID) as resolved.
    runs.claims.write_text(json.dumps({
        "submission": "vendor <i>x</i>", "resolved": ["harness-demo__calcly-1", "harness-demo__calcly-2",
                                                      "harness-demo__inventory-1"],
        "unresolved": ["harness-demo__textkit-1"], "no_prediction": [],
        "per_instance": {"harness-demo__calcly-2": {"note": "<script>window.__pwned=9</script>"}}}))
    assert main(["compare", str(runs.demo), "--claimed", str(runs.claims)]) == 0
    return runs
