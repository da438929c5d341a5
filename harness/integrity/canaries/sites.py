"""Where a canary may change a value: literals that decide an exact comparison.

A *site* is one constant inside the literal side of an exact equality that always runs:

* ``assert EXPR == LITERAL`` (or ``LITERAL == EXPR``), one ``==`` and nothing else, where
  ``EXPR`` holds no approximate comparison (below);
* ``assertEqual(EXPR, LITERAL)`` and the other exact equality checks of unittest, numpy
  and nose (:data:`EXACT_CALLS`) with no keyword but a message or a verbosity switch.

``LITERAL`` is a number, a string or bytes, or a list, tuple, set or dict made only of
them; each constant in it decides the comparison (a changed dict key that meets another
key leaves a smaller dict, a changed set member a different set). Never a site: anything inside an approximate
comparison (:func:`approximate`: ``assert_allclose``, ``pytest.approx``, ``math.isclose``,
``numpy.isclose``/``allclose``, ``assertAlmostEqual``, ``assert_almost_equal``,
``assert_array_almost_equal``, any call whose name says *close*, *almost* or *approx*, and
any call given a tolerance keyword such as ``rtol``/``atol``/``places``/``delta``): there a
changed value may still be within tolerance and pass honestly; booleans and ``None`` (an
equality with them is often an identity check in disguise); complex numbers; decimals not
written as digits, a point and digits; constants spanning lines; strings whose source is not one plain quoted run (escapes outside raw
strings, implicit concatenation); checks inside blocks that may not run or may swallow the
failure (:func:`straight_line`); checks whose failure would skip anything but other checks
(:func:`settled`): a canary fails, and what it skips is left undone for the tests that run
after it (pallets__flask-5014's ``test_templates_and_static`` closes a response after its
check; a canary made there left the file open, and the ``ResourceWarning`` its finalizer
raised later failed a graded test under flask's ``filterwarnings = error``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable

#: exact equality checks (unittest, numpy.testing, nose): the first two arguments compared
EXACT_CALLS = frozenset({"assertEqual", "assertEquals", "failUnlessEqual", "assert_equal", "assertListEqual",
                         "assertTupleEqual", "assertSetEqual", "assertSequenceEqual", "assertMultiLineEqual",
                         "assert_array_equal", "eq_"})
#: keywords of an exact check that cannot make it tolerant
_NEUTRAL_KEYWORDS = frozenset({"msg", "err_msg", "verbose", "strict"})
#: approximate comparisons by name (and any name containing one of _APPROXIMATE_PARTS)
APPROXIMATE_CALLS = frozenset({"assert_allclose", "approx", "isclose", "allclose", "assertAlmostEqual",
                               "assertAlmostEquals", "assertNotAlmostEqual", "failUnlessAlmostEqual",
                               "assert_almost_equal", "assert_array_almost_equal", "assert_approx_equal",
                               "assert_array_almost_equal_nulp", "assert_array_max_ulp",
                               "assert_quantity_allclose", "assert_allclose_units"})
_APPROXIMATE_PARTS = ("close", "almost", "approx")
#: keyword arguments that give a comparison a tolerance
TOLERANCE_KEYWORDS = frozenset({"rtol", "atol", "tol", "rel", "abs", "delta", "places", "decimal", "epsilon",
                                "eps", "ulps", "nulp", "maxulp", "significant", "precision", "tolerance"})
#: context managers whose body may stop early or swallow an AssertionError (an assert there
#: may never run or never fail: a canary made from it could pass honestly)
_GUARDING_CONTEXTS = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp",
                                "assertRaisesMessage", "suppress", "warns", "deprecated_call", "catch_warnings",
                                "assertWarns", "assertWarnsRegex", "ExceptionInfo"})

#: one source line with its end (``\r\n``, ``\n`` or ``\r``; never a form feed): the lines
#: ``ast`` counts ``lineno`` in
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_INT_TEXT = re.compile(r"\d+\Z")
_FLOAT_TEXT = re.compile(r"\d+\.\d+\Z")
_STRING_TEXT = re.compile(r"(?P<prefix>[rRbBuU]{0,2})(?P<quote>'''|\"\"\"|'|\")(?P<body>.*)(?P=quote)\Z", re.S)


class Source:
    """A source text split into lines once, so that the text of many nodes costs linear
    time (``ast.get_source_segment`` splits the whole text again for every node)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = _SOURCE_LINE.findall(text)

    def segment(self, node: ast.AST) -> str:
        """The node's source text, exactly as ``ast.get_source_segment`` gives it (columns
        are UTF-8 byte offsets)."""
        first, last = node.lineno - 1, node.end_lineno - 1
        if last >= len(self.lines):
            return ""
        if first == last:
            return self.lines[first].encode()[node.col_offset:node.end_col_offset].decode()
        head = self.lines[first].encode()[node.col_offset:].decode()
        tail = self.lines[last].encode()[:node.end_col_offset].decode()
        return "".join([head, *self.lines[first + 1:last], tail])


@dataclass(frozen=True)
class Site:
    """One constant a canary may change. ``kind``: "int", "float", "str" or "bytes";
    ``text`` its exact source (``-`` excluded: a negative number keeps its sign);
    ``line`` is 1-based, ``col``/``end`` byte offsets in that line."""

    kind: str
    text: str
    line: int
    col: int
    end: int


