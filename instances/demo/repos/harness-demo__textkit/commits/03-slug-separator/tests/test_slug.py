import pytest

from textkit.slug import slugify


@pytest.mark.parametrize("text,expected", [("hello", "hello"), ("Hello", "hello"), ("abc123", "abc123")])
def test_slugify_simple(text, expected):
    assert slugify(text) == expected


def test_slugify_spaces():
    assert slugify("  Hello big   World ") == "hello-big-world"


def test_slugify_custom_separator():
    assert slugify("a b c", sep="_") == "a_b_c"
