"""textkit: small string helpers."""

from textkit.slug import slugify
from textkit.truncate import truncate

__all__ = ["slugify", "truncate"]
__version__ = "1.0.0"
