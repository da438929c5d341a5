"""Descriptive statistics for small lists of numbers."""

from calcly.ops import add, divide


class StatsError(ValueError):
    """Raised when a statistic is undefined for the given data."""


def mean(values):
    """Return the arithmetic mean of *values*."""
    data = list(values)
    if not data:
        raise StatsError("mean() of empty data")
    total = 0
    for value in data:
        total = add(total, value)
    return divide(total, len(data))


def median(values):
    """Return the median (middle value) of *values*."""
    data = list(values)
    if not data:
        raise StatsError("median() of empty data")
    return data[len(data) // 2]
