"""pytest: the spec's command, then the test files, then the parser's own options
(``--junitxml=PATH -o junit_family=xunit1``). Nothing of ours sits between the command and
its file arguments: pytest 3's ``-o`` takes every word after it, so it goes last."""

from __future__ import annotations

import shlex

from harness.runners.base import Runner, register_runner


class PytestRunner(Runner):
    def command(self, test_cmd: str, targets: list[str], results_path: str, parser_args: str = "") -> str:
        parts = [test_cmd, *map(shlex.quote, targets)]
        if parser_args:
            parts.append(parser_args.format(junit_path=shlex.quote(results_path)))
        return " ".join(parts)


PYTEST = register_runner(PytestRunner(
    name="pytest", parsers=("pytest", "pytest-junit", "pytest-text"),
    conventions=("pytest", "pytest-options", "pytest-v2", "matplotlib", "seaborn", "sympy", "native"),
    canary_style="function", infra_patterns=(),
    summary="pytest with JUnit XML, cross-checked with its -rA summary"))
