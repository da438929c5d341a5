"""Writing a run's pages: ``report.html`` and ``report.md`` at the top of the run
directory, and one ``report.html`` next to each instance's (or attempt's) ``report.json``.

Pages are written atomically.  One instance page that cannot be rendered (a report a
newer or broken writer produced) never stops the others: it is named in the run page's
warnings instead.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from harness.report import write_text_atomic
from harness.results.instance_detail import load_instance_detail
from harness.results.run_data import INSTANCE_PAGE, load_run
from harness.results.run_report import build_run_report
from harness.views.html import render_instance_page, render_run_report
from harness.views.markdown import render_run_markdown

__all__ = ["RUN_PAGE", "SitePaths", "write_run_pages"]

RUN_PAGE = "report.html"
RUN_MARKDOWN = "report.md"


@dataclass(frozen=True)
class SitePaths:
    page: Path
    markdown: Path
    instance_pages: int
    failed_pages: tuple[str, ...]


def write_run_pages(run_dir: str | os.PathLike[str]) -> SitePaths:
    """Render the run's pages from what is on disk.

    Raises:
        InputError (ValueError): the run directory or its summary cannot be read.
        OSError: a page cannot be written.
    """
    root = Path(run_dir).resolve()
    run = load_run(root)
    report = build_run_report(run)
    written, failed = 0, []
    for outcome in run.outcomes.values():
        if outcome.figures is None:
            continue
        directories = list(dict.fromkeys([outcome.figures.report_dir, *outcome.figures.attempt_dirs]))
        siblings = tuple((f"attempt {d.rsplit('-', 1)[-1]}", d) for d in outcome.figures.attempt_dirs)
        for directory in directories:
            try:
                detail = load_instance_detail(root, directory, run.run_id, siblings)
                write_text_atomic(root / directory / INSTANCE_PAGE, render_instance_page(detail))
                written += 1
            except (ValueError, KeyError, TypeError) as exc:  # a malformed report: named, never fatal
                failed.append(f"{directory}: page not written: {exc}")
    if failed:
        report = dataclasses.replace(report, warnings=(*report.warnings, *failed))
    page, markdown = root / RUN_PAGE, root / RUN_MARKDOWN
    write_text_atomic(markdown, render_run_markdown(report))
    write_text_atomic(page, render_run_report(report))
    return SitePaths(page=page, markdown=markdown, instance_pages=written, failed_pages=tuple(failed))
