"""pytest: the spec's command, then the test files, then the parser's own options
(``--junitxml=PATH -o junit_family=xunit1``). Nothing of ours sits between the command and
its file arguments: pytest 3's ``-o`` takes every word after it, so it goes last."""

from __future__ import annotations

import ast
import shlex

from harness.runners.base import Runner, register_runner


class PytestRunner(Runner):
    def command(self, test_cmd: str, targets: list[str], results_path: str, parser_args: str = "") -> str:
        parts = [test_cmd, *map(shlex.quote, targets)]
        if parser_args:
            parts.append(parser_args.format(junit_path=shlex.quote(results_path)))
        return " ".join(parts)

    def collects_class(self, node: ast.ClassDef) -> bool:
        """pytest's defaults: a ``Test*`` class without ``__init__``, or a ``unittest.TestCase``
        subclass (recognised by a base named ``...TestCase``). Other classes (mixins, helpers,
        a project's custom ``python_classes``) get no canary."""
        if node.decorator_list:
            return False
        if any(_base_name(b).endswith("TestCase") for b in node.bases):
            return True
        has_init = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"
                       for n in node.body)
        return node.name.startswith("Test") and not has_init


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


PYTEST = register_runner(PytestRunner(
    name="pytest", parsers=("pytest", "pytest-junit", "pytest-text"),
    conventions=("pytest", "pytest-options", "pytest-v2", "matplotlib", "seaborn", "sympy", "native"),
    canary_styles=("function", "method"), infra_patterns=(),
    summary="pytest with JUnit XML, cross-checked with its -rA summary"))
