"""Static scans of the model's files as Python reads them (pure).

Every file the model's change adds or modifies and that stays is scanned, whatever its
name (compiled code and files too large to read never get here: they are refused,
:mod:`harness.integrity.artefacts`). Run on the resulting files (tree truth), decoded the
way the import system decodes source (coding cookie, universal newlines) and parsed with
Python's own ``ast``, so line-separator tricks change nothing; a file under another name
that Python can parse (``notes.txt`` holding code) is scanned as Python, any other text
token by token (names and quoted strings; the names are the same). A finding is counted
only when the new file has more of it than the pristine file (the model *added* it).
Strings are constant-folded (``"_py" + "test"``, ``"".join([...])``, slices, ``chr``,
``bytes.fromhex``, base64, rot13, module-level names bound to such strings) before they
are matched, so ``getattr(__import__(...), ...)`` with a built name is seen like a plain
import; a string that parses as Python (code kept as data) is scanned as code too. A
``.py`` file the host's ``ast`` cannot parse is scanned token by token (``tokenize``).

Categories (``TAMPER`` makes the run ``tampered`` unless the spec is a test runner's own
repository; the rest only flag it, because honest patches do add them, e.g. a vendored
``six.py``):

* tampered: ``runner_internals`` - names of the test runner's internals (``_pytest``,
  hooks, plugin managers, the JUnit writer, unittest result internals, the harness's own
  in-container modules); ``gc_walk`` - ``gc.get_objects``/``get_referrers``/
  ``get_referents``; ``trace_hook`` - ``settrace``/``setprofile``/``sys.monitoring``;
  ``audit_hook``; ``decoded_exec`` - ``exec``/``eval``/``compile`` of decoded data
  (base64, codecs, zlib, marshal, hex...), code objects built by hand, unpickling a
  literal; ``code_loading`` - code run from a file or from bytes the import system would
  not read as a module: the file loaders (``SourceFileLoader``, ``SourcelessFileLoader``,
  ``ExtensionFileLoader``, ``spec_from_file_location``, ``importlib.util.decode_source``,
  ``imp.load_*``), ``runpy``, ``marshal.load(s)``, ``zipimport``, ``pkgutil.read_code``,
  ``site.addsitedir`` (runs ``.pth`` files), the import suffix lists and ``FileFinder``,
  and ``exec``/``eval``/``compile`` of what was read from a file (``open(...).read()``,
  ``read_text``, ``get_data``...); ``compiled_literal`` - a string or bytes literal that
  is bytecode, a native binary or a zip (written out and imported at run time);
  ``output_bypass`` - ``os._exit``, the real stdout, writes to fds 1/2, ``dup2``;
* flagged: ``frame_walk`` - ``sys._getframe``, ``inspect.currentframe``/``stack``,
  ``f_back``, ``tb_frame``...; ``ctypes`` - ``ctypes``/``_ctypes``/``cffi``;
  ``dynamic_code`` - exec/eval/compile of non-literal code (or the builtins passed
  around); ``dynamic_import`` - ``__import__``/``import_module`` of a computed name;
  ``import_hook`` - the import system steered (``sys.meta_path``, ``sys.path_hooks``,
  ``sys.path`` changed, ``module_from_spec``/``exec_module``/``spec_from_loader``,
  ``pkgutil`` loaders): the code it runs is still read from scanned files;
  ``exit_hook`` - ``atexit``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import io
import re
import textwrap
import threading
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from harness.integrity.artefacts import compiled_content
from harness.integrity.folding import Folder
from harness.integrity.scan_rules import (DECODERS, EXEC_CALLS, IMPORTERS, READERS, TAMPER, UNPICKLERS,
                                          built_runner_name, classify)

#: names of Python source files (a failure to parse one is flagged: ``scan_tokenized``)
PYTHON_SUFFIXES = (".py", ".pyw", ".pyi")


def _pieces(node: ast.AST, folder: Folder) -> list[str]:
    """The strings an expression is assembled from: its literals and the module-level
    strings the names it reads are bound to."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif isinstance(n, ast.Name) and n.id in folder.names:
            out.append(folder.names[n.id])
    return out


#: how deep strings holding code are followed (code in a string in a string...)
_MAX_NESTING = 3


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    category: str
    what: str
    data: bool = False   # found in data (text that is not a program): flagged, never tampered

    @property
    def tampers(self) -> bool:
        return self.category in TAMPER and not self.data

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.category}: {self.what}" + (" (in data)" if self.data else "")


_PARSE_LOCK = threading.Lock()


