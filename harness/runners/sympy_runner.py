"""sympy's own runner, ``bin/test`` (SWE-bench ran ``bin/test -C --verbose <test files>``),
in-process under harness/incontainer/junit_reporter.py, which records every test's outcome
from sympy's reporter callbacks. sympy collects module-level functions named ``test_*``
only, so canaries are functions and ids are ``path::name``."""

from __future__ import annotations

from harness.runners.base import REPORTER_INTERNALS, ReporterRunner, register_runner

#: sympy's runner lives in the repository: a model patch may not change it.
SYMPY_INFRA = ("bin/test", "bin/get_sympy.py", "sympy/utilities/runtests.py", "sympy/testing/runtests.py")


SYMPY = register_runner(ReporterRunner(
    name="sympy", parsers=("sympy",), conventions=("sympy", "native"), canary_styles=("function",),
    infra_patterns=SYMPY_INFRA, framework="sympy",
    internals=REPORTER_INTERNALS + r"|PyTestReporter|SymPyTests",
    summary="sympy's bin/test with an in-process JUnit reporter, cross-checked with its --verbose text"))
