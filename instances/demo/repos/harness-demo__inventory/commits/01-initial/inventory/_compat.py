"""Compatibility shims for old Python versions."""

try:
    from functools import cached_property
except ImportError:  # pragma: no cover - Python < 3.8
    cached_property = property

__all__ = ["cached_property"]
