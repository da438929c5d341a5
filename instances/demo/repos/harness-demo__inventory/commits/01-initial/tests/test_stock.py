from inventory import Inventory


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
