"""The HTML view: self-contained pages rendered from the result model with Jinja2.

Every page carries its stylesheet and script inline and fetches nothing (it opens from
``file://``, over ``harness view``, or as an e-mail attachment).  Safety rests on three
layers, none of which trusts the data:

* **autoescaping** — templates are autoescaped (text and quoted attributes); embedded
  JSON goes through Jinja's ``tojson``, which escapes ``<``, ``>``, ``&`` and ``'``, so
  ``</script>`` inside a patch or a test id cannot close the data block;
* **links** — built only from percent-encoded path segments (:func:`segment`,
  :func:`harness.results.run_data.page_path`): an instance id cannot become a scheme such
  as ``javascript:`` or climb out of its directory; ids never become element ids;
* **Content-Security-Policy** — ``default-src 'none'`` and script and style allowed only
  by the SHA-256 of this module's own asset text: even markup that slipped through could
  neither run a script nor load anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from harness._version import __version__
from harness.paths import PAGE
from harness.results.comparison import ClaimsComparison, Result, RunsComparison
from harness.results.instance_detail import InstanceDetail
from harness.results.run_report import STATUS_ORDER, RunReport
from harness.results.vendor_tests import CLASS_LABELS
from harness.views import charts

__all__ = ["render_run_report", "render_instance_page", "render_comparison", "segment", "relative_href"]


def _asset(name: str) -> str:
    return resources.files("harness.views").joinpath("assets", name).read_text(encoding="utf-8")


_CSS = _asset("report.css")
_JS = _asset("report.js")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


CSP = (f"default-src 'none'; img-src data:; style-src {_sha256(_CSS)}; script-src {_sha256(_JS)}; "
       "base-uri 'none'; form-action 'none'")


def segment(value: object) -> str:
    """One URL path segment: every character outside ``[A-Za-z0-9_.~-]`` percent-encoded."""
    return quote(str(value), safe="")


def relative_href(from_dir: str | os.PathLike[str], to_dir: str | os.PathLike[str], page: str | None) -> str | None:
    """URL of ``page`` (a URL path relative to ``to_dir``) as seen from a page in ``from_dir``."""
    if page is None:
        return None
    rel = os.path.relpath(os.path.abspath(to_dir), os.path.abspath(from_dir))
    prefix = "" if rel == "." else "/".join(segment(part) for part in Path(rel).parts) + "/"
    return prefix + page


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _pp(value: float) -> str:
    return f"{value * 100:+.1f} pp"


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _figure(value: float | None) -> str:
    """A count or a percentile of counts: whole numbers as such, others to two decimals."""
    if value is None:
        return "n/a"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _size(value: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("harness.views", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(pct=_pct, pp=_pp, seconds=_seconds, size=_size, segment=segment, money=_money, figure=_figure,
                       p=lambda value: f"{value:.4g}")
    env.globals.update(css=Markup(_CSS), js=Markup(_JS), csp=CSP, version=__version__, status_order=STATUS_ORDER)
    return env


_ENV = _environment()


def _common() -> dict:
    return {"generated_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def render_run_report(report: RunReport) -> str:
    """The run's page (``runs/<run_id>/report.html``)."""
    rows = [{"instance_id": r.instance_id, "repo": r.repo, "status": r.status, "reason": r.reason,
             "f2p_passed": r.f2p_passed, "f2p_total": r.f2p_total, "p2p_passed": r.p2p_passed,
             "p2p_total": r.p2p_total, "missing": r.missing, "flags": list(r.flags), "notes": list(r.notes),
             "seconds": r.seconds,
             "attempts": r.attempts, "attempts_resolved": r.attempts_resolved, "page": r.page}
            for r in report.instances]
    return _ENV.get_template("run.html.j2").render(
        report=report, rows=rows, repos=sorted({r.repo for r in report.instances}),
        pages={r.instance_id: r.page for r in report.instances},
        statuses=list(report.status_counts), charts=charts.run_charts(report), **_common())


def render_instance_page(detail: InstanceDetail) -> str:
    """One instance's page (``<instance_id>/report.html``); links are relative to its directory."""
    depth = len(detail.report_dir.split("/"))
    root = "../" * depth
    def href(directory: str) -> str:
        return root + "/".join(segment(p) for p in directory.split("/")) + "/" + PAGE

    siblings = [(label, href(directory), directory == detail.report_dir) for label, directory in detail.siblings]
    return _ENV.get_template("instance.html.j2").render(
        d=detail, root=root, siblings=siblings, attempt_hrefs={a.report_dir: href(a.report_dir)
                                                                for a in detail.agent_attempts},
        timeline=charts.instance_timeline(detail), **_common())


def render_comparison(result: Result, out_dir: str | os.PathLike[str]) -> str:
    """A comparison's page, written into ``out_dir`` (links to instance pages are relative to it)."""
    if isinstance(result, ClaimsComparison):
        links = {d.instance_id: relative_href(out_dir, result.run_dir, d.page) for d in result.discordant}
        return _ENV.get_template("claims.html.j2").render(
            r=result, links=links, run_href=relative_href(out_dir, result.run_dir, PAGE),
            charts=charts.claims_charts(result), class_labels=CLASS_LABELS, **_common())
    if isinstance(result, RunsComparison):
        links = {f.instance_id: (relative_href(out_dir, result.run_a.run_dir, f.page_a),
                                 relative_href(out_dir, result.run_b.run_dir, f.page_b)) for f in result.flips}
        return _ENV.get_template("runs.html.j2").render(
            r=result, links=links,
            run_hrefs=(relative_href(out_dir, result.run_a.run_dir, PAGE),
                       relative_href(out_dir, result.run_b.run_dir, PAGE)),
            charts=charts.runs_charts(result), **_common())
    raise TypeError(f"render_comparison: unsupported result {type(result).__name__}")