def parse(text: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, one thread at a time: CPython 3.11's AST constructor can fail with
    "recursion depth mismatch" (SystemError) when threads parse at once (batches evaluate
    instances in threads). Every parse on the host goes through here."""
    with _PARSE_LOCK:
        return ast.parse(text, filename)


_BOMS = (("utf-32", (b"\xff\xfe\0\0", b"\0\0\xfe\xff")), ("utf-16", (b"\xff\xfe", b"\xfe\xff")))


def decode(source: bytes) -> str:
    """Source text as the import system sees it; other text as its byte-order mark says
    (UTF-16/32), else UTF-8 with what does not decode replaced."""
    try:
        return importlib.util.decode_source(source)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        text = None
        for encoding, marks in _BOMS:
            if source.startswith(marks):
                text = source.decode(encoding, "replace")
                break
        if text is None:
            text = source.decode("utf-8", "replace")
        return text.replace("\r\n", "\n").replace("\r", "\n")


def _docstrings(nodes: list[ast.AST]) -> set[int]:
    ids = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _aliases(nodes: list[ast.AST], folder: "Folder") -> dict[str, str]:
    """Local names bound to modules or module attributes (``import gc as g``,
    ``from gc import get_objects as go``, ``g = __import__("gc")``)."""
    out: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and _call_name(node.value) in IMPORTERS and node.value.args:
            target = folder.fold(node.value.args[0])
            if target:
                out[node.targets[0].id] = target
    return out


def _dotted(node: ast.AST, aliases: dict[str, str] | None = None, folder: "Folder | None" = None) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append((aliases or {}).get(node.id, node.id))
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call) and folder is not None and _call_name(node) in IMPORTERS and node.args:
        target = folder.fold(node.args[0])
        if target:
            parts.append(target)
            return ".".join(reversed(parts))
    return None


def _is_builtin_exec(func: ast.AST, aliases: dict[str, str], folder: "Folder") -> str | None:
    """The builtin ``exec``/``eval``/``compile``/``execfile`` a call's function is (by name,
    through ``builtins``, or ``__builtins__[...]``), else None: ``re.compile(...)`` and a
    method named ``eval`` are not."""
    if isinstance(func, ast.Name) and func.id in EXEC_CALLS:
        return func.id
    if isinstance(func, ast.Attribute) and func.attr in EXEC_CALLS:
        owner = _dotted(func.value, aliases, folder)
        return func.attr if owner in ("builtins", "__builtins__", "__builtin__") else None
    if isinstance(func, ast.Subscript):
        key = folder.fold(func.slice)
        return key if key in EXEC_CALLS else None
    return None


def _findings_ast(tree: ast.AST, path: str, depth: int = 0, offset: int = 0) -> list[Finding]:
    # one walk, shared by every pass (walking a large module is most of a scan's cost)
    nodes = list(ast.walk(tree))
    folder, docs, out = Folder(nodes), _docstrings(nodes), []
    decoded_names, read_names = _bound_names(nodes, DECODERS), _bound_names(nodes, READERS)
    aliases = _aliases(nodes, folder)
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    built_seen: set[int] = set()

    def add(node: ast.AST, category: str, what: str) -> None:
        out.append(Finding(path, getattr(node, "lineno", 0) + offset, category, what[:120]))

    def calls_in(node: ast.AST, names: frozenset[str], bound: frozenset[str]) -> bool:
        return any(isinstance(n, ast.Call) and _call_name(n) in names for n in ast.walk(node)) \
            or any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(node))

    for node in nodes:
        words: list[str] = []
        if isinstance(node, ast.Attribute):
            words.append(_dotted(node, aliases, folder) or "?." + node.attr)
        elif isinstance(node, ast.Name):
            words.append(aliases.get(node.id, node.id))
            if node.id in EXEC_CALLS and id(node) not in called:   # the builtin passed around: f = exec
                add(node, "dynamic_code", node.id)
        elif isinstance(node, ast.Import):
            words += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            words += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            out += _literal_findings(node, path, depth, offset)
        if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) \
                and id(node) not in docs:
            folded = folder.fold(node)
            # any length: folding is bounded (harness.integrity.folding.MAX_FOLDED), files too
            if folded is not None and (not isinstance(node, ast.Constant) or isinstance(node.value, str)):
                words.append(folded)
                if not isinstance(node, ast.Constant) and id(node) not in built_seen:
                    built_seen.update(id(n) for n in ast.walk(node))   # the outermost assembly only
                    built = built_runner_name(folded, _pieces(node, folder))
                    if built:
                        add(node, "runner_internals", f"{built} (assembled from pieces)")
        if isinstance(node, ast.Call):
            name = _call_name(node)
            first = node.args[0] if node.args else None
            if name == "getattr" and len(node.args) >= 2:
                attr, owner = folder.fold(node.args[1]), _dotted(node.args[0], aliases, folder)
                if attr is not None:
                    words.append(f"{owner}.{attr}" if owner else "?." + attr)
                    if attr in EXEC_CALLS:
                        add(node, "dynamic_code", f"getattr(..., {attr!r})")
            builtin = _is_builtin_exec(node.func, aliases, folder)
            if builtin == "execfile":
                add(node, "code_loading", "execfile(...)")
            elif builtin and first is not None and not isinstance(first, ast.Constant):
                if calls_in(first, READERS, read_names):
                    add(node, "code_loading", f"{builtin}(<read from a file>)")
                elif calls_in(first, DECODERS, decoded_names):
                    add(node, "decoded_exec", f"{builtin}(...)")
                else:
                    add(node, "dynamic_code", f"{builtin}(...)")
            if name in ("FunctionType", "CodeType", "LambdaType"):
                add(node, "decoded_exec", name)
            if name in ("load", "loads", "Unpickler") and isinstance(node.func, ast.Attribute) \
                    and (_dotted(node.func.value, aliases, folder) or "").split(".")[0] in UNPICKLERS \
                    and first is not None:
                # unpickling calls whatever the pickle names: a literal one, or one read from a file
                if isinstance(first, ast.Constant):
                    add(node, "decoded_exec", f"{_dotted(node.func, aliases, folder)}(<literal>)")
                elif calls_in(first, READERS, read_names):
                    add(node, "code_loading", f"{_dotted(node.func, aliases, folder)}(<read from a file>)")
            if name in IMPORTERS and first is not None:
                target = folder.fold(first)
                if target is None:
                    add(node, "dynamic_import", f"{name}(...)")
                else:
                    words.append(target)
            if name == "write" and _dotted(node.func) == "os.write" and isinstance(first, ast.Constant) \
                    and first.value in (1, 2):
                add(node, "output_bypass", f"os.write({first.value}, ...)")
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                dotted = _dotted(target.value if isinstance(target, ast.Subscript) else target, aliases)
                if dotted in ("sys.stdout", "sys.stderr") and not isinstance(target, ast.Subscript):
                    add(node, "output_bypass", f"{dotted} = ...")
                if dotted == "sys.path":
                    add(node, "import_hook", "sys.path = ...")
        for word in words:
            for category in classify(word):
                add(node, category, word)
    return out


def _literal_findings(node: ast.Constant, path: str, depth: int, offset: int) -> list[Finding]:
    """A literal that is compiled code or a zip (``compiled_literal``), or a string that
    parses as Python with something in it (code kept as data: scanned as code)."""
    value = node.value
    data = value if isinstance(value, bytes) else None
    if data is None and len(value) >= 12:   # a str can hold the bytes too ('a\r\r\n...' is a pyc)
        data = value.encode("latin-1", "ignore")
    what = compiled_content(data) if data is not None else None
    if what:
        return [Finding(path, node.lineno + offset, "compiled_literal", what)]
    if isinstance(value, str) and depth < _MAX_NESTING and "\n" in value.strip() and len(value) >= 16:
        try:
            inner = parse(textwrap.dedent(value))   # a docstring's code is indented
        except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
            return []
        if any(not isinstance(stmt, ast.Expr) or isinstance(stmt.value, ast.Call) for stmt in inner.body):
            return _findings_ast(inner, path, depth + 1, offset + node.lineno - 1)
    return []


def _bound_names(nodes: list[ast.AST], calls: frozenset[str]) -> frozenset[str]:
    """Names bound (``=`` or ``with ... as``) to the result of one of ``calls`` anywhere in
    the module: decoders (what they hold is decoded data) or readers (read from a file)."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and any(isinstance(n, ast.Call) and _call_name(n) in calls for n in ast.walk(node.value)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name) and isinstance(item.context_expr, ast.Call) \
                        and _call_name(item.context_expr) in calls:
                    names.add(item.optional_vars.id)
    return frozenset(names)


