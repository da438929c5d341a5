"""Command-line option types shared by every ``harness`` command.

Every numeric option is range-checked while the command line is parsed: a value out of
range (``--timeout -1``, ``--max-workers 0``) ends the command with exit status 2 and one
line naming the option and the allowed range, before anything is loaded or started. A
typo must never reach grading (a negative timeout would time out every test run and be
charged to the model).
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

#: marks the messages of these types, so that the parser prints them as one line
_RANGE = "allowed range"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _describe(kind: str, low: float, high: float) -> str:
    return f"{_RANGE}: {kind} from {_number(low)} to {_number(high)}"


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers in [low, high]."""
    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer ({_describe('an integer', low, high)})") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({_describe('an integer', low, high)})")
        return value
    convert.__name__ = "integer"
    return convert


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting finite numbers in [low, high]."""
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number ({_describe('a number', low, high)})") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range ({_describe('a number', low, high)})")
        return value
    convert.__name__ = "number"
    return convert


class Parser(argparse.ArgumentParser):
    """argparse, with range errors as one line (``harness run: error: argument --timeout:
    -1 is out of range (allowed range: an integer from 1 to 86400)``); other usage errors
    keep argparse's usage text. Sub-parsers inherit the class."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        if _RANGE in message:
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)

