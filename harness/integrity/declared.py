"""Which outcomes the pristine tests declare (pure; issue 36, class 1).

A graded test counts as passing only when it passed, unless its pristine source declares
that it may be skipped or may fail as expected. "Pristine source" is the test files after
the test patch (the canaries planted beside their originals included), their ``conftest.py``
files and what those name, read from the host's copies, never from the running process:
code the model controls can make a failing test an expected failure or a skip without
showing up on any traceback (a mark set on the test module while it is imported, a condition
evaluated while the failure is in flight, ``pytest.xfail`` reached from C code, a
``TestCase`` class attribute).

For a test (its native id: ``path::Class::name[params]``), this module reads, from the
sources:

* the test function, its decorators and its body;
* each enclosing class and each base class found in the pristine sources (their
  decorators, class-level statements and every method that is not a test: set-up,
  helpers), and a test inherited from such a base;
* the module's own statements (``pytestmark``, ``importorskip``, ``setUpModule``, sympy's
  ``disabled``), not its other tests;
* every module-level name those use, followed to its definition in the module or in the
  pristine test module it is imported from (a decorator defined in the tests'
  ``__init__.py``; library modules are not test source and are not followed);
* pytest only: the fixtures the test names (and theirs), the autouse fixtures and the hooks
  of every ``conftest.py`` on its path and of the plugins those name by ``pytest_plugins``.

What the reading finds declares:

* an **expected failure** (``XFAIL``, an xpass): a name or word of xfail's family
  (``xfail``, ``expectedFailure``, ``XFAIL``, ``knownfail``...);
* a **skip**: a name or word of skip's family (``skip``, ``importorskip``, ``SkipTest``,
  ``requires_*``, ``needs_*``, ``slow``, ``disabled``...), a decorator of the test or its
  classes that is not known inert (a library's decorator may skip: matplotlib's
  ``image_comparison`` for a missing converter), a pytest mark a plugin may act on, or a
  fixture the sources do not define (a plugin's or the library's, which may skip).

A test whose definition is not in the pristine sources (``found`` false) declares
everything: nothing is known against it. The reading over-approximates on purpose (it never
invents an undeclared outcome from an honest declaration); what it cannot see is settled by
the reference run (harness/integrity/judge.py: an undeclared outcome the reference run
shows as well is the environment's).
"""

from __future__ import annotations

import ast
import posixpath
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from harness.integrity.declared_source import (SourceModule, applies, arguments, is_fixture, is_test, last_name,
                                               parametrized, words)
from harness.integrity.plan import find_tests_root
from harness.integrity.scan import parse

SKIP_WORDS = re.compile(r"skip|requires?_|^requires?$|needs?_|^needs?$|disabled|unless|only_?if|remote_?data", re.I)
XFAIL_WORDS = re.compile(r"xfail|xpass|expected_?failure|known_?fail|nocache_fail", re.I)
#: decorators that never skip (pytest's own marks that only shape a test, the standard
#: library's, mock's, Django's settings helpers)
INERT = frozenset({"parametrize", "usefixtures", "filterwarnings", "fixture", "yield_fixture", "staticmethod",
                   "classmethod", "property", "wraps", "patch", "object", "dict", "multiple", "override_settings",
                   "modify_settings", "isolate_apps", "tag", "ignore_warnings", "django_db", "timeout",
                   "cached_property", "contextmanager", "abstractmethod", "setup", "teardown", "fixtures",
                   "freeze_time", "override_config", "skip_checks", "no_type_check", "lru_cache", "cache",
                   "total_ordering", "dataclass", "run_in_subprocess"})
#: pytest's own fixtures (none of them skips a test)
BUILTIN_FIXTURES = frozenset({"request", "tmpdir", "tmp_path", "tmpdir_factory", "tmp_path_factory", "monkeypatch",
                              "capsys", "capsysbinary", "capfd", "capfdbinary", "caplog", "recwarn", "pytestconfig",
                              "record_property", "record_xml_attribute", "record_testsuite_property", "cache",
                              "doctest_namespace", "testdir", "pytester", "linecomp", "LineMatcher", "self", "cls",
                              "_pytest", "subtests"})
