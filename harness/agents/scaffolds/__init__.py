"""The scaffolds: a host-side adapter each (imported by the harness), and the driver
scripts they run inside the scaffold's own virtualenv (``*_driver.py``: executed with that
environment's ``python -I``, never imported by the harness; they import only the scaffold)."""
