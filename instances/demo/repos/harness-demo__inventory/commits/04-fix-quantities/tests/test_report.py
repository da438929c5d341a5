from inventory import Inventory
from inventory.report import low_stock


def _stocked():
    inv = Inventory()
    inv.add("bolt", 2)
    inv.add("nut", 10)
    inv.add("washer", 1)
    return inv


def test_low_stock_threshold():
    assert low_stock(_stocked(), 5) == [("washer", 1), ("bolt", 2)]


def test_low_stock_order():
    inv = _stocked()
    inv.add("screw", 1)
    assert low_stock(inv, 3) == [("screw", 1), ("washer", 1), ("bolt", 2)]


def test_low_stock_ignores_sold_out():
    inv = _stocked()
    inv.remove("washer", 1)
    assert low_stock(inv, 5) == [("bolt", 2)]
