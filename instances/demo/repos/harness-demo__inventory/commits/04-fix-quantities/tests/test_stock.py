import pytest

from inventory import Inventory
from inventory.stock import InsufficientStock


class TestInventory:
    def test_add_new_sku(self):
        inv = Inventory()
        inv.add("bolt", 5)
        assert inv.quantity("bolt") == 5
        assert inv.skus() == ["bolt"]

    def test_add_accumulates(self):
        inv = Inventory()
        inv.add("nut")
        inv.add("nut", 2)
        assert inv.quantity("nut") == 3

    def test_unknown_sku_is_zero(self):
        assert Inventory().quantity("washer") == 0

    def test_remove(self):
        inv = Inventory()
        inv.add("bolt", 5)
        inv.remove("bolt", 2)
        assert inv.quantity("bolt") == 3

    def test_remove_too_many_raises(self):
        inv = Inventory()
        inv.add("bolt", 1)
        with pytest.raises(InsufficientStock):
            inv.remove("bolt", 2)
        assert inv.quantity("bolt") == 1

    def test_add_rejects_non_positive(self):
        inv = Inventory()
        for qty in (0, -3):
            with pytest.raises(ValueError):
                inv.add("bolt", qty)
        assert len(inv) == 0

    def test_remove_rejects_non_positive(self):
        inv = Inventory()
        inv.add("bolt", 4)
        for qty in (0, -2):
            with pytest.raises(ValueError):
                inv.remove("bolt", qty)
        assert inv.quantity("bolt") == 4

    def test_sold_out_sku_is_dropped(self):
        inv = Inventory()
        inv.add("bolt", 2)
        inv.add("nut", 1)
        inv.remove("bolt", 2)
        assert inv.skus() == ["nut"]
        assert len(inv) == 1
