"""The spread of a measured quantity (steps, seconds): its median, 95th percentile and
maximum (conventions: :mod:`harness.results.stats`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.results.stats.rates import percentile


@dataclass(frozen=True)
class Distribution:
    """Median, 95th percentile and maximum of the ``count`` values that were recorded.

    ``missing`` counts the items that recorded no value: they are left out of the
    percentiles (a value cannot be guessed) and counted here, never dropped silently.
    Percentiles interpolate linearly between order statistics (the common "type 7"
    definition: p of n sorted values is at position ``p * (n - 1)``).  All figures are
    ``None`` when no value was recorded.
    """

    count: int
    missing: int
    p50: float | None
    p95: float | None
    maximum: float | None


def distribution(values: Sequence[float | int | None]) -> Distribution:
    """:class:`Distribution` of ``values`` (``None`` entries: not recorded).

    Raises:
        ValueError: a value is not a finite number (bool included).
    """
    known: list[float] = []
    for index, value in enumerate(values):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"distribution: value {index} must be a finite number, got {value!r}")
        known.append(float(value))
    missing = len(values) - len(known)
    if not known:
        return Distribution(count=0, missing=missing, p50=None, p95=None, maximum=None)
    known.sort()
    return Distribution(count=len(known), missing=missing, p50=percentile(known, 0.5), p95=percentile(known, 0.95),
                        maximum=known[-1])
