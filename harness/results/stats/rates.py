"""Intervals, paired tests and pass@k: the pure statistics of single and paired rates
(conventions: :mod:`harness.results.stats`)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist


# --------------------------------------------------------------------------- validation


def check_int(name: str, value: object, *, minimum: int = 0) -> int:
    # bool is an int subclass; True as a count is almost always a bug upstream.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise ValueError(f"confidence must be a float in (0, 1), got {confidence!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(confidence)


def _z_for(confidence: float) -> float:
    """Two-sided standard-normal quantile, e.g. 1.95996 for 95%."""
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


# --------------------------------------------------------------------------- single rate


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``.

    Denominator: ``n``, the number of instances the rate is over (the caller must pass
    every assigned instance, not only the ones that ran).  Units: proportions in
    [0, 1] (not percent).  The interval always lies in [0, 1] and contains
    ``successes / n``; it is exact at the boundaries (0 successes gives low 0.0, ``n``
    successes gives high 1.0).

    Example: 75 of 100 at 95% gives about (0.657, 0.825).

    Raises:
        ValueError: ``n`` is 0 (a rate over nothing is undefined) or negative,
            ``successes`` is outside ``0..n``, either is not an int, or ``confidence``
            is not in (0, 1).
    """
    check_int("n", n)
    check_int("successes", successes)
    confidence = _check_confidence(confidence)
    if n == 0:
        raise ValueError("wilson_interval: n must be > 0 (no instances, no rate)")
    if successes > n:
        raise ValueError(f"wilson_interval: successes ({successes}) > n ({n})")
    z = _z_for(confidence)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n)) / (1.0 + z2n)
    # Pin the boundaries exactly: floating error would otherwise give -1e-17 or a
    # bound a hair inside the point estimate at p = 0 or p = 1.
    low = 0.0 if successes == 0 else max(0.0, min(p, centre - half))
    high = 1.0 if successes == n else min(1.0, max(p, centre + half))
    return (low, high)


#: the confidence of every interval the results show
CONFIDENCE = 0.95


@dataclass(frozen=True)
class RateWithInterval:
    """``successes / denominator`` with a Wilson interval; ``denominator_note`` says what was counted."""

    label: str
    successes: int
    denominator: int
    rate: float
    ci_low: float
    ci_high: float
    confidence: float
    denominator_note: str


def rate_with_interval(label: str, successes: int, denominator: int, note: str) -> RateWithInterval:
    """A rate with its Wilson interval at :data:`CONFIDENCE`; a rate over nothing is 0 with
    the interval [0, 1] (it says nothing)."""
    if denominator == 0:
        return RateWithInterval(label=label, successes=0, denominator=0, rate=0.0, ci_low=0.0, ci_high=1.0,
                                confidence=CONFIDENCE, denominator_note=note)
    low, high = wilson_interval(successes, denominator, CONFIDENCE)
    return RateWithInterval(label=label, successes=successes, denominator=denominator,
                            rate=successes / denominator, ci_low=low, ci_high=high,
                            confidence=CONFIDENCE, denominator_note=note)


