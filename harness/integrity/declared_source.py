"""One pristine source file as the reading of declared outcomes sees it (pure; used by
:mod:`harness.integrity.declared`): what its top level defines, which of its statements
apply to every test beside them, and the words, names, fixtures and parameters a piece of
it uses."""

from __future__ import annotations

import ast
from collections.abc import Iterable


class SourceModule:
    """One parsed source file and what its top level defines."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.defs: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, int, str | None]] = {}   # name -> (module, level, attribute)
        self.statements: list[ast.AST] = []
        for node in tree.body:
            self._top(node)

    def _top(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs[node.name] = node
            if node.name in ("setUpModule", "setup_module", "tearDownModule", "teardown_module"):
                self.statements.append(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                self.imports[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, 0, None)
        else:
            if applies(node):
                self.statements.append(node)
            for target in targets(node):
                self.defs.setdefault(target, node)
            if isinstance(node, (ast.If, ast.Try)):   # definitions made conditionally
                for inner in ast.iter_child_nodes(node):
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self.defs.setdefault(inner.name, inner)


#: names whose assignment applies to every test of a module or class (pytest's
#: ``pytestmark``, sympy's ``disabled``, unittest's and pytest's own attributes)
APPLYING = frozenset({"pytestmark", "disabled", "__unittest_skip__", "__unittest_skip_why__",
                      "__unittest_expecting_failure__", "__test__", "pytest_plugins"})


def applies(node: ast.AST) -> bool:
    """Whether a top-level (or class-level) statement can decide the outcome of every test
    beside it: anything that runs code at import (a call that may raise a skip, a block, a
    ``raise``), or an assignment to an applying name. An assignment that only binds a name
    (``xfail_dask = pytest.mark.xfail(...)``, a constant) is a definition: it counts for a
    test only when the test uses the name (the closure follows it)."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if any(t in APPLYING for t in targets(node)):
            return True
        value = node.value
        return value is not None and any(isinstance(sub, ast.Call) and not mark_call(sub) for sub in ast.walk(value))
    if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return False   # a docstring, a ``pass``
    return True


def mark_call(call: ast.Call) -> bool:
    """A call that only builds a mark or a parameter set (``pytest.mark.x(...)``,
    ``pytest.param(...)``): nothing runs at import."""
    func = call.func
    while isinstance(func, ast.Call):
        func = func.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return "mark" in parts or (parts[:1] == ["param"])


def targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def last_name(node: ast.AST) -> str:
    """The last name of a decorator or call target (``pytest.mark.skipif(...)`` -> ``skipif``)."""
    while isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def words(node: ast.AST) -> Iterable[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield sub.name
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) <= 64:
            yield sub.value
        elif isinstance(sub, ast.keyword) and sub.arg:
            yield sub.arg


def is_test(name: str) -> bool:
    return name.startswith("test")


def is_fixture(node: ast.AST, autouse: bool = False) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for decorator in node.decorator_list:
        if last_name(decorator) in ("fixture", "yield_fixture"):
            if not autouse:
                return True
            call = decorator if isinstance(decorator, ast.Call) else None
            return call is not None and any(k.arg == "autouse" and not (isinstance(k.value, ast.Constant)
                                                                        and k.value.value is False)
                                            for k in call.keywords)
    return False


def parametrized(node: ast.AST) -> Iterable[str]:
    """The argument names ``parametrize`` marks in ``node`` give values to."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and last_name(sub) == "parametrize" and sub.args:
            names = sub.args[0]
            if isinstance(names, ast.Constant) and isinstance(names.value, str):
                yield from (n.strip() for n in names.value.split(",") if n.strip())
            elif isinstance(names, (ast.List, ast.Tuple)):
                yield from (e.value for e in names.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))


def arguments(node: ast.AST) -> Iterable[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            yield arg.arg
        for decorator in node.decorator_list:   # @pytest.mark.usefixtures("name")
            if isinstance(decorator, ast.Call) and last_name(decorator) == "usefixtures":
                for value in decorator.args:
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        yield value.value
