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
    """Return the median (middle value) of *values*.

    The data is sorted first.  For an even number of values the median is
    the mean of the two middle values.
    """
    data = sorted(values)
    if not data:
        raise StatsError("median() of empty data")
    mid = len(data) // 2
    if len(data) % 2:
        return data[mid]
    return divide(add(data[mid - 1], data[mid]), 2)
