"""calcly: tiny arithmetic and statistics helpers."""

from calcly.ops import add, divide, multiply, subtract
from calcly.roman import to_roman
from calcly.stats import StatsError, mean, median

__all__ = ["StatsError", "add", "divide", "mean", "median", "multiply", "subtract", "to_roman"]
__version__ = "1.0.0"
