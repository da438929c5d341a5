"""What the ``harness`` command prints: the live progress line, the results table, the
run directory and where its pages went (rich, on the terminal only; the run directory
holds everything in full).

Everything printed is input's as much as ours (model names, records' ids and fields, a
vendor's claims): while a command runs, ``sys.stdout`` and ``sys.stderr`` are
:class:`EscapingStream` objects (:func:`escaped_output`), which write every control character
(C0 but newline and tab, DEL, C1) as a visible escape, so no name reaches the terminal as a
control sequence; and the results table takes its cells as plain text (``rich.text.Text``),
never as markup, so a name like ``[/bold]`` is shown as written and cannot break it. Our own
styling is dropped on those streams (the progress line alone, fixed text and numbers, is
drawn on the raw terminal).
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, TextIO

#: what never reaches the terminal raw: C0 controls but newline and tab, DEL, C1 controls
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``)."""
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), text)


class EscapingStream:
    """A text stream that writes through :func:`escape_controls` (see the module docstring)."""

    escapes_controls = True

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(escape_controls(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def raw_stream(stream: Any) -> TextIO:
    """The terminal behind an :class:`EscapingStream` (for output that is ours alone)."""
    return stream.raw if isinstance(stream, EscapingStream) else stream


@contextmanager
def escaped_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` escape control characters while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(saved[0]), EscapingStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def show_result(result, table: bool) -> None:
    if table:
        print_table(result.results, result.summary)
    print(f"run directory: {result.run_dir}")
    print_pages(result.pages)


def render_pages(run_dir: Path) -> None:
    """The run's HTML report; a failure to render is said, never fatal (the results are written)."""
    from harness.run.session import write_pages
    print_pages(write_pages(run_dir))


def print_pages(pages) -> None:
    if pages.error is not None:
        print(f"harness: report.html not written: {pages.error}", file=sys.stderr)
        return
    for failure in pages.failed_pages:
        print(f"harness: {failure}", file=sys.stderr)
    print(f"report: {pages.page}")


class ProgressLine:
    """A live progress line (done / resolved / errors / ETA) for interactive batches,
    fed by the session's events."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.resolved = 0
        self.errors = 0
        self._progress: Any = None   # a rich Progress, while one is shown
        self._task: Any = None

    def __enter__(self):
        return self

    def start(self, total: int) -> None:
        if self.enabled and total > 1:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            self._progress = Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}"),
                                      TimeRemainingColumn(), transient=True,
                                      console=Console(file=raw_stream(sys.stderr)))
            self._progress.start()
            self._task = self._progress.add_task("grading", total=total, resolved=0, errors=0)

    def update(self, event) -> None:
        result = event.result
        self.resolved += int(result.resolved)
        self.errors += int(bool(result.error_reason and result.error_origin != "model"))
        if self._progress is not None:
            self._progress.update(self._task, advance=1, resolved=self.resolved, errors=self.errors)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


#: More rows than this are not printed (summary.json and report.html have them all).
TABLE_ROWS = 200


def print_table(results, summary) -> None:
    from itertools import islice
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: object) -> Text:   # plain text: no markup is read, no control character kept
        return Text(escape_controls(str(value)))

    table = Table(title=cell(f"run {summary['run_id']} ({summary['model_name_or_path']})"))
    for column in ("instance", "status", "resolved", "F2P", "P2P", "reason"):
        table.add_column(column)
    shown = sorted(islice(results, TABLE_ROWS + 1), key=lambda r: (r.instance_id, r.attempt or 0))
    for r in shown[:TABLE_ROWS]:
        f2p = f"{len(r.f2p_success)}/{len(r.f2p_success) + len(r.f2p_failure)}"
        p2p = f"{len(r.p2p_success)}/{len(r.p2p_success) + len(r.p2p_failure)}"
        name = r.instance_id if r.attempt is None else f"{r.instance_id}#{r.attempt}"
        table.add_row(*map(cell, (name, r.status.value, "yes" if r.resolved else "no", f2p, p2p,
                                  r.error_reason.value if r.error_reason else "")))
    escaping = isinstance(sys.stdout, EscapingStream)
    console = Console(file=sys.stdout, color_system=None if escaping else "auto", highlight=False)
    console.print(table)
    if len(shown) > TABLE_ROWS:
        console.print(cell(f"(first {TABLE_ROWS} rows; every instance is in summary.json)"))
    console.print(cell(f"resolved {summary['resolved_instances']} of {summary['total_instances']}"
                       f" (errors {summary['error_instances']}, invalid {len(summary['invalid_ids'])})"))
