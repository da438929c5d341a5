"""Report rendering: the HTML pages of a large run against the time of one evaluation.

A synthetic run directory of ``--n`` instances is written in the harness's own format
(``tests/runs.py``: reports from ``InstanceResult.to_report()``, a summary from
``summarise()``, a ~40-line patch, a ``--output-bytes`` test output and an instance record
each).  Then, interleaved for ``--rounds`` rounds, in subprocesses:

* **all pages, cold** — ``write_run_pages(RUN)`` (what ``harness report`` calls) with no
  page on disk: report.html, report.md and one page per instance;
* **end of a run** — the same call when every instance page is current (``harness run``
  writes each instance's page as the instance finishes): report.html and report.md, the
  instance pages' fingerprints checked;
* **one evaluation** — ``harness run`` of one demo instance with its gold patch, warm
  images (the cheapest real evaluation there is; a SWE-bench instance takes 3–60 s).

Finally the 1,000-instance page is opened in headless Chromium: load time, and the time
the page's script takes to filter, sort and turn a page of the instance table.

    .venv/bin/python benchmarks/report_render.py [--n 1000] [--rounds 3] [--output-bytes 20000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

sys.path.insert(0, str(C.PROJECT_ROOT))
from tests.runs import write_synthetic_run  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--output-bytes", type=int, default=20_000)
    p.add_argument("--cache-dir", type=Path, default=C.DEFAULT_CACHE)
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("--out", type=Path, help="raw JSON (default benchmarks/results/report_render.json)")
    return p.parse_args(argv)


def timed(argv: list[str]) -> dict:
    """Run a command; wall time and peak RSS (ru_maxrss via wait4)."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=C.PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - started
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {argv}\n{out}\n{err}")
    return {"elapsed": elapsed, "maxrss_kb": usage.ru_maxrss, "cpu": usage.ru_utime + usage.ru_stime, "stdout": out}


def size_of(paths) -> int:
    return sum(p.stat().st_size for p in paths)


def browser_figures(run: Path) -> dict:
    from tests.browser.chromium import chromium, console_errors
    with chromium() as driver:
        started = time.monotonic()
        driver.get(run.joinpath("report.html").as_uri())
        wall = time.monotonic() - started
        nav = driver.execute_script(
            "var n = performance.getEntriesByType('navigation')[0];"
            "return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd};")
        rows = driver.execute_script("return document.querySelectorAll('#instance-table tbody tr').length")
        js = """
          var box = document.getElementById('filter-text'), t0 = performance.now();
          box.value = 'django'; box.dispatchEvent(new Event('input'));
          var filtered = performance.now() - t0, shown = document.getElementById('page-info').textContent;
          box.value = ''; box.dispatchEvent(new Event('input'));
          var header = document.querySelector("#instance-table th[data-key='seconds']");
          t0 = performance.now(); header.click(); var sorted = performance.now() - t0;
          t0 = performance.now(); document.getElementById('page-next').click(); var paged = performance.now() - t0;
          return {filter_ms: filtered, sort_ms: sorted, next_page_ms: paged, filter_info: shown};
        """
        timings = [driver.execute_script(js) for _ in range(3)]
        first = sorted(run.glob("*/report.html"))[0]
        started = time.monotonic()
        driver.get(first.as_uri())
        instance_wall = time.monotonic() - started
        errors = console_errors(driver)
    return {"load_wall_s": wall, "dom_content_loaded_ms": nav["dom"], "load_event_ms": nav["load"],
            "rows_rendered": rows, "interactions": timings, "instance_page_wall_s": instance_wall,
            "console_errors": errors}


