"""unittest-based runners, in-process under harness/incontainer/junit_reporter.py (every
``unittest.TestResult`` outcome is recorded, with the label the text runner prints):

``unittest``  ``python -m unittest -v <test files>``;
``django``    Django's ``tests/runtests.py`` with dotted labels derived from the test patch
              as SWE-bench derives them: ``tests/`` prefix and ``.py`` dropped, ``/`` → ``.``
              (``tests/admin_views/tests.py`` → ``admin_views.tests``). Only Python files
              become labels (SWE-bench also passed other non-data files, which Django reports
              as import errors).

Tests are methods of TestCase classes: canaries are a TestCase subclass appended to a test
file; ids are ``path::Class::method`` (Django's printed label is kept for the ``django``
id convention)."""

from __future__ import annotations

from harness.patches import PatchFiles
from harness.runners.base import ReporterRunner, register_runner


class DjangoRunner(ReporterRunner):
    def targets(self, test_patch: PatchFiles) -> list[str]:
        return [django_label(path) for path in self.test_files(test_patch)]


def django_label(path: str) -> str:
    """SWE-bench's test directive for a Django test file."""
    label = path[:-len(".py")] if path.endswith(".py") else path
    label = label[len("tests/"):] if label.startswith("tests/") else label
    return label.replace("/", ".")


UNITTEST = register_runner(ReporterRunner(
    name="unittest", parsers=("unittest",), conventions=("native", "django"), canary_styles=("method",),
    infra_patterns=("sitecustomize.py", "usercustomize.py"), framework="unittest",
    summary="python -m unittest with an in-process JUnit reporter, cross-checked with its -v text"))

DJANGO = register_runner(DjangoRunner(
    name="django", parsers=("django",), conventions=("django", "native"), canary_styles=("method",),
    infra_patterns=("tests/runtests.py", "tests/test_sqlite.py"), framework="unittest",
    summary="Django's tests/runtests.py with an in-process JUnit reporter, cross-checked with its --verbosity 2 text"))
