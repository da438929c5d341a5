"""Basic arithmetic operations."""


def add(a, b):
    """Return the sum of *a* and *b*."""
    return a + b


def subtract(a, b):
    """Return *a* minus *b*."""
    return a - b
