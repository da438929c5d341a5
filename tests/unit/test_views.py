"""The views (harness.views): hostile text stays text in every page, the pages are
self-contained and CSP-locked, Markdown and HTML show the same figures, SVG escapes its
labels, and `harness view` serves only the run directory on the loopback interface.

The browser-level checks (the DOM, console errors) are in tests/browser/."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import threading
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.results.run_report import load_run_report
from harness.views import svg
from harness.views.html import CSP, relative_href, render_run_report
from harness.views.markdown import render_run_markdown
from harness.views.serve import make_server
from harness.views.site import write_run_pages
from tests.runs import HOSTILE, write_synthetic_run


class Elements(HTMLParser):
    """Every start tag with its attributes, and the raw text of script and style elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.raw: list[tuple[str, dict, str]] = []
        self._open: tuple[str, dict] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._open = (tag, dict(attrs))
            self.raw.append((tag, dict(attrs), ""))

    def handle_data(self, data):
        if self._open is not None:
            tag, attrs, text = self.raw[-1]
            self.raw[-1] = (tag, attrs, text + data)

    def handle_endtag(self, tag):
        if self._open is not None and tag == self._open[0]:
            self._open = None


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> Path:
    run = write_synthetic_run(tmp_path_factory.mktemp("runs"), "hostile", 12, seed=1, hostile=True)
    write_run_pages(run)
    return run


def pages(run: Path) -> list[Path]:
    return [run / "report.html", *sorted(run.glob("*/report.html"))]


def test_hostile_text_never_becomes_markup(hostile_run):
    for page in pages(hostile_run):
        html = page.read_text()
        elements = parse(html)
        tags = [tag for tag, _ in elements.tags]
        assert "img" not in tags and "b" not in tags, page
        assert tags.count("svg") == sum(1 for t, attrs in elements.tags if t == "svg" and "chart" in (attrs.get("class") or "").split()), page
        scripts = [(attrs, text) for tag, attrs, text in elements.raw if tag == "script"]
        executable = [text for attrs, text in scripts if attrs.get("type") is None]
        assert len(executable) == 1, page  # our own script only
        assert all(attrs.get("type") == "application/json" for attrs, _ in scripts if attrs.get("type")), page
        for _, attrs in elements.tags:
            assert not any(name.startswith("on") for name in attrs), (page, attrs)
            for name in ("href", "src"):
                assert not (attrs.get(name) or "").lower().startswith("javascript"), (page, attrs)
        # The hostile text is there, as text.
        assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1" in html or "\\u003c/script\\u003e" in html, page


def test_embedded_json_round_trips_hostile_text(hostile_run):
    elements = parse((hostile_run / "report.html").read_text())
    [data] = [text for tag, attrs, text in elements.raw if attrs.get("id") == "instance-data"]
    assert "</" not in data and "<script" not in data
    rows = json.loads(data)
    report = load_run_report(hostile_run)
    assert [r["instance_id"] for r in rows] == [r.instance_id for r in report.instances]
    assert any(HOSTILE in r["reason"] for r in rows)  # failed F2P ids carry the hostile text, intact


