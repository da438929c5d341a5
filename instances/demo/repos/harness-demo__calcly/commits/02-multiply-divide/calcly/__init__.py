"""calcly: tiny arithmetic helpers."""

from calcly.ops import add, divide, multiply, subtract

__all__ = ["add", "divide", "multiply", "subtract"]
__version__ = "1.0.0"