def default_collects_class(cls: ast.ClassDef) -> bool:
    return (cls.name.startswith("Test") or bool(cls.bases)) and not cls.decorator_list


def collected_tests(tree: ast.Module, collects_class: Callable[[ast.ClassDef], bool] = default_collects_class
             ) -> list[tuple[ast.FunctionDef, str | None, list]]:
    """(function, class name or None, the body it lives in) of every test a runner collects."""
    found = [(n, None, tree.body) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if not collects_class(cls):
            continue
        found += [(n, cls.name, cls.body) for n in cls.body
                  if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    return found


def call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def approximate(node: ast.AST) -> bool:
    """Whether ``node`` holds an approximate comparison: a call named like one, or a call
    given a tolerance keyword."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        name = call_name(sub)
        if name in APPROXIMATE_CALLS or any(part in name.lower() for part in _APPROXIMATE_PARTS):
            return True
        if any(k.arg in TOLERANCE_KEYWORDS for k in sub.keywords):
            return True
    return False


def straight_line(body: list) -> list[ast.stmt]:
    """The statements of a test that run whenever it runs: its own body and the bodies of
    ``with`` blocks that cannot stop early or swallow an error; never a branch, a loop,
    a ``try``, a nested function or class, or anything after a ``return``/``raise``."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            break
        out.append(stmt)
        if isinstance(stmt, ast.With):
            calls = [item.context_expr for item in stmt.items]
            if all(isinstance(c, ast.Call) and call_name(c) not in _GUARDING_CONTEXTS for c in calls):
                out += straight_line(stmt.body)
    return out


def is_check(stmt: ast.stmt) -> bool:
    """A statement that only checks (or does nothing): skipping it leaves nothing undone."""
    if isinstance(stmt, (ast.Assert, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr):
        if isinstance(stmt.value, ast.Constant):
            return True
        if isinstance(stmt.value, ast.Call):
            name = call_name(stmt.value)
            return name.startswith("assert") or name in EXACT_CALLS
    return False


def settled(body: list, after_ok: bool = True) -> list[ast.stmt]:
    """The statements of :func:`straight_line` whose failure would skip nothing but checks:
    everything after them in their block, and after each enclosing ``with`` in its own
    (a ``with`` block's exit still runs on a failure; what follows it does not)."""
    out: list[ast.stmt] = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, (ast.Return, ast.Raise)):
            break
        ok = after_ok and all(is_check(rest) for rest in body[index + 1:])
        if ok:
            out.append(stmt)
        if isinstance(stmt, ast.With):
            calls = [item.context_expr for item in stmt.items]
            if all(isinstance(c, ast.Call) and call_name(c) not in _GUARDING_CONTEXTS for c in calls):
                out += settled(stmt.body, ok)
    return out


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, str, bytes, complex)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_literal(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts) and all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys) and all(k is not None and _is_literal(k) for k in node.keys) \
            and all(_is_literal(v) for v in node.values)
    return False


def _compared(fn: ast.FunctionDef) -> list[ast.AST]:
    """The literal sides of the exact comparisons of ``fn`` that always run and whose
    failure skips nothing but checks."""
    sides: list[ast.AST] = []
    for stmt in settled(fn.body):
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1 \
                and isinstance(stmt.test.ops[0], ast.Eq):
            left, right = stmt.test.left, stmt.test.comparators[0]
            for literal, other in ((right, left), (left, right)):
                if _is_literal(literal):
                    if not approximate(other):
                        sides.append(literal)
                    break
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if call_name(call) not in EXACT_CALLS or len(call.args) < 2 or approximate(call):
                continue
            if any(k.arg not in _NEUTRAL_KEYWORDS for k in call.keywords):
                continue
            first, second = call.args[0], call.args[1]
            for literal, _other in ((second, first), (first, second)):
                if _is_literal(literal):
                    sides.append(literal)
                    break
    return sides


def constant_kind(node: ast.Constant, text: str) -> str | None:
    """The site kind of a constant from its source text, or None when no mutation of it
    is sure to decide the comparison (see the module docstring)."""
    value = node.value
    if isinstance(value, bool) or value is None or isinstance(value, complex):
        return None
    if isinstance(value, int):
        return "int" if _INT_TEXT.match(text) else None
    if isinstance(value, float):
        return "float" if _FLOAT_TEXT.match(text) and value == value and abs(value) != float("inf") else None
    if isinstance(value, (str, bytes)):
        match = _STRING_TEXT.match(text)
        if not match:
            return None
        prefix, body = match.group("prefix").lower(), match.group("body")
        if "\\" in body and "r" not in prefix:
            return None
        quote = match.group("quote")
        if quote in body or "\n" in body or "\r" in body:
            return None
        expected = body.encode("latin-1", "replace") if isinstance(value, bytes) else body
        if value != expected:
            return None  # implicit concatenation or anything else we cannot edit token by token
        return "bytes" if isinstance(value, bytes) else "str"
    return None


def sites_of(fn: ast.FunctionDef, source: Source) -> list[Site]:
    """Every site of test ``fn`` (see the module docstring)."""
    found: list[Site] = []
    for side in _compared(fn):
        for node in ast.walk(side):
            if not isinstance(node, ast.Constant) or node.lineno != node.end_lineno:
                continue
            text = source.segment(node)
            kind = constant_kind(node, text)
            if kind is not None:
                found.append(Site(kind, text, node.lineno, node.col_offset, node.end_col_offset))
    return found
