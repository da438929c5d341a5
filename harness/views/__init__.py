"""Views of the result model (:mod:`harness.results`): JSON, Markdown and HTML.

Views compute no figure of their own; they render what the model holds.

    json_view.py   any result dataclass as JSON
    markdown.py    comparisons and runs as Markdown
    html.py        self-contained HTML pages (Jinja2, autoescaped, CSP-locked)
    charts.py      which pictures a page shows; svg.py draws them (plain SVG)
    site.py        a run directory's pages: report.html, report.md, <instance>/report.html
    serve.py       ``harness view``: a run directory over HTTP on 127.0.0.1
    templates/     Jinja2 templates; assets/ the inline stylesheet and script
"""