def test_every_page_is_self_contained_and_csp_locked(hostile_run):
    for page in pages(hostile_run):
        html = page.read_text()
        elements = parse(html)
        [meta] = [a for t, a in elements.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
        assert meta["content"] == CSP and "default-src 'none'" in CSP
        [script] = [text for tag, attrs, text in elements.raw if tag == "script" and not attrs.get("type")]
        [style] = [text for tag, _, text in elements.raw if tag == "style"]
        assert f"script-src {sha(script)}" in CSP and f"style-src {sha(style)}" in CSP
        for _, attrs in elements.tags:
            assert "style" not in attrs  # inline style attributes would be blocked by the CSP
            for name in ("href", "src"):
                value = attrs.get(name) or ""
                assert not re.match(r"[a-z]+://", value) or value.startswith("data:"), (page, value)


def test_markdown_and_html_show_the_same_figures(hostile_run):
    report = load_run_report(hostile_run)
    html = (hostile_run / "report.html").read_text()
    markdown = render_run_markdown(report)
    rate = f"{report.resolved.rate * 100:.1f}%"
    assert rate in html and rate in markdown
    assert f"{report.resolved.successes}/{report.resolved.denominator}" in markdown
    for row in report.repos:
        assert row.repo in markdown and row.repo in html
    assert (hostile_run / "report.md").read_text() == markdown


def test_instance_page_shows_the_patch_as_a_diff(hostile_run):
    report = load_run_report(hostile_run)
    row = report.instances[0]
    elements = parse((hostile_run / row.instance_id / "report.html").read_text())
    kinds = [attrs.get("class") for tag, attrs in elements.tags if tag == "tr" and attrs.get("class")]
    patch = (hostile_run / row.instance_id / "patch.diff").read_text().splitlines()
    assert kinds.count("add") == sum(1 for line in patch if line.startswith("+") and not line.startswith("+++"))
    assert kinds.count("del") == sum(1 for line in patch if line.startswith("-") and not line.startswith("---"))
    details = [attrs for tag, attrs in elements.tags if tag == "details" and attrs.get("id") == "output-details"]
    assert details and "open" not in details[0]  # the test output starts collapsed


def test_svg_labels_are_escaped():
    chart = svg.interval_chart([svg.Bar("<script>x</script>", 0.5, 0.2, 0.8, '"><b>')], "label <i>")
    assert "<script>" not in chart and "&lt;script&gt;" in chart
    elements = parse(str(chart))
    assert [t for t, _ in elements.tags if t in ("b", "i", "script")] == []


def test_relative_links_between_directories(tmp_path):
    assert relative_href(tmp_path / "runs" / "a", tmp_path / "runs" / "a", "x/report.html") == "x/report.html"
    assert relative_href(tmp_path / "out", tmp_path / "runs" / "my run", "x/report.html") == "../runs/my%20run/x/report.html"
    assert relative_href(tmp_path, tmp_path, None) is None


def test_a_page_that_cannot_be_read_is_named_not_fatal(tmp_path, monkeypatch):
    import harness.views.site as site
    run = write_synthetic_run(tmp_path, "r", 3)
    broken = sorted(p.name for p in run.iterdir() if p.is_dir())[1]
    real = site.load_instance_detail

    def flaky(run_dir, report_dir, *args):  # fault injection: one unreadable instance
        if report_dir == broken:
            raise ValueError("unreadable on purpose")
        return real(run_dir, report_dir, *args)

    monkeypatch.setattr(site, "load_instance_detail", flaky)
    written = write_run_pages(run)
    assert written.instance_pages == 2 and len(written.failed_pages) == 1 and broken in written.failed_pages[0]
    assert "unreadable on purpose" in (run / "report.html").read_text()
    assert not (run / broken / "report.html").exists()


def test_render_run_report_of_an_empty_run(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"run_id": "e", "resolved_ids": [], "unresolved_ids": [],
                                                       "empty_patch_ids": [], "error_ids": []}))
    html = render_run_report(load_run_report(tmp_path))
    assert "Instances (0)" in html


# --------------------------------------------------------------------------- harness view


