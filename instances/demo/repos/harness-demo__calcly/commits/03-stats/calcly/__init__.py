"""calcly: tiny arithmetic and statistics helpers."""

from calcly.ops import add, divide, multiply, subtract
from calcly.stats import StatsError, mean, median

__all__ = ["StatsError", "add", "divide", "mean", "median", "multiply", "subtract"]
__version__ = "1.0.0"
