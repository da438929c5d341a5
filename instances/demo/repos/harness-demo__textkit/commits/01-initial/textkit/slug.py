"""URL slugs."""

import re

_WHITESPACE = re.compile(r"\s+")


def slugify(text):
    """Return a lowercase, dash-separated slug for *text*."""
    return _WHITESPACE.sub("-", text.strip().lower())
