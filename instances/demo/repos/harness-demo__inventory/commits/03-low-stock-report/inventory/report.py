"""Stock reports."""


def low_stock(inventory, threshold):
    """Return ``(sku, quantity)`` pairs with fewer than *threshold* units.

    The result is ordered by quantity, then SKU.
    """
    rows = [(sku, inventory.quantity(sku)) for sku in inventory.skus()]
    return sorted((row for row in rows if row[1] < threshold), key=lambda row: (row[1], row[0]))
