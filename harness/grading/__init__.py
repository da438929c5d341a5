"""Pure grading: test statuses, result parsers and the grading rules. No I/O beyond strings."""
