import pytest

from calcly.roman import to_roman


@pytest.mark.parametrize(
    "number,expected",
    [
        (1, "I"),
        (3, "III"),
        (4, "IV"),
        (8, "VIII"),
        (9, "IX"),
        (40, "XL"),
        (90, "XC"),
        (400, "CD"),
        (900, "CM"),
        (1666, "MDCLXVI"),
        (1994, "MCMXCIV"),
        (2023, "MMXXIII"),
    ],
)
def test_to_roman(number, expected):
    assert to_roman(number) == expected


def test_to_roman_returns_str():
    assert isinstance(to_roman(12), str)


@pytest.mark.parametrize("number", [0, -5, 4000])
def test_to_roman_rejects_out_of_range(number):
    with pytest.raises(ValueError):
        to_roman(number)
