"""Best-effort constant folding of the expressions that build strings (pure), for the
scans (:mod:`harness.integrity.scan`): ``"_py" + "test"``, ``"".join([...])``, slices,
``chr``, ``bytes.fromhex``, base64, rot13, ``%``-formatting's template, f-strings of
folded parts, and module-level names bound to such strings. What cannot be folded is
None (the scans then see the call, not a name), and so is a string that would grow past
:data:`MAX_FOLDED` (names bound to doubled names would otherwise grow exponentially with
the lines of a small file)."""

from __future__ import annotations

import ast
import base64
import binascii
import codecs

#: the longest string folding builds: no file the scans read is longer
MAX_FOLDED = 4 * 1024 * 1024


def _bounded(*parts: str | None, extra: int = 0) -> bool:
    """Whether the parts exist and joining them stays within MAX_FOLDED."""
    return all(p is not None for p in parts) and sum(map(len, parts)) + extra <= MAX_FOLDED


class Folder:
    """Best-effort constant folding of expressions that build strings."""

    def __init__(self, nodes: list[ast.AST]) -> None:
        self.names: dict[str, str] = {}
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = self.fold(node.value)
                if value is not None:
                    self.names[node.targets[0].id] = value

    def fold(self, node: ast.AST, depth: int = 0) -> str | None:
        if depth > 40:
            return None
        f = lambda n: self.fold(n, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return node.value
            if isinstance(node.value, bytes):
                return node.value.decode("latin-1")
            return None
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = f(node.left), f(node.right)
            return left + right if _bounded(left, right) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = f(node.left)
            return left if left is not None else None
        if isinstance(node, ast.JoinedStr):
            parts = [f(v.value) if isinstance(v, ast.FormattedValue) else f(v) for v in node.values]
            return "".join(parts) if _bounded(*parts) else None
        if isinstance(node, ast.Subscript):
            base = f(node.value)
            if base is not None and isinstance(node.slice, ast.Slice):
                try:
                    bounds = [None if b is None else ast.literal_eval(b)
                              for b in (node.slice.lower, node.slice.upper, node.slice.step)]
                    return base[slice(*bounds)]
                except (ValueError, TypeError):
                    return None
            return None
        if isinstance(node, ast.Call):
            return self._fold_call(node, f)
        return None

    def _fold_call(self, node: ast.Call, f) -> str | None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = [f(a) for a in node.args]
        if name == "chr" and len(node.args) == 1:
            try:
                return chr(ast.literal_eval(node.args[0]))
            except (ValueError, TypeError, OverflowError):
                return None
        if isinstance(func, ast.Attribute):
            owner = f(func.value)
            if name == "join" and owner is not None and len(node.args) == 1 \
                    and isinstance(node.args[0], (ast.List, ast.Tuple)):
                parts = [f(e) for e in node.args[0].elts]
                return owner.join(parts) if _bounded(*parts, extra=len(owner) * len(parts)) else None
            if name in ("lower", "upper", "strip", "title", "decode", "encode") and owner is not None:
                return getattr(owner, name if name not in ("decode", "encode") else "strip")() \
                    if name not in ("decode", "encode") else owner
            if name == "replace" and owner is not None and len(args) == 2 and None not in args and args[0]:
                grows = owner.count(args[0]) * max(0, len(args[1]) - len(args[0]))
                return owner.replace(args[0], args[1]) if _bounded(owner, extra=grows) else None
            if name == "fromhex" and args and args[0] is not None:
                try:
                    return bytes.fromhex(args[0]).decode("latin-1")
                except ValueError:
                    return None
        if name in ("b64decode", "decodebytes", "standard_b64decode", "urlsafe_b64decode") and args and args[0]:
            try:
                return base64.b64decode(args[0].encode("latin-1")).decode("latin-1")
            except (binascii.Error, ValueError):
                return None
        if name == "decode" and len(args) >= 2 and args[0] is not None and args[1] in ("rot13", "rot_13"):
            return codecs.decode(args[0], "rot13")
        if name in ("str", "bytes") and len(args) == 1 and args[0] is not None:
            return args[0]
        return None
