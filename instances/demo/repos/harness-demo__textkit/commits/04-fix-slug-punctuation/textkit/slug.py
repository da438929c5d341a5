"""URL slugs."""

import re

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text, sep="-"):
    """Return a lowercase slug for *text* whose words are joined by *sep*.

    Every run of characters other than ASCII letters and digits (spaces,
    punctuation, underscores, existing dashes) becomes a single *sep*, and
    leading or trailing separators are dropped.
    """
    return _NOT_ALNUM.sub(sep, text.lower()).strip(sep)