# --------------------------------------------------------------------------- paired tests


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test (binomial test on the discordant pairs).

    ``b`` and ``c`` are the two discordant counts of a paired 2x2 table (instances
    where only the first system succeeded, and where only the second did).  Under the
    null hypothesis ``b ~ Binomial(b + c, 1/2)``; the p-value is twice the smaller
    tail, capped at 1.  Denominator: the ``b + c`` discordant instances only —
    agreements carry no information about which system is better.  Computed exactly
    with integers, returned as a float probability in (0, 1].

    Examples: ``b=8, c=22`` gives about 0.0161; ``b=c=0`` gives 1.0.

    Raises:
        ValueError: ``b`` or ``c`` is negative or not an int.
    """
    check_int("b", b)
    check_int("c", c)
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def _check_nck(n: int, c: int, k: int) -> None:
    check_int("n", n, minimum=1)
    check_int("c", c)
    check_int("k", k, minimum=1)
    if c > n:
        raise ValueError(f"c ({c}) must be <= n ({n})")
    if k > n:
        raise ValueError(f"k ({k}) must be <= n ({n}): cannot draw {k} of {n} attempts")


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass@k for one instance: ``1 - C(n-c, k) / C(n, k)``.

    The probability that at least one of ``k`` attempts drawn without replacement from
    the ``n`` observed attempts (``c`` of them successful) succeeds.  Denominator:
    ``C(n, k)``, the number of ways to choose ``k`` of the instance's ``n`` attempts.
    Returned as an exact :class:`~fractions.Fraction` in [0, 1] so that averages over
    instances are exact and order-independent; call ``float()`` for display.

    Examples: ``n=8, c=4, k=4`` gives 69/70; ``n=5, c=2, k=2`` gives 7/10.

    Raises:
        ValueError: ``k > n`` (not enough attempts to estimate), ``n < 1``, ``k < 1``,
            ``c`` outside ``0..n``, or a non-int argument.
    """
    _check_nck(n, c, k)
    # math.comb(n - c, k) is 0 when fewer than k failures exist: pass@k is then 1.
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass^k for one instance: ``C(c, k) / C(n, k)``.

    The probability that *all* ``k`` attempts drawn without replacement from the
    ``n`` observed attempts (``c`` successful) succeed — a reliability figure.
    Denominator: ``C(n, k)``.  Returned as an exact :class:`~fractions.Fraction` in
    [0, 1].

    Example: ``n=8, c=4, k=4`` gives 1/70.

    Raises:
        ValueError: same conditions as :func:`pass_at_k` (``k > n`` included).
    """
    _check_nck(n, c, k)
    return Fraction(math.comb(c, k), math.comb(n, k))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (the common "type 7" definition) of sorted data."""
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def paired_bootstrap_diff(a: Sequence[bool], b: Sequence[bool], iterations: int = 10000,
                          seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """Paired percentile bootstrap for the difference of two success rates, ``rate(b) - rate(a)``.

    ``a[i]`` and ``b[i]`` are the two systems' outcomes on the same instance ``i``.
    Each replicate resamples *instances* with replacement (keeping each pair
    together), so between-instance difficulty cancels.  Denominator of each rate:
    ``len(a)`` (== ``len(b)``) instances.  Units: difference of proportions, in
    [-1, 1]; positive means ``b`` resolves more.  Returns ``(diff, low, high)`` where
    ``diff`` is the observed difference and ``(low, high)`` the percentile interval at
    ``confidence``.

    The result depends only on the multiset of pairs and ``seed``: pairs are put in a
    canonical order before resampling, so shuffling the instances cannot move the
    interval.

    Raises:
        ValueError: the lists differ in length or are empty, ``iterations < 1``, or
            ``confidence`` is not in (0, 1).
    """
    if len(a) != len(b):
        raise ValueError(f"paired_bootstrap_diff: a has {len(a)} outcomes, b has {len(b)}; pairs must match")
    if not a:
        raise ValueError("paired_bootstrap_diff: no instances")
    check_int("iterations", iterations, minimum=1)
    check_int("seed", seed)
    confidence = _check_confidence(confidence)
    n = len(a)
    # Per-instance contribution to the difference: -1, 0 or +1.  Sorting makes the
    # resampling independent of the order the caller listed instances in.
    deltas = sorted(int(bool(y)) - int(bool(x)) for x, y in zip(a, b))
    observed = sum(deltas) / n
    rng = random.Random(seed)
    replicates = sorted(sum(rng.choices(deltas, k=n)) / n for _ in range(iterations))
    alpha = 1.0 - confidence
    return (observed, percentile(replicates, alpha / 2.0), percentile(replicates, 1.0 - alpha / 2.0))
