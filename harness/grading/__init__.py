"""Pure grading: test statuses, result parsers (a registry), test-id conventions and the
grading rules. No I/O beyond strings."""

from harness.grading import reporter_parsers  # noqa: F401  (registers the sympy/unittest/django parsers)
