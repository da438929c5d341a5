"""URL slugs."""

import re

_WHITESPACE = re.compile(r"\s+")


def slugify(text, sep="-"):
    """Return a lowercase slug for *text* whose words are joined by *sep*."""
    return _WHITESPACE.sub(sep, text.strip().lower())
