"""textkit: small string helpers."""

from textkit.slug import slugify

__all__ = ["slugify"]
__version__ = "1.0.0"
