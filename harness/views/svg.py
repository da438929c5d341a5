"""Charts as plain inline SVG, built by a minimal element writer.

Every text node and attribute value goes through :func:`markupsafe.escape`, so labels
that came from instance records (repository names, test ids) can never become markup.  Colours come
from the page's stylesheet through class names (no ``style`` attributes: the pages'
Content-Security-Policy forbids them).  Nothing is fetched: a chart is a string.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "interval_chart", "box_chart", "diverging_chart", "timeline_chart", "line_chart"]

_LABEL_CHARS = 34


@dataclass(frozen=True)
class Bar:
    """One row of an interval chart: ``rate`` in [0, 1] with its interval and a caption."""

    label: str
    rate: float
    low: float
    high: float
    caption: str
    css: str = "bar"


class _Node:
    """A minimal SVG element: tag, attributes, children, text; serialised with every
    attribute value and text escaped (markupsafe.escape: & < > " ')."""

    __slots__ = ("tag", "attrs", "children", "text")

    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.children, self.text = tag, attrs, [], ""

    def render(self, out: list[str]) -> None:
        attrs = "".join(f' {name}="{escape(value)}"' for name, value in self.attrs.items())
        out.append(f"<{self.tag}{attrs}>")
        if self.text:
            out.append(str(escape(self.text)))
        for child in self.children:
            child.render(out)
        out.append(f"</{self.tag}>")


def _root(width: float, height: float, label: str) -> _Node:
    return _Node("svg", {"xmlns": "http://www.w3.org/2000/svg", "class": "chart", "role": "img",
                         "aria-label": label, "width": f"{width:g}", "height": f"{height:g}",
                         "viewBox": f"0 0 {width:g} {height:g}"})


def _number(value: float | str) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _el(parent: _Node, tag: str, css: str | None = None, **attrs: float | str) -> _Node:
    values = {k.rstrip("_").replace("_", "-"): _number(v) for k, v in attrs.items()}
    if css:
        values["class"] = css
    node = _Node(tag, values)
    parent.children.append(node)
    return node


def _text(parent: _Node, x: float, y: float, text: str, css: str = "label", anchor: str = "start",
          full: str | None = None) -> _Node:
    node = _el(parent, "text", css, x=x, y=y, text_anchor=anchor)
    node.text = text
    if full is not None and full != text:
        _el(node, "title").text = full
    return node


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _markup(root: _Node) -> Markup:
    out: list[str] = []
    root.render(out)
    return Markup("".join(out))


def _clamp(value: float) -> float:
    return 0.0 if not math.isfinite(value) else min(1.0, max(0.0, value))


def interval_chart(bars: Sequence[Bar], label: str) -> Markup:
    """Horizontal bars (rates) with interval whiskers, on a 0–100 % axis."""
    left, plot, right, row, top = 230.0, 360.0, 150.0, 24.0, 22.0
    height = top + row * len(bars) + 8
    root = _root(left + plot + right, height, label)
    for tick in (0, 25, 50, 75, 100):
        x = left + plot * tick / 100
        _el(root, "line", "grid", x1=x, x2=x, y1=top - 4, y2=height - 6)
        _text(root, x, 13, f"{tick}%", "tick", "middle")
    for i, bar in enumerate(bars):
        y = top + i * row
        _text(root, left - 8, y + 15, _short(bar.label), "label", "end", full=bar.label)
        width = plot * _clamp(bar.rate)
        rect = _el(root, "rect", bar.css, x=left, y=y + 4, width=max(width, 0.5), height=row - 8)
        _el(rect, "title").text = f"{bar.label}: {bar.caption}"
        low, high = left + plot * _clamp(bar.low), left + plot * _clamp(bar.high)
        mid = y + row / 2
        _el(root, "line", "whisker", x1=low, x2=high, y1=mid, y2=mid)
        for x in (low, high):
            _el(root, "line", "whisker", x1=x, x2=x, y1=mid - 5, y2=mid + 5)
        _text(root, left + plot + 8, y + 15, bar.caption, "value")
    return _markup(root)


def _scale(values: Sequence[float], plot: float) -> tuple[callable, list[tuple[float, str]], str]:
    """A seconds axis: logarithmic when the values span more than two decades."""
    positive = [v for v in values if v > 0]
    top = max(values, default=1.0) or 1.0
    if positive and top / min(positive) > 100:
        lo_exp, hi_exp = math.floor(math.log10(min(positive))), math.ceil(math.log10(top))
        hi_exp = max(hi_exp, lo_exp + 1)
        span = hi_exp - lo_exp

        def position(v: float) -> float:
            return plot * (math.log10(max(v, 10.0 ** lo_exp)) - lo_exp) / span

        ticks = [(position(10.0 ** e), f"{10.0 ** e:g} s") for e in range(lo_exp, hi_exp + 1)]
        return position, ticks, "seconds, log scale"
    step = _nice_step(top / 4)
    end = step * math.ceil(top / step)

    def position(v: float) -> float:
        return plot * v / end

    ticks = [(position(step * i), f"{step * i:g} s") for i in range(int(round(end / step)) + 1)]
    return position, ticks, "seconds"


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def box_chart(rows: Sequence[tuple[str, float, float, float, float, float, str]], label: str) -> Markup:
    """Box plots, one per row: (label, min, q1, median, q3, max, caption)."""
    left, plot, right, row, top = 150.0, 420.0, 170.0, 24.0, 22.0
    height = top + row * len(rows) + 24
    root = _root(left + plot + right, height, label)
    position, ticks, axis = _scale([v for r in rows for v in r[1:6]], plot)
    for x, tick in ticks:
        _el(root, "line", "grid", x1=left + x, x2=left + x, y1=top - 4, y2=height - 22)
        _text(root, left + x, 13, tick, "tick", "middle")
    _text(root, left + plot / 2, height - 6, axis, "tick", "middle")
    for i, (name, low, q1, median, q3, high, caption) in enumerate(rows):
        y = top + i * row
        mid = y + row / 2
        _text(root, left - 8, y + 15, _short(name, 20), "label", "end", full=name)
        _el(root, "line", "whisker", x1=left + position(low), x2=left + position(high), y1=mid, y2=mid)
        box = _el(root, "rect", "box", x=left + position(q1), y=y + 5,
                  width=max(position(q3) - position(q1), 1.0), height=row - 10)
        _el(box, "title").text = f"{name}: min {low:.3g} s, quartiles {q1:.3g} / {median:.3g} / {q3:.3g} s, max {high:.3g} s"
        _el(root, "line", "median", x1=left + position(median), x2=left + position(median), y1=y + 3, y2=y + row - 3)
        _text(root, left + plot + 8, y + 15, caption, "value")
    return _markup(root)


def diverging_chart(rows: Sequence[tuple[str, int, int]], left_label: str, right_label: str, label: str) -> Markup:
    """Counts to the left (e.g. broken) and to the right (e.g. fixed) of a centre line."""
    name_width, half, row, top = 230.0, 200.0, 24.0, 30.0
    centre = name_width + half
    height = top + row * len(rows) + 8
    root = _root(name_width + 2 * half + 40, height, label)
    peak = max([max(a, b) for _, a, b in rows] + [1])
    _text(root, centre - 8, 16, f"← {left_label}", "tick", "end")
    _text(root, centre + 8, 16, f"{right_label} →", "tick", "start")
    _el(root, "line", "axis", x1=centre, x2=centre, y1=top - 6, y2=height - 4)
    for i, (name, left_count, right_count) in enumerate(rows):
        y = top + i * row
        _text(root, name_width - 8, y + 15, _short(name), "label", "end", full=name)
        for count, css, sign in ((left_count, "bar-broken", -1), (right_count, "bar-fixed", 1)):
            width = half * 0.85 * count / peak
            x = centre - width if sign < 0 else centre
            rect = _el(root, "rect", css, x=x, y=y + 4, width=max(width, 0.5 if count else 0), height=row - 8)
            _el(rect, "title").text = f"{name}: {count} {left_label if sign < 0 else right_label}"
            if count:
                _text(root, x - 4 if sign < 0 else x + width + 4, y + 15, str(count), "value",
                      "end" if sign < 0 else "start")
    return _markup(root)


def timeline_chart(timings: Sequence[tuple[str, float]], label: str) -> Markup:
    """One stacked bar of phases in order; segment ``i`` has class ``seg{i % 8}`` (the page's
    table of phases carries the same classes as its key)."""
    width, height = 760.0, 24.0
    total = sum(seconds for _, seconds in timings) or 1.0
    root = _root(width, height, label)
    root.attrs.update({"class": "chart timeline", "preserveAspectRatio": "none"})  # stretched to the page width
    x = 0.0
    for i, (phase, seconds) in enumerate(timings):
        span = width * seconds / total
        rect = _el(root, "rect", f"seg seg{i % 8}", x=x, y=0.0, width=max(span, 0.5), height=height)
        _el(rect, "title").text = f"{phase}: {seconds:.3f} s"
        x += span
    return _markup(root)


def line_chart(series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]], x_label: str, label: str) -> Markup:
    """Lines of (name, css class, [(x, y in [0, 1])]) over integer x (e.g. k of pass@k)."""
    left, plot_w, plot_h, top = 50.0, 420.0, 160.0, 12.0
    root = _root(left + plot_w + 160, top + plot_h + 40, label)
    xs = [x for _, _, points in series for x, _ in points] or [1.0]
    x_min, x_max = min(xs), max(xs)
    span = (x_max - x_min) or 1.0

    def px(x: float) -> float:
        return left + plot_w * (x - x_min) / span

    def py(y: float) -> float:
        return top + plot_h * (1 - _clamp(y))

    for tick in (0, 0.5, 1):
        _el(root, "line", "grid", x1=left, x2=left + plot_w, y1=py(tick), y2=py(tick))
        _text(root, left - 6, py(tick) + 4, f"{tick:.0%}", "tick", "end")
    for x in sorted(set(xs)):
        _text(root, px(x), top + plot_h + 16, f"{x:g}", "tick", "middle")
    _text(root, left + plot_w / 2, top + plot_h + 34, x_label, "tick", "middle")
    for i, (name, css, points) in enumerate(series):
        if points:
            _el(root, "polyline", f"line {css}", points=" ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points))
            for x, y in points:
                dot = _el(root, "circle", f"dot {css}", cx=px(x), cy=py(y), r=3)
                _el(dot, "title").text = f"{name} at {x:g}: {y:.1%}"
        _el(root, "rect", f"key {css}", x=left + plot_w + 16, y=top + 18 * i, width=10, height=10)
        _text(root, left + plot_w + 30, top + 18 * i + 9, name, "value")
    return _markup(root)
