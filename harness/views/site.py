"""Writing a run's pages: ``report.html`` and ``report.md`` at the top of the run
directory, and one ``report.html`` next to each instance's (or attempt's) ``report.json``.

Instance pages are written as instances finish (:func:`write_instance_page`, called from
the batch's progress hook) and again only when their inputs changed: each page carries
a fingerprint of what it was rendered from (``report.json``'s bytes, the size and
modification time of the patch, output and record, the run id, the attempts, and the
renderer's own code, templates and assets, and the other attempts' ``report.json``, whose
agent fields the page shows), and :func:`write_run_pages` skips a page whose
fingerprint still matches.  So the end of a long run renders the run page alone, and a
re-grade re-renders only what changed.

Pages are derived files: written atomically (temporary file, rename), without fsync; a
page lost to a crash is rewritten by ``harness report``.  One page that cannot be rendered
never stops the others: it is named in the run page's warnings instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from harness._version import __version__
from harness.atomic import atomic_open
from harness.paths import INSTANCE_RECORD, PATCH, TEST_OUTPUT, InstanceFiles, RunPaths
from harness.results.instance_detail import load_instance_detail
from harness.results.run_data import load_run
from harness.results.run_report import build_run_report
from harness.views.html import render_instance_page, render_run_report
from harness.views.markdown import render_run_markdown

__all__ = ["SitePaths", "write_run_pages", "write_instance_page", "page_hook"]

_MARKER = '<meta name="harness-page-inputs" content="'
_INPUT_FILES = (PATCH, TEST_OUTPUT, INSTANCE_RECORD)


def _renderer_version() -> str:
    """Hash of everything that shapes a page besides its data."""
    digest = hashlib.sha256(__version__.encode())
    package = resources.files("harness")
    for name in ("results/instance_detail.py", "views/html.py", "views/charts.py", "views/svg.py"):
        digest.update(package.joinpath(name).read_bytes())
    for folder in ("templates", "assets"):
        for item in sorted(package.joinpath("views", folder).iterdir(), key=lambda p: p.name):
            if item.is_file():
                digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()


_RENDERER = _renderer_version()


@dataclass(frozen=True)
class SitePaths:
    page: Path
    markdown: Path
    instance_pages: int  # written now
    unchanged_pages: int  # skipped: their inputs had not changed
    failed_pages: tuple[str, ...]


def _write(path: Path, text: str) -> None:
    # pages are rendered again from report.json when lost, so no fsync per page
    with atomic_open(path, "w", durable=False, encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(text)


def _fingerprint(root: Path, directory: Path, run_id: str, siblings: tuple[tuple[str, str], ...]) -> str:
    digest = hashlib.sha256(_RENDERER.encode())
    digest.update(json.dumps([run_id, siblings]).encode())
    digest.update(InstanceFiles(directory).report.read_bytes())
    for _, sibling in siblings:  # the page shows every attempt's agent fields
        try:
            digest.update(InstanceFiles(root / sibling).report.read_bytes())
        except OSError:
            digest.update(f"{sibling}:absent;".encode())
    for name in _INPUT_FILES:
        try:
            stat = (directory / name).stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
        except FileNotFoundError:
            digest.update(f"{name}:absent;".encode())
    return digest.hexdigest()[:32]


def _current(page: Path, fingerprint: str) -> bool:
    try:
        with page.open("rb") as handle:
            head = handle.read(1024).decode("utf-8", "replace")
    except OSError:
        return False
    return f"{_MARKER}{fingerprint}" in head


def write_instance_page(run_dir: str | os.PathLike[str], report_dir: str, run_id: str,
                        siblings: tuple[tuple[str, str], ...] = ()) -> bool:
    """(Re)write ``run_dir/report_dir/report.html`` if its inputs changed; True if written.

    Raises:
        InputError (ValueError): report.json is missing or malformed.
        OSError: the page cannot be written.
    """
    root = Path(run_dir)
    directory = root / report_dir
    fingerprint = _fingerprint(root, directory, run_id, siblings)
    page = InstanceFiles(directory).page
    if _current(page, fingerprint):
        return False
    html = render_instance_page(load_instance_detail(root, report_dir, run_id, siblings))
    _write(page, html.replace("<head>\n", f"<head>\n{_MARKER}{fingerprint}\">\n", 1))
    return True


def page_hook(run_dir: str | os.PathLike[str], run_id: str) -> Callable[[Any], None]:
    """A batch progress callback that writes each finished instance's page at once (the
    result carries ``instance_id`` and ``attempt``).  A page that fails is logged and left
    to :func:`write_run_pages`; the batch never notices."""
    from harness.logs import get_logger

    root = Path(run_dir)

    def on_result(result: Any) -> None:
        report_dir = result.instance_id if result.attempt is None else f"{result.instance_id}/attempt-{result.attempt}"
        try:
            write_instance_page(root, report_dir, run_id)
        except (ValueError, KeyError, TypeError, OSError) as exc:
            get_logger(run_id=run_id).warning("page.not_written", instance_id=result.instance_id, error=str(exc)[:300])

    return on_result


def write_run_pages(run_dir: str | os.PathLike[str]) -> SitePaths:
    """Render the run's pages from what is on disk (instance pages only where stale).

    Raises:
        InputError (ValueError): the run directory or its summary cannot be read.
        OSError: the run page cannot be written.
    """
    root = Path(run_dir).resolve()
    run = load_run(root, strict=False)  # one malformed report is shown as such, not fatal
    report = build_run_report(run)
    written = unchanged = 0
    failed: list[str] = []
    for outcome in run.outcomes.values():
        if outcome.figures is None:
            continue
        directories = list(dict.fromkeys([outcome.figures.report_dir, *outcome.figures.attempt_dirs]))
        siblings = tuple((f"attempt {d.rsplit('-', 1)[-1]}", d) for d in outcome.figures.attempt_dirs)
        for directory in directories:
            try:
                if write_instance_page(root, directory, run.run_id, siblings):
                    written += 1
                else:
                    unchanged += 1
            except (ValueError, KeyError, TypeError, OSError) as exc:  # one bad page is named, never fatal
                failed.append(f"{directory}: page not written: {exc}")
    if failed:
        report = dataclasses.replace(report, warnings=(*report.warnings, *failed))
    page, markdown = RunPaths(root).page, RunPaths(root).markdown
    _write(markdown, render_run_markdown(report))
    _write(page, render_run_report(report))
    return SitePaths(page=page, markdown=markdown, instance_pages=written, unchanged_pages=unchanged,
                     failed_pages=tuple(failed))
