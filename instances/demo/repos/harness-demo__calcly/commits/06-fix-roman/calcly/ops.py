"""Basic arithmetic operations."""


def add(a, b):
    """Return the sum of *a* and *b*."""
    return a + b


def subtract(a, b):
    """Return *a* minus *b*."""
    return a - b


def multiply(a, b):
    """Return the product of *a* and *b*."""
    return a * b


def divide(a, b):
    """Return *a* divided by *b* (true division).

    Raises ZeroDivisionError when *b* is zero.
    """
    return a / b
