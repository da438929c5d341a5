"""Roman numerals."""

_NUMERALS = [
    (1000, "M"),
    (500, "D"),
    (100, "C"),
    (50, "L"),
    (10, "X"),
    (5, "V"),
    (1, "I"),
]


def to_roman(number):
    """Format a positive integer as a Roman numeral."""
    parts = []
    for value, symbol in _NUMERALS:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)