def _findings_tokens(text: str, path: str, python: bool = True) -> list[Finding]:
    """Names and string literals only: the fallback for Python sources the host's parser
    rejects, and the scan of any other text (``python`` False: a bare ``exec`` or
    ``compile`` in prose is no finding there, the names of the categories are)."""
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = []
        for number, line in enumerate(text.split("\n"), 1):
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*|'[^']*'|\"[^\"]*\"", line):
                tokens.append(tokenize.TokenInfo(tokenize.NAME, word.strip("'\""), (number, 0), (number, 0), line))
    for tok in tokens:
        if tok.type not in (tokenize.NAME, tokenize.STRING):
            continue
        word = tok.string
        if tok.type == tokenize.STRING:
            try:
                with _PARSE_LOCK:
                    value = ast.literal_eval(word)
                word = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            except (ValueError, SyntaxError, SystemError, MemoryError, RecursionError):
                pass
        for category in classify(word):
            out.append(Finding(path, tok.start[0], category, word[:120]))
        if python and word in EXEC_CALLS:
            out.append(Finding(path, tok.start[0], "dynamic_code", word))
    return out


def is_python_name(path: str) -> bool:
    return path.endswith(PYTHON_SUFFIXES)


def _is_data(tree: ast.Module) -> bool:
    """A module that is one literal (JSON parses as Python): data, not a program."""
    if len(tree.body) > 1:
        return False
    if not tree.body:
        return True
    stmt = tree.body[0]
    if not isinstance(stmt, ast.Expr):
        return False
    literal = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Name, ast.UnaryOp, ast.USub,
               ast.Load, ast.expr_context)
    return all(isinstance(n, literal) for n in ast.walk(stmt.value))


