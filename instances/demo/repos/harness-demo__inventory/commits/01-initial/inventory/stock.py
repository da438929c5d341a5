"""Stock levels keyed by SKU."""


class Inventory:
    """Track how many units of each SKU are on hand."""

    def __init__(self):
        self._items = {}

    def add(self, sku, qty=1):
        """Receive *qty* units of *sku*."""
        self._items[sku] = self._items.get(sku, 0) + qty

    def quantity(self, sku):
        """Return the number of units of *sku* on hand (0 if unknown)."""
        return self._items.get(sku, 0)

    def skus(self):
        """Return the SKUs in stock, sorted."""
        return sorted(self._items)

    def __len__(self):
        return len(self._items)
