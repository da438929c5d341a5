"""inventory: a tiny in-memory stock ledger."""

from inventory.stock import InsufficientStock, Inventory

__all__ = ["InsufficientStock", "Inventory"]
__version__ = "1.0.0"
