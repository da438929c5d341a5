"""What every test runner provides (the interface the rest of the harness sees).

A :class:`Runner` is chosen by name by a spec's ``runner:`` field. It knows:

* ``test_files(test_patch)`` — the Python test files of the instance's test patch (they
  are restored from the pristine copy, hold the canaries, and help map results back);
* ``targets(test_patch)`` — what goes on the command line after the spec's ``test_cmd``
  (the files for pytest and sympy; dotted labels for Django, as SWE-bench derives them);
* ``command(test_cmd, targets, results_path, parser)`` — the whole shell command. The
  spec's command and its arguments are never separated by options of ours: pytest's
  ``--junitxml``/``-o`` come after the targets (pytest 3's ``-o`` takes every following
  word), and a reporter-wrapped command runs unchanged after our wrapper's ``--``;
* ``parsers`` / ``default_parser`` — the result parsers that read what it writes
  (JUnit XML at ``results_path``, cross-checked with the printed text);
* ``conventions`` / ``default_convention`` — the dataset test-id conventions its results
  can be mapped to (harness/grading/conventions.py);
* ``spell_id(path, cls, name)`` — the native id the parser reports for a test (pytest
  style for every runner: ``path::name`` or ``path::Class::name``), for canaries;
* ``canary_styles`` — the kinds of test it collects, where canaries may go: "function" (a
  module-level test function) and/or "method" (a test method of a class it collects, which
  ``collects_class`` decides from the class's source) — and ``canary_file(test_files)``;
* ``infra_patterns`` — the runner's own files in the repository, which a model patch may
  not change (restored like conftest.py); ``internals`` — a pattern of added lines that
  reach into its result machinery (the patch is then flagged, as for pytest's internals).

Trusted files run inside the container (the result reporter) live in harness/incontainer/
and are installed root-owned and read-only at run time under
:data:`harness.incontainer.TRUSTED_DIR` (commands name them through that constant only).
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from dataclasses import dataclass

from harness import incontainer, resources
from harness.errors import lookup
from harness.patches import PatchFiles

#: Where harness/incontainer/'s modules are in every sandbox (root-owned, read-only; installed
#: at run time by the evaluation: harness.incontainer).
INCONTAINER_DIR = incontainer.PY_DIR
#: The package directory installed there (harness/incontainer/, shipped with the code).
INCONTAINER_SOURCE = resources.path("incontainer")
#: Added lines that reach into the reporter's result machinery (by name or by its location).
REPORTER_INTERNALS = rf"junit_reporter|{re.escape(incontainer.TRUSTED_DIR)}|\b_RECORDS\b|\bwrite_junit\b"
#: The environment's interpreter (the image's root-owned virtual environment).
ENV_PYTHON = "/opt/harness/venv/bin/python"


@dataclass(frozen=True)
class Runner:
    name: str
    parsers: tuple[str, ...]
    conventions: tuple[str, ...]
    canary_styles: tuple[str, ...] = ("function",)
    infra_patterns: tuple[str, ...] = ()
    summary: str = ""
    #: added lines that reach into this runner's result machinery from the code under test
    #: (flagged like pytest's internals; harness/integrity/scan_rules.py RUNNER_INTERNALS)
    internals: str = ""

    @property
    def default_parser(self) -> str:
        return self.parsers[0]

    @property
    def default_convention(self) -> str:
        return self.conventions[0]

    # ------------------------------------------------------------------ what to run
    def test_files(self, test_patch: PatchFiles) -> list[str]:
        """Python files the test patch modifies or creates (data files it touches, such as
        a .toml fixture, are not test modules and would make pytest stop)."""
        return [p for p in (*test_patch.modified, *test_patch.created) if p.endswith(".py")]

    def targets(self, test_patch: PatchFiles) -> list[str]:
        return self.test_files(test_patch)

    def command(self, test_cmd: str, targets: list[str], results_path: str, parser_args: str = "") -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ ids
    def spell_id(self, path: str, cls: str | None, name: str) -> str:
        """The native id of test ``name`` (in class ``cls``, dotted when nested, or at module
        level) of ``path``, as this runner's parser reports it."""
        if "function" not in self.canary_styles and not cls:
            raise ValueError(f"the {self.name} runner runs methods of TestCase classes: a class is needed")
        return "::".join(p for p in (path, *(cls.split(".") if cls else ()), name) if p)

    test_id = spell_id  # the name the integrity stream's canaries call

    def collects_class(self, node: ast.ClassDef) -> bool:
        """Whether this runner runs the test methods of class ``node`` (a canary cloned into a
        class it does not collect would go missing, and a missing canary means tampering).
        unittest-style runners: a subclass of something (a TestCase, by convention)."""
        return bool(node.bases) and not node.decorator_list

    def canary_file(self, test_files: list[str]) -> str | None:
        """The test file the canaries go into: the first one named like a test module."""
        py = [f for f in test_files if f.endswith(".py")]
        named = [f for f in py if posixpath.basename(f).startswith("test") or f.endswith("tests.py")]
        return (named or py)[0] if (named or py) else None

    def check_test_cmd(self, test_cmd: str) -> str | None:
        """Why ``test_cmd`` cannot be run by this runner, or None."""
        return None

    @property
    def reporter(self) -> bool:
        """Whether the harness's in-container reporter runs the tests (it then states each
        skip's and expected failure's origin and the results file's hash as evidence)."""
        return False


@dataclass(frozen=True)
class ReporterRunner(Runner):
    """A runner whose command runs in-process under harness/incontainer/junit_reporter.py,
    which records outcomes from the framework's own result objects as JUnit XML."""

    framework: str = "unittest"
    internals: str = REPORTER_INTERNALS

    @property
    def reporter(self) -> bool:
        return True

    def command(self, test_cmd: str, targets: list[str], results_path: str, parser_args: str = "") -> str:
        reporter = incontainer.trusted_path("junit_reporter.py")
        wrapper = [ENV_PYTHON, reporter, "--framework", self.framework, "--junit", results_path, "--"]
        return " ".join([*map(shlex.quote, wrapper), test_cmd, *map(shlex.quote, targets)])

    def check_test_cmd(self, test_cmd: str) -> str | None:
        words = shlex.split(test_cmd)
        if not words:
            return "is empty"
        if "=" in words[0]:
            return (f"must start with the script or 'python -m MODULE' (the {self.name} runner runs it "
                    f"in-process); put environment variables under env:")
        if any(w in ("|", "&&", ";", "||") or w.startswith((">", "<")) for w in words):
            return f"must be one command (the {self.name} runner runs it in-process), not a shell pipeline"
        return None


RUNNERS: dict[str, Runner] = {}


def register_runner(runner: Runner) -> Runner:
    if runner.name in RUNNERS:
        raise ValueError(f"runner {runner.name!r} registered twice")
    RUNNERS[runner.name] = runner
    return runner


def get_runner(name: str) -> Runner:
    """Look a runner up by name; an unknown name raises with the close matches."""
    return lookup(RUNNERS, name, kind="test runner", field="runner")
