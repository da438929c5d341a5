"""Data, not code: this directory ships inside the package as ``harness.data.images``
(setup.py maps it; :mod:`harness.resources` finds it). This file only makes it a package."""
