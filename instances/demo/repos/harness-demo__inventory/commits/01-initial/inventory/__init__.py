"""inventory: a tiny in-memory stock ledger."""

from inventory.stock import Inventory

__all__ = ["Inventory"]
__version__ = "1.0.0"
