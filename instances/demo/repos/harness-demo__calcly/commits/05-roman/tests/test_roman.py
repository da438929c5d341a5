import pytest

from calcly.roman import to_roman


@pytest.mark.parametrize(
    "number,expected",
    [
        (1, "I"),
        (3, "III"),
        (8, "VIII"),
        (1666, "MDCLXVI"),
        (2023, "MMXXIII"),
    ],
)
def test_to_roman(number, expected):
    assert to_roman(number) == expected


def test_to_roman_returns_str():
    assert isinstance(to_roman(12), str)
