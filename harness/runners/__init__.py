"""Test runners, registered by name and chosen by a spec's ``runner:`` field.

The interface is :class:`~harness.runners.base.Runner` (see its module docstring);
``pytest`` is the default. The registered runners:

``pytest``    the spec's pytest command + test files + ``--junitxml`` (JUnit XML, cross-checked with -rA)
``sympy``     sympy's ``bin/test`` under the in-container JUnit reporter
``django``    Django's ``tests/runtests.py`` with dotted labels, under the reporter
``unittest``  ``python -m unittest -v`` under the reporter
"""

from harness.runners.base import (ENV_PYTHON, INCONTAINER_DIR, INCONTAINER_SOURCE, RUNNERS, ReporterRunner, Runner,
                                  get_runner, register_runner)
from harness.runners import pytest_runner, sympy_runner, unittest_runner  # noqa: F401  (registration)

__all__ = ["ENV_PYTHON", "INCONTAINER_DIR", "INCONTAINER_SOURCE", "RUNNERS", "ReporterRunner", "Runner",
           "get_runner", "register_runner"]
