"""calcly: tiny arithmetic helpers."""

from calcly.ops import add, subtract

__all__ = ["add", "subtract"]
__version__ = "1.0.0"
