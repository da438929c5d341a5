"""Shorten text for display."""


def truncate(text, width, placeholder="..."):
    """Return *text* shortened to at most *width* characters."""
    if len(text) <= width:
        return text
    keep = max(width - len(placeholder), 0)
    return text[:keep] + placeholder