#: bounds of one reading: files parsed, nodes followed from one test
MAX_FILES = 64
MAX_FILE_BYTES = 4 << 20
MAX_NODES = 2000


@dataclass(frozen=True)
class Declared:
    """What the pristine source declares of one test."""

    skip: bool
    xfail: bool
    found: bool = True

    @property
    def code(self) -> str:
        """``s``/``x``/``sx``/``""``; ``?`` when the test was not found (everything declared)."""
        return "?" if not self.found else ("s" if self.skip else "") + ("x" if self.xfail else "")

    @classmethod
    def from_code(cls, code: str) -> "Declared":
        if code == "?":
            return cls(True, True, False)
        return cls("s" in code, "x" in code)


UNKNOWN = Declared(True, True, False)


def split_id(native_id: str) -> tuple[str, tuple[str, ...], str]:
    """(file, enclosing classes, function) of a native id (parameters left out)."""
    head = native_id.split("[", 1)[0]
    parts = [p for p in head.split("::") if p and p != "()"]
    if len(parts) < 2:
        return (parts[0] if parts else ""), (), ""
    return parts[0], tuple(parts[1:-1]), parts[-1]


class Declarations:
    """The pristine sources of one run, read on demand (see the module docstring).

    ``files``: the test files as installed (bytes); ``read``: any other pristine file's
    bytes or None; ``runner``: the runner's name (fixtures and conftests are pytest's)."""

    def __init__(self, files: Mapping[str, bytes], read: Callable[[str], bytes | None], runner: str = "pytest",
                 pristine_paths: Iterable[str] = ()) -> None:
        self._files = dict(files)
        self._read = read
        self._pytest = runner == "pytest"
        self._paths = frozenset(pristine_paths) | frozenset(self._files)
        self._modules: dict[str, SourceModule | None] = {}
        self._cache: dict[str, Declared] = {}
        self._plugin_paths: set[str] = set()

    def _is_test_source(self, path: str) -> bool:
        """Test source: the test files, conftests, what they name as plugins, and every
        module under a test directory (library modules are never followed)."""
        return (path in self._files or posixpath.basename(path) == "conftest.py" or path in self._plugin_paths
                or find_tests_root(path) is not None)

    # ------------------------------------------------------------------ sources
    def module(self, path: str) -> SourceModule | None:
        if path in self._modules:
            return self._modules[path]
        module = None
        if len(self._modules) < MAX_FILES:
            data = self._files.get(path)
            if data is None:
                data = self._read(path)
            if data is not None and len(data) <= MAX_FILE_BYTES:
                try:
                    with warnings.catch_warnings():   # old sources' invalid escapes: not ours to report
                        warnings.simplefilter("ignore")
                        module = SourceModule(path, parse(data, path))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    module = None
        self._modules[path] = module
        return module

    def _resolve_module(self, origin: str, module: str, level: int) -> SourceModule | None:
        """The pristine module an import names (``from .x import y``, ``from a.b import c``)."""
        if level:
            base = posixpath.dirname(origin)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            candidates = [posixpath.join(base, *module.split(".")) if module else base]
        else:
            rel = module.replace(".", "/")
            candidates = [rel, "src/" + rel, "lib/" + rel]
            top = origin.split("/")[0]
            if top in ("tests", "test", "testing"):   # Django: tests/ is on the path
                candidates.append(posixpath.join(top, rel))
        for candidate in candidates:
            for path in (candidate + ".py", candidate + "/__init__.py"):
                if (path in self._paths or path in self._files) and self._is_test_source(path):
                    found = self.module(path)
                    if found is not None:
                        return found
        return None

    def _definition(self, module: SourceModule, name: str, depth: int = 0) -> tuple[SourceModule, ast.AST] | None:
        """Where ``name`` of ``module`` is defined in the pristine sources."""
        if name in module.defs:
            return module, module.defs[name]
        if name in module.imports and depth < 4:
            source, level, attribute = module.imports[name]
            if attribute is None:
                return None
            target = self._resolve_module(module.path, source, level)
            if target is not None:
                return self._definition(target, attribute, depth + 1)
            submodule = self._resolve_module(module.path, f"{source}.{attribute}" if source else attribute, level)
            if submodule is not None:
                return submodule, submodule.tree
        return None

    def _conftests(self, path: str) -> list[SourceModule]:
        out = []
        parts = path.split("/")[:-1]
        for i in range(len(parts) + 1):
            candidate = "/".join([*parts[:i], "conftest.py"])
            if candidate in self._paths:
                found = self.module(candidate)
                if found is not None:
                    out.append(found)
                    out += self._plugins(found)
        return out

    def _plugins(self, conftest: SourceModule) -> list[SourceModule]:
        """The pristine modules a conftest names in ``pytest_plugins``."""
        out = []
        assign = conftest.defs.get("pytest_plugins")
        if isinstance(assign, (ast.Assign, ast.AnnAssign)) and assign.value is not None:
            for sub in ast.walk(assign.value):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    rel = sub.value.replace(".", "/")
                    self._plugin_paths.update(p + suffix for p in (rel, "src/" + rel, "lib/" + rel)
                                              for suffix in (".py", "/__init__.py"))
                    found = self._resolve_module(conftest.path, sub.value, 0)
                    if found is not None:
                        out.append(found)
        return out

    # ------------------------------------------------------------------ tests
    def of(self, native_id: str) -> Declared:
        key = native_id.split("[", 1)[0]
        if key not in self._cache:
            try:
                self._cache[key] = self._read_test(*split_id(key))
            except RecursionError:
                self._cache[key] = UNKNOWN
        return self._cache[key]

    def _read_test(self, path: str, classes: tuple[str, ...], name: str) -> Declared:
        module = self.module(path) if path else None
        if module is None or not name:
            return UNKNOWN
        scope: list[tuple[SourceModule, ast.AST]] = [(module, s) for s in module.statements]
        decorated: list[ast.AST] = []
        if classes:
            owner: tuple[SourceModule, ast.ClassDef] | None = None
            container: dict[str, ast.AST] = module.defs
            for cls_name in classes:
                node = container.get(cls_name)
                if not isinstance(node, ast.ClassDef):
                    return UNKNOWN
                owner = (module, node)
                container = {n.name: n for n in node.body if isinstance(n, ast.ClassDef)}
            assert owner is not None
            found = self._method(owner, name, scope, decorated, set())
            if found is None:
                return UNKNOWN
            function_module, function = found
        else:
            defined = module.defs.get(name)
            if not isinstance(defined, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return UNKNOWN
            function_module, function = module, defined
        decorated += function.decorator_list
        scope.append((function_module, function))
        if self._pytest:
            scope += [(c, s) for c in self._conftests(path) for s in self._conftest_parts(c)]
        skip_hint = self._fixtures(module, function, classes, path, scope)
        nodes = self._closure(scope)
        used = {w for _, node in nodes for w in words(node)}
        xfail = any(XFAIL_WORDS.search(w) for w in used)
        skip = (skip_hint or any(SKIP_WORDS.search(w) for w in used)
                or any(last_name(d) not in INERT for d in decorated)
                or any(self._unknown_mark(node) for _, node in nodes))
        return Declared(skip, xfail)

    def _method(self, owner: tuple[SourceModule, ast.ClassDef], name: str, scope: list, decorated: list,
                seen: set) -> tuple[SourceModule, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        """Find test ``name`` in a class or its pristine bases; every class on the way adds
        its decorators, class-level statements and non-test methods to ``scope``."""
        module, node = owner
        if id(node) in seen or len(seen) > 32:
            return None
        seen.add(id(node))
        decorated += node.decorator_list
        scope += [(module, n) for n in (*node.decorator_list, *node.bases, *node.keywords)]
        found: tuple[SourceModule, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name == name:
                    found = (module, item)
                elif not is_test(item.name):
                    scope.append((module, item))
            elif not isinstance(item, ast.ClassDef) and applies(item):
                scope.append((module, item))
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            definition = self._definition(module, base_name) if base_name else None
            if definition is not None and isinstance(definition[1], ast.ClassDef):
                inherited = self._method((definition[0], definition[1]), name, scope, decorated, seen)
                found = found or inherited
        return found

    def _conftest_parts(self, conftest: SourceModule) -> list[ast.AST]:
        """What of a conftest (or a plugin it names) can decide any test's outcome: its own
        statements and its hooks (fixtures come in only when used or autouse)."""
        return [*conftest.statements, *(n for k, n in conftest.defs.items()
                                        if k.startswith("pytest_") and isinstance(n, ast.FunctionDef))]

    def _fixtures(self, module: SourceModule, function: ast.AST, classes: tuple[str, ...], path: str,
                  scope: list) -> bool:
        """Add the fixtures the test uses (and the autouse ones) to ``scope``; True when it
        uses one no pristine source defines (a plugin's or the library's, which may skip)."""
        if not self._pytest:
            return False
        sources = [module, *self._conftests(path)]
        autouse = [(m, n) for m in sources for n in m.defs.values() if is_fixture(n, autouse=True)]
        if classes:
            cls = module.defs.get(classes[0])
            if isinstance(cls, ast.ClassDef):
                autouse += [(module, n) for n in cls.body if is_fixture(n, autouse=True)]
        scope += autouse
        wanted = list(arguments(function)) + [a for _, n in autouse for a in arguments(n)]
        # arguments that are parameters, not fixtures: parametrize's names anywhere in the
        # scope, and anything a pytest_generate_tests hook may fill
        params = {p for _, node in scope for p in parametrized(node)}
        generated = any("pytest_generate_tests" in m.defs for m in sources)
        seen, unknown = set(params), False
        while wanted and len(seen) < 200:
            name = wanted.pop()
            if name in seen or name in BUILTIN_FIXTURES:
                continue
            seen.add(name)
            found = None
            for source in sources:
                definition = self._definition(source, name)
                if definition is not None:
                    found = definition
                    break
            if found is None:
                unknown = unknown or not generated
                continue
            scope.append(found)
            wanted += list(arguments(found[1]))
        return unknown

    def _closure(self, scope: list[tuple[SourceModule, ast.AST]]) -> list[tuple[SourceModule, ast.AST]]:
        """``scope`` and the definitions of every name it uses, followed through the
        pristine sources (bounded by :data:`MAX_NODES`)."""
        out: list[tuple[SourceModule, ast.AST]] = []
        todo, seen = list(scope), set()
        while todo and len(out) < MAX_NODES:
            module, node = todo.pop()
            if (module.path, id(node)) in seen:
                continue
            seen.add((module.path, id(node)))
            if isinstance(node, ast.ClassDef):
                # a class a test uses: what runs for any of its tests, never its other tests
                todo += [(module, part) for part in (*node.decorator_list, *node.bases, *node.keywords)]
                todo += [(module, item) for item in node.body
                         if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_test(item.name))
                         or (not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                             and applies(item))]
                continue
            out.append((module, node))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    definition = self._definition(module, sub.id)
                    if definition is not None and not (isinstance(definition[1], (ast.FunctionDef,
                                                                                   ast.AsyncFunctionDef))
                                                        and is_test(definition[1].name)):
                        todo.append(definition)
        return out

    @staticmethod
    def _unknown_mark(node: ast.AST) -> bool:
        """A ``pytest.mark.X`` with an X pytest itself does not define as inert: a plugin or a
        conftest may skip on it (astropy's ``remote_data``)."""
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark"
                    and sub.attr not in INERT):
                return True
        return False


class RecordedDeclarations:
    """The declarations a judged run recorded (``integrity.declared``: native id -> code),
    for judging it again without its sources (``harness report``)."""

    def __init__(self, codes: Mapping[str, str]) -> None:
        self._codes = {str(k).split("[", 1)[0]: str(v) for k, v in codes.items()}

    def of(self, native_id: str) -> Declared:
        code = self._codes.get(native_id.split("[", 1)[0])
        return UNKNOWN if code is None else Declared.from_code(code)
