"""Stock levels keyed by SKU."""


class InsufficientStock(Exception):
    """Raised when removing more units than are on hand."""


def _check_qty(qty):
    if isinstance(qty, bool) or not isinstance(qty, int) or qty <= 0:
        raise ValueError(f"quantity must be a positive integer, got {qty!r}")


class Inventory:
    """Track how many units of each SKU are on hand."""

    def __init__(self):
        self._items = {}

    def add(self, sku, qty=1):
        """Receive *qty* units of *sku*."""
        _check_qty(qty)
        self._items[sku] = self._items.get(sku, 0) + qty

    def remove(self, sku, qty=1):
        """Ship *qty* units of *sku*; a SKU whose stock reaches 0 is dropped."""
        _check_qty(qty)
        have = self._items.get(sku, 0)
        if qty > have:
            raise InsufficientStock(f"cannot remove {qty} x {sku}: only {have} on hand")
        if qty == have:
            del self._items[sku]
        else:
            self._items[sku] = have - qty

    def quantity(self, sku):
        """Return the number of units of *sku* on hand (0 if unknown)."""
        return self._items.get(sku, 0)

    def skus(self):
        """Return the SKUs in stock, sorted."""
        return sorted(self._items)

    def __len__(self):
        return len(self._items)
