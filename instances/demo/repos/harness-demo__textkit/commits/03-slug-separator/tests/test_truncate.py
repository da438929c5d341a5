from textkit.truncate import truncate


def test_short_text_is_unchanged():
    assert truncate("abc", 5) == "abc"


def test_long_text_is_shortened():
    assert truncate("abcdefghij", 6) == "abc..."


def test_custom_placeholder():
    assert truncate("abcdefghij", 4, placeholder="~") == "abc~"