def get(port: int, path: str):
    """(status, headers: case-insensitive, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.headers, response.read()


@pytest.fixture
def served(hostile_run, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the browser")
    link = hostile_run / "escape"
    link.unlink(missing_ok=True)
    link.symlink_to(secret)
    server = make_server(hostile_run)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    link.unlink()


def test_view_serves_the_run_on_loopback_only(served, hostile_run):
    host, port = served.server_address[:2]
    assert host == "127.0.0.1"
    status, headers, body = get(port, "/report.html")
    assert status == 200 and body == (hostile_run / "report.html").read_bytes()
    assert headers["Content-Security-Policy"] == CSP and headers["X-Content-Type-Options"] == "nosniff"


def test_view_refuses_paths_outside_the_run(served):
    port = served.server_address[1]
    assert get(port, "/escape")[0] == 404  # a symbolic link out of the run directory
    assert get(port, "/../../../../etc/passwd")[0] == 404
    assert get(port, "/%2e%2e/%2e%2e/etc/passwd")[0] == 404


def test_view_serves_test_artefacts_as_text(served, hostile_run):
    instance = sorted(p for p in hostile_run.iterdir() if (p / "report.json").is_file())[0]
    (instance / "results.xml").write_text('<x:html xmlns:x="http://www.w3.org/1999/xhtml"><x:script>1</x:script></x:html>')
    status, headers, _ = get(served.server_address[1], f"/{instance.name}/results.xml")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert get(served.server_address[1], f"/{instance.name}/test_output.txt")[1]["Content-Type"].startswith("text/plain")


def test_instance_pages_are_rewritten_only_when_their_inputs_change(tmp_path):
    from harness.views.site import write_instance_page
    run = write_synthetic_run(tmp_path, "r", 2)
    first = sorted(p.name for p in run.iterdir() if p.is_dir())[0]
    assert write_instance_page(run, first, "r") is True
    assert write_instance_page(run, first, "r") is False  # unchanged inputs: skipped
    assert write_run_pages(run).unchanged_pages == 1  # the other one was written now
    assert write_run_pages(run).instance_pages == 0
    report = json.loads((run / first / "report.json").read_text())
    report["error_detail"] = "changed"
    (run / first / "report.json").write_text(json.dumps(report))
    assert write_instance_page(run, first, "r") is True
    with (run / first / "test_output.txt").open("a") as handle:
        handle.write("one more line\n")
    assert write_instance_page(run, first, "r") is True
    assert write_instance_page(run, first, "other-run-id") is True  # the run id is shown on the page


def test_attempt_runs_get_pass_k_and_linked_attempt_pages(tmp_path, capsys):
    from harness.compare import run_compare
    from tests.unit.test_compare import _parse, report as make_report, write_run
    attempts = {f"o__r-{i}": [make_report(f"o__r-{i}", ok, attempt=n + 1, calls=2, cost=0.5)
                              for n, ok in enumerate(outcomes)]
                for i, outcomes in enumerate([(True, False, True), (False, False, True), (False, False, False)])}
    run = write_run(tmp_path / "runs", "multi", {}, attempts=attempts)
    written = write_run_pages(run)
    assert written.instance_pages == 9
    html = (run / "report.html").read_text()
    assert "mean pass@k" in html and "polyline" in html
    page = (run / "o__r-0" / "attempt-2" / "report.html").read_text()
    assert 'href="../../o__r-0/attempt-1/report.html"' in page and "<strong>attempt 2</strong>" in page
    claims = write_json_file(tmp_path / "c.json", {"resolved": ["o__r-0"], "unresolved": ["o__r-1", "o__r-2"],
                                                   "no_prediction": []})
    assert run_compare(_parse(["compare", str(run), "--claimed", str(claims)])) == 0
    comparison = (run / "compare-claims-c.html").read_text()
    assert "mean pass@k" in comparison and "Repeated attempts" in comparison
    capsys.readouterr()


def write_json_file(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_json_view_of_the_run_report(hostile_run):
    from harness.views.json_view import to_dict
    report = load_run_report(hostile_run)
    data = json.loads(json.dumps(to_dict(report)))
    assert data["kind"] == "run_report"
    assert data["resolved"]["successes"] == report.resolved.successes
    assert [row["instance_id"] for row in data["instances"]] == [r.instance_id for r in report.instances]
    with pytest.raises(TypeError):
        to_dict({"not": "a result"})


def test_harness_view_command_prints_the_address(hostile_run):
    import subprocess
    import sys
    import urllib.request
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "view", str(hostile_run)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:(\d+)/report\.html)", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=10) as response:
            assert response.status == 200 and b"<title>Run hostile" in response.read()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_harness_view_refuses_a_directory_that_is_not_a_run(tmp_path, capsys):
    from harness.cli import main
    assert main(["view", str(tmp_path)]) == 2
    assert "summary.json" in capsys.readouterr().err


def test_a_malformed_report_is_shown_not_fatal(tmp_path):
    from harness.compare import load_run
    run = write_synthetic_run(tmp_path, "r", 4)
    broken = sorted(p.name for p in run.iterdir() if p.is_dir())[2]
    (run / broken / "report.json").write_text('{"instance_id": "%s", "resolved": "yes"}' % broken)
    with pytest.raises(ValueError, match="resolved"):
        load_run(run)  # comparisons refuse it
    written = write_run_pages(run)  # the pages show it
    report = load_run_report(run)
    row = next(r for r in report.instances if r.instance_id == broken)
    assert (row.status, row.resolved, row.page) == ("UNREADABLE", False, None)
    assert "resolved" in row.reason and any(broken in w for w in report.warnings)
    assert written.instance_pages == 3
    html = (run / "report.html").read_text()
    assert "UNREADABLE" in html and "report not readable" in html


# ------------------------------------------------------------- every summary the harness writes

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from harness.atomic import write_json_atomic
from harness.grading.status import ErrorReason, InstanceStatus  # noqa: E402
from harness.results.report import DISJOINT_FROM_RESOLVED, InstanceResult, summarise_run_directory  # noqa: E402
from harness.results.run_data import load_run  # noqa: E402

_POOL = [f"o__r-{n}" for n in range(1, 7)]
_VERDICT = st.one_of(st.sampled_from([(InstanceStatus.FULL, None), (InstanceStatus.PARTIAL, None),
                                      (InstanceStatus.NO, None)]),
                     st.tuples(st.just(InstanceStatus.INVALID), st.sampled_from(list(ErrorReason))))


@st.composite
def _graded(draw, instance_id: str, attempt: int | None) -> InstanceResult:
    """A result as grading leaves it: only FULL resolves, only INVALID carries a reason (its
    origin possibly moved by the evidence), any patch may be the empty one."""
    status, reason = draw(_VERDICT)
    empty = draw(st.booleans())
    return InstanceResult(instance_id=instance_id, repo="o/r", model_name_or_path="m", status=status,
                          resolved=status is InstanceStatus.FULL, attempt=attempt, error_reason=reason,
                          origin=draw(st.sampled_from([None, "model", "instance", "harness"])) if reason else None,
                          patch_exists=not empty, patch_is_None=empty and draw(st.booleans()),
                          f2p_success=["t::f"] if status is InstanceStatus.FULL else [],
                          f2p_failure=[] if status is InstanceStatus.FULL else ["t::f"],
                          timings={"total": 1.0},
                          # what an agent's prediction may say of the attempt (any of it absent)
                          cost=draw(st.none() | st.floats(0, 5)), calls=draw(st.none() | st.integers(0, 9)),
                          steps=draw(st.none() | st.integers(0, 40)),
                          agent_seconds=draw(st.none() | st.floats(0, 600)),
                          exit_status=draw(st.none() | st.sampled_from(["Submitted", "LimitsExceeded"])))


@st.composite
def _run_directory(draw):
    """What earlier sittings left in a run directory, and what the last sitting was asked:
    its instance set, the instances it had no prediction for, the records it refused, and
    the results it graded itself."""
    on_disk: dict[tuple[str, int | None], InstanceResult] = {}
    for instance_id in _POOL:
        layout = draw(st.sampled_from(["none", "flat", "attempts"]))
        attempts = [None] if layout == "flat" else list(range(1, draw(st.integers(1, 3)) + 1))
        for attempt in attempts if layout != "none" else []:
            on_disk[(instance_id, attempt)] = draw(_graded(instance_id, attempt))
    set_ids = draw(st.lists(st.sampled_from(_POOL), unique=True))
    refused = draw(st.lists(st.sampled_from(set_ids), unique=True)) if set_ids else []
    without = [i for i in set_ids if i not in refused and draw(st.booleans())]
    graded_now = [i for i in set_ids if i not in refused and i not in without]
    for instance_id in graded_now:  # a sitting grades (or reuses) every instance it has a prediction for
        if not any(key[0] == instance_id for key in on_disk):
            on_disk[(instance_id, None)] = draw(_graded(instance_id, None))
    fresh = [key for key in on_disk if key[0] in graded_now]
    return on_disk, set_ids, {i: f"record {i!r}, field 'repo': bad" for i in refused}, without, fresh


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_run_directory())
def test_every_summary_the_harness_writes_renders(tmp_path_factory, drawn):
    """The pages (and the strict reader the comparisons use) accept every summary
    summarise_run_directory can write: an empty patch that resolves, a result from an earlier
    sitting for an instance this sitting had no prediction for or refused, attempts."""
    on_disk, set_ids, input_errors, without, fresh = drawn
    root = tmp_path_factory.mktemp("run")
    for (instance_id, attempt), result in on_disk.items():
        where = root / instance_id / ("" if attempt is None else f"attempt-{attempt}")
        where.mkdir(parents=True, exist_ok=True)
        write_json_atomic(where / "report.json", result.to_report())
    summary = summarise_run_directory("r", "m", root, [*set_ids, *input_errors], fresh, input_errors, without)
    write_json_atomic(root / "summary.json", summary)
    resolved = set(summary["resolved_ids"])
    assert all(not resolved & set(summary[key]) for key in DISJOINT_FROM_RESOLVED), summary
    run = load_run(root)
    assert set(run.outcomes) >= {i for i, _ in on_disk} | set(set_ids) | set(input_errors)
    # a result an earlier sitting left for a record this sitting refused is an error now: said, not hidden
    assert {w.split(":")[0] for w in run.warnings if "disagree" in w} <= set(input_errors), run.warnings
    site = write_run_pages(root)
    assert site.page.is_file() and not site.failed_pages
    assert site.instance_pages + site.unchanged_pages == len(on_disk)
    # summary.json's agent block (from the reports as the summary reads them) and the pages'
    # (from the reports as run_data reads them) are one vector
    shown = load_run_report(root).agent
    assert summary.get("agent") == (shown.to_json() if shown else None)