def main(argv=None) -> int:
    args = parse_args(argv)
    machine = C.machine_info()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        started = time.monotonic()
        run = write_synthetic_run(work, "synthetic", args.n, output_bytes=args.output_bytes)
        build = time.monotonic() - started
        render = [sys.executable, "-c", "import sys; from harness.views.site import write_run_pages; "
                  "s = write_run_pages(sys.argv[1]); print(s.instance_pages, s.unchanged_pages)", str(run)]
        eval_args = C.harness_args(instances=C.DEMO_DIR / "instances.jsonl", predictions="gold", run_id="warmup",
                                   output_dir=work / "eval", cache_dir=args.cache_dir)
        C.run_cli([*eval_args, "--instance-ids", C.DEMO_IDS[0]])  # warm the images
        pages, warm, evaluations = [], [], []
        for round_ in range(args.rounds):
            order = ("pages", "eval") if round_ % 2 == 0 else ("eval", "pages")
            for what in order:
                if what == "pages":
                    for page in run.glob("*/report.html"):
                        page.unlink()
                    pages.append(timed(render))  # cold: every page rendered
                    assert pages[-1]["stdout"].split() == [str(args.n), "0"], pages[-1]["stdout"]
                    warm.append(timed(render))  # end of a run: instance pages already written
                    assert warm[-1]["stdout"].split() == ["0", str(args.n)], warm[-1]["stdout"]
                else:
                    eval_args = C.harness_args(instances=C.DEMO_DIR / "instances.jsonl", predictions="gold",
                                               run_id=f"eval-{round_}", output_dir=work / "eval",
                                               cache_dir=args.cache_dir)
                    cli = C.run_cli([*eval_args, "--instance-ids", C.DEMO_IDS[0], "--force"])
                    if cli.returncode != 0:
                        raise SystemExit(cli.stderr)
                    report = json.loads((work / "eval" / f"eval-{round_}" / C.DEMO_IDS[0] / "report.json").read_text())
                    evaluations.append({"elapsed": cli.elapsed, "timings_total": report["timings"]["total"]})
        sizes = {"report_html": (run / "report.html").stat().st_size, "report_md": (run / "report.md").stat().st_size,
                 "instance_pages": size_of(run.glob("*/report.html")),
                 "run_dir_inputs": size_of(p for p in run.rglob("*") if p.is_file() and p.suffix in (".json", ".txt", ".diff"))}
        browser = None if args.no_browser else browser_figures(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    page_t = [p["elapsed"] for p in pages]
    warm_t = [p["elapsed"] for p in warm]
    eval_t = [e["elapsed"] for e in evaluations]
    print(C.header(f"Report rendering: {args.n} instances", machine))
    print(f"synthetic run written in {build:.1f} s; inputs {sizes['run_dir_inputs'] / 1e6:.1f} MB "
          f"({args.output_bytes} B test output per instance)\n")
    print(C.markdown_table(
        ["what (subprocess, wall)", "rounds", "median s", "min s", "max s", "peak RSS MB"],
        [[f"all pages, cold: run page + {args.n} instance pages", len(page_t), C.fmt(C.median(page_t)),
          C.fmt(min(page_t)), C.fmt(max(page_t)), C.fmt(max(p["maxrss_kb"] for p in pages) / 1024, 0)],
         ["end of a run: run page; instance pages current", len(warm_t), C.fmt(C.median(warm_t)),
          C.fmt(min(warm_t)), C.fmt(max(warm_t)), C.fmt(max(p["maxrss_kb"] for p in warm) / 1024, 0)],
         ["one evaluation (`harness run`, 1 demo instance, warm)", len(eval_t), C.fmt(C.median(eval_t)),
          C.fmt(min(eval_t)), C.fmt(max(eval_t)), ""]]))
    print(f"\nratios to one evaluation: end of run {C.median(warm_t) / C.median(eval_t):.2f}, all pages cold "
          f"{C.median(page_t) / C.median(eval_t):.2f} (per instance page, written as the instance finishes: "
          f"{(C.median(page_t) - C.median(warm_t)) / args.n * 1000:.1f} ms); one evaluation's own "
          f"timings.total: {C.median([e['timings_total'] for e in evaluations]):.2f} s\n")
    print(C.markdown_table(["file", "bytes"], [[k, f"{v:,}"] for k, v in sizes.items()]))
    if browser:
        inter = browser["interactions"]
        print("\nheadless Chromium, report.html of the synthetic run:\n")
        print(C.markdown_table(
            ["figure", "value"],
            [["navigation to load event (ms)", C.fmt(browser["load_event_ms"], 0)],
             ["DOMContentLoaded (ms)", C.fmt(browser["dom_content_loaded_ms"], 0)],
             ["rows rendered (page size 50)", browser["rows_rendered"]],
             ["filter 'django' (ms, 3 tries)", " / ".join(C.fmt(i["filter_ms"], 1) for i in inter)],
             ["sort by seconds (ms)", " / ".join(C.fmt(i["sort_ms"], 1) for i in inter)],
             ["next page (ms)", " / ".join(C.fmt(i["next_page_ms"], 1) for i in inter)],
             ["one instance page, get() wall (s)", C.fmt(browser["instance_page_wall_s"])],
             ["console errors", len(browser["console_errors"])]]))
    path = C.write_results("report_render", {"machine": machine, "command": C.command_line(), "n": args.n,
                                             "pages": pages, "warm": warm, "evaluations": evaluations, "sizes": sizes,
                                             "browser": browser, "synthetic_build_s": build}, args.out)
    print(f"\nraw data: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