def findings(source: bytes, path: str) -> tuple[list[Finding], bool]:
    """Every finding in one file, whatever its name; the flag says whether ``ast`` could
    parse it. A Python file is parsed (token by token when the host's parser cannot); a
    file of another name that parses as a program is scanned as one; any other text
    (prose, configuration, a literal such as JSON) token by token, its findings marked
    as data: they flag, because such text runs only through a loader, itself a finding."""
    text = decode(source)
    python = is_python_name(path)
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        found = _findings_tokens(text, path, python)
        return (found if python else [dataclasses.replace(f, data=True) for f in found]), False
    if not python and _is_data(tree):
        return [dataclasses.replace(f, data=True) for f in _findings_tokens(text, path, False)], True
    return _findings_ast(tree, path), True


def added_findings(new: bytes, old: bytes | None, path: str) -> tuple[list[Finding], bool]:
    """Findings the new version of a file has beyond the old one (by category and name)."""
    now, parsed = findings(new, path)
    if old is None or not now:  # nothing to subtract from: the old version need not be read
        return now, parsed
    before = Counter((f.category, f.what) for f in findings(old, path)[0])
    out = []
    for finding in now:
        key = (finding.category, finding.what)
        if before[key] > 0:
            before[key] -= 1
        else:
            out.append(finding)
    return out, parsed


def pattern_findings(new: bytes, old: bytes | None, path: str, pattern: str) -> list[Finding]:
    """Added lines matching a runner's own internals pattern (``Runner.internals``: sympy's
    reporter classes, the harness's JUnit reporter), as ``runner_internals`` findings. Lines
    are split wherever Python or any splitter would end one (over-splitting only adds lines)."""
    if not pattern:
        return []
    compiled = re.compile(pattern)
    before = Counter(decode(old).splitlines()) if old is not None else Counter()
    out = []
    for number, line in enumerate(decode(new).splitlines(), 1):
        if before[line] > 0:
            before[line] -= 1
            continue
        match = compiled.search(line)
        if match:
            out.append(Finding(path, number, "runner_internals", match.group(0)[:80]))
    return out


@dataclass
class ScanResult:
    hits: list[Finding] = field(default_factory=list)
    tokenized: list[str] = field(default_factory=list)    # Python files the host's ast could not parse


class UnscannedFile(ValueError):
    """A kept file came without its content: the refusal of files too large to inspect
    (:func:`harness.integrity.artefacts.refusal`) was skipped (a harness fault)."""


def scan_changes(changes: Iterable, kept: set[str], pristine: Callable[[str], "tuple[bytes, int] | None"],
                 internals: str) -> ScanResult:
    """Scan every file the model changed that stays (``kept``) among the tree truth's
    ``changes`` (``harness.integrity.tree.TreeChange``), whatever its name: what each adds
    over its pristine version. Mode-only changes add nothing and are skipped."""
    out = ScanResult()
    for change in changes:
        if change.path not in kept or change.kind != "file" or change.change == "mode":
            continue
        if change.content is None:
            raise UnscannedFile(f"{change.path}: no content to scan ({change.content_omitted or 'not sent'})")
        old = pristine(change.path) if change.change != "created" else None
        found, parsed = added_findings(change.content, old[0] if old else None, change.path)
        out.hits += found + pattern_findings(change.content, old[0] if old else None, change.path, internals)
        if not parsed and is_python_name(change.path):
            out.tokenized.append(change.path)
    return out
